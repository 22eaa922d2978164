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

/* `text` with its first `from` replaced by `to` */
static char *replaced(const char *text, const char *from, const char *to) {
    const char *at = strstr(text, from);
    if (!at) return xstrdup(text);
    return xasprintf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
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

    /* what the runtime needs beside the graph comes back from the plan: the inputs by role,
     * model{}, and the config.json fields as JSON text */
    const Graph *mg = pm->g;
    CHECK(mg->role[ROLE_TOKENS] && !strcmp(mg->role[ROLE_TOKENS]->name, "input_ids") && mg->role[ROLE_TARGETS] &&
              !strcmp(mg->role[ROLE_TARGETS]->name, "labels"),
          "minimind: the roles do not name input_ids and labels");
    CHECK(mg->model.value[MF_VOCAB] == 6400 && mg->model.value[MF_PAD_ID] == 0 && mg->model.value[MF_BOS_ID] == 1 &&
              mg->model.value[MF_EOS_ID] == 2 && model_has(&mg->model, MF_MAX_POSITIONS),
          "minimind: model{} read back as vocab %lld pad %lld bos %lld eos %lld", (long long)mg->model.value[MF_VOCAB],
          (long long)mg->model.value[MF_PAD_ID], (long long)mg->model.value[MF_BOS_ID], (long long)mg->model.value[MF_EOS_ID]);
    int found = 0;
    for (int i = 0; i < mg->json[JF_CHECKPOINT].n; i++) {
        const JsonField *f = &mg->json[JF_CHECKPOINT].f[i];
        found |= !strcmp(f->key, "model_type") && !strcmp(f->json, "\"minimind\"");
    }
    CHECK(found && mg->json[JF_EXPORT_HF].n > 0, "minimind: the config.json fields did not come back");
    const char *model_line = strstr(a.plan, "\nmodel ");
    CHECK(model_line != NULL, "tiny: no model line");
    if (model_line) {
        char *no_model = xasprintf("%.*s%s", (int)(model_line - a.plan), a.plan, strchr(model_line + 1, '\n'));
        expect_refused("no model line", no_model, "recompile with mmc compile");
        char *tokens = xasprintf(" tokens=%%%d ", a.g->role[ROLE_TOKENS]->id);
        const char *at_tokens = strstr(a.plan, tokens);
        char *to_param = xasprintf("%.*s tokens=%%%d %s", (int)(at_tokens - a.plan), a.plan, a.g->params[0].node->id,
                                   at_tokens + strlen(tokens));
        expect_refused("a role on a parameter", to_param, "the role tokens names");
    }

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
    expect_refused("future format", "mmc-plan 99\nend\n", "bad/plan:1: plan format 99, this mmc reads format 2");
    expect_refused("a plan from before the attribute and launch tables", "mmc-plan 1\nend\n", "recompile with mmc compile");
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
    /* op lines carry exactly the attributes their op uses (compiler/attrs.h), each readable */
    expect_refused("an attribute the op does not use", with_field(a.plan, " add in=", " heads=2"),
                   "field 'heads' is no attribute of add");
    char *no_eps = xstrdup(a.plan), *eps = strstr(strstr(no_eps, " rms_normalize in="), " eps=");
    memmove(eps, strchr(eps + 1, ' '), strlen(strchr(eps + 1, ' ')) + 1);
    expect_refused("a missing attribute", no_eps, "rms_normalize needs attribute eps");
    char *bad_heads = xstrdup(a.plan);
    memcpy(strstr(strstr(bad_heads, " rope in="), " heads=") + 7, "x", 1);
    expect_refused("a bad attribute value", bad_heads, "heads: 'x");
    expect_refused("an attribute twice", with_field(a.plan, " rope in=", " heads=2"), "attribute heads given twice");
    /* kernel kinds, phases, optimizer kernels and lr schedules are names from their tables
     * (program.h, lr_schedule.h): any other word is refused on its line, with the known ones */
    char *bad_opt = replaced(a.plan, " optimizer=adamw", " optimizer=adam");
    want = xasprintf("bad/plan:%d: unknown optimizer kernel 'adam' (known: grad_norm, adamw or step_finish)",
                     line_of(bad_opt, " optimizer=adam"));
    expect_refused("an unknown optimizer kernel", bad_opt, want);
    char *no_opt = replaced(a.plan, " optimizer=adamw", "");
    want = xasprintf("bad/plan:%d: missing field optimizer", line_of(no_opt, "_adamw kind=optimizer"));
    expect_refused("an optimizer kernel without its name", no_opt, want);
    expect_refused("an optimizer name on another kernel", with_field(a.plan, "\nkernel k002_", " optimizer=adamw"),
                   "optimizer=adamw on a");
    char *bad_phase = replaced(a.plan, " phase=update", " phase=updates");
    want = xasprintf("bad/plan:%d: unknown phase 'updates' (known: micro or update)", line_of(bad_phase, " phase=updates"));
    expect_refused("an unknown phase", bad_phase, want);
    expect_refused("an unknown kernel kind", replaced(a.plan, " kind=anchor", " kind=anchors"),
                   "unknown kernel kind 'anchors' (known: elementwise, anchor, gemm, cast_weights, optimizer or grad_accumulate)");
    expect_refused("an unknown lr schedule", replaced(a.plan, " schedule=minimind_cosine", " schedule=cosine"),
                   "unknown schedule 'cosine' (known: minimind_cosine or constant)");
    return test_done("test_plan");
}
