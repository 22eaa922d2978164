/* The plan file: reading a plan and writing it again gives the same bytes (the loader
 * keeps everything the compiler wrote); its hash follows every input (graph, -D, policy);
 * malformed plans are refused with the file and line. */
#include <setjmp.h>

#include "test_util.h"

static jmp_buf on_die;
static char last_error[1024];
static void hook(const char *msg) {
    snprintf(last_error, sizeof last_error, "%s", msg);
    longjmp(on_die, 1);
}

/* `text` with `what` put in before the end of the first line that starts with `line` */
static char *with_field(const char *text, const char *line, const char *what) {
    const char *at = strstr(text, line);
    if (!at) return xstrdup(text);
    size_t cut = (size_t)(strchr(at + 1, '\n') - text);
    return xasprintf("%.*s%s%s", (int)cut, text, what, text + cut);
}

/* the line number, in `text`, of the first line that holds `what` */
static int line_of(const char *text, const char *what) {
    const char *at = strstr(text, what);
    int line = 1;
    for (const char *s = text; at && s < at; s++) line += *s == '\n';
    return line;
}

static CompileResult compile(const char *graph, const char *policy, const char *define) {
    CompileOptions o = {0};
    o.front.graph_path = graph;
    o.front.policy_path = policy;
    Define d = {"seq", (char *)define};
    if (define) o.front.defines = &d, o.front.n_defines = 1;
    return compile_graph(&o);
}

static void expect_refused(const char *what, const char *text, const char *want) {
    set_die_hook(hook);
    last_error[0] = 0;
    if (!setjmp(on_die)) {
        plan_read(text, "bad/plan");
        CHECK(0, "%s: accepted", what);
    } else {
        CHECK(strstr(last_error, want) != NULL, "%s: message '%s' lacks '%s'", what, last_error, want);
    }
    set_die_hook(NULL);
}

int main(void) {
    const char *policies[] = {"amp_fp16", "fp32", "fp16_wide", "fp64"};
    for (size_t i = 0; i < 4; i++) {
        CompileResult r = compile("graphs/tiny.lua", policies[i], NULL);
        Plan *pl = plan_read(r.plan, "tiny/plan");
        char *again = plan_write(pl->g, pl->p);
        CHECK(!strcmp(again, r.plan), "%s: the plan read back and written again differs", policies[i]);
        free(again);
    }
    CompileResult m = compile("graphs/minimind.lua", NULL, NULL);
    Plan *pm = plan_read(m.plan, "minimind/plan");
    char *again = plan_write(pm->g, pm->p);
    CHECK(!strcmp(again, m.plan), "minimind: the plan read back and written again differs");
    CHECK(strstr(m.kernels, m.g->hash) != NULL, "kernels.cu carries the plan's hash");
    CompileResult a = compile("graphs/tiny.lua", NULL, NULL), b = compile("graphs/tiny.lua", NULL, NULL);
    CompileResult c = compile("graphs/tiny.lua", NULL, "16"), d = compile("graphs/tiny.lua", "fp32", NULL);
    CHECK(!strcmp(a.g->hash, b.g->hash), "the same inputs give the same hash");
    CHECK(strcmp(a.g->hash, c.g->hash) && strcmp(a.g->hash, d.g->hash), "a -D or a policy changes the hash");

    /* embedding_sort reads only the ids: scheduled first, on the side stream, written as
     * stream=1 on its kernel line and on no other, and read back */
    const Group *first = pm->p->groups[0];
    CHECK(first->anchor && first->anchor->op == OP_EMBEDDING_SORT && first->stream == 1,
          "minimind: the first kernel is %s on stream %d, not embedding_sort on the side stream", first->kernel, first->stream);
    int side = 0;
    for (int i = 0; i < pm->p->n_groups; i++) side += pm->p->groups[i]->stream;
    CHECK(side == 1, "minimind: %d kernels on the side stream, not 1", side);
    const char *st = strstr(m.plan, " stream=");
    CHECK(st && !strncmp(st, " stream=1 ", 10) && !strstr(st + 1, " stream="), "minimind: stream=1 is not on one kernel line only");

    expect_refused("not a plan", "hello\n", "bad/plan:1: not an mmc plan");
    expect_refused("future format", "mmc-plan 99\nend\n", "bad/plan:1: plan format 99, this mmc reads format 1");
    char *cut = xstrndup(a.plan, strlen(a.plan) / 2);
    cut[strrchr(cut, '\n') - cut + 1] = 0;
    expect_refused("cut short", cut, "the plan is cut short");
    char *bad_op = xstrdup(a.plan);
    char *at = strstr(bad_op, " embedding ");
    memcpy(at, " embeddinx ", 11);
    expect_refused("unknown op", bad_op, "unknown op 'embeddinx'");
    char *bad_stream = xstrdup(a.plan);
    memcpy(strstr(bad_stream, " stream=1") + 8, "2", 1);
    char *want = xasprintf("bad/plan:%d: bad stream '2'", line_of(bad_stream, " stream=2"));
    expect_refused("stream 2", bad_stream, want);
    char *gemm_side = with_field(a.plan, "\ngemm ", " stream=1");
    want = xasprintf("bad/plan:%d: stream=1 on a gemm kernel", line_of(gemm_side, "\ngemm ") + 1);
    expect_refused("a gemm on the side stream", gemm_side, want);
    char *late_side = with_field(a.plan, "\nkernel k002_", " stream=1");
    expect_refused("a side kernel reading another's output", late_side, "which another kernel writes");
    return test_done("test_plan");
}
