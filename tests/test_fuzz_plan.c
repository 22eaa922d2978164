/* The plan reader against damaged plans: the plans of graphs/tiny.lua under amp_fp16 and
 * fp32 (batch 2, seq 8), cut, flipped and edited at random (a number replaced by an extreme
 * value or moved by one, a line deleted, repeated or swapped with another, a field given
 * another line's value), nine in ten sealed again so that the content hash lets them through
 * to the checks of what they hold. The cases run in worker processes, and each must be
 * either refused with one message that starts with the plan's path and a line number, or
 * accepted; the first FUZZ_RUNS accepted ones must then run a training step (micro and update
 * phase) on the ref backend. A crash, a hang (FUZZ_SECONDS), another message or a refusal by
 * the ref backend fails the test, and the case is written to build/tests/tmp/fuzz_plan_CASE.
 * Reproducible: MMC_FUZZ_SEED (default 1) and MMC_FUZZ_CASES (default 3000) give the run;
 * MMC_FUZZ_ONLY=N runs case N alone, in this process, for a debugger. */
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#include "init.h"
#include "train.h"

/* the accepted cases that run a step, the seconds a case may take, the buffers a step may
 * allocate, and the cases a worker process runs */
enum { FUZZ_RUNS = 200, FUZZ_SECONDS = 60, FUZZ_MAX_BUFFERS = 256 << 20, FUZZ_BATCH = 250 };

/* the case's own generator: splitmix64 of (seed, case), so each case repeats alone */
static uint64_t rng;
static uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(next_u64() % n) : 0; }

typedef struct Text {
    char **line; /* each without its '\n' */
    int n;
} Text;

static Text lines_of(const char *s) {
    Text t = {0};
    int cap = 0;
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        vec_push(t.line, t.n, cap, xstrndup(s, len));
        s += len + (nl != NULL);
    }
    return t;
}

static char *joined(const Text *t) {
    StrBuf o = {0};
    sb_append(&o, "");
    for (int i = 0; i < t->n; i++) sb_printf(&o, "%s\n", t->line[i]);
    return o.s;
}

/* the spans [start, end) of the numbers of a line: digits, with a leading '-' */
static int numbers_of(const char *s, int *start, int *end, int max) {
    int n = 0;
    for (int i = 0; s[i] && n < max;) {
        if (s[i] >= '0' && s[i] <= '9') {
            int b = i > 0 && s[i - 1] == '-' ? i - 1 : i;
            while (s[i] >= '0' && s[i] <= '9') i++;
            start[n] = b, end[n] = i, n++;
        } else {
            i++;
        }
    }
    return n;
}

static char *spliced(const char *s, int from, int to, const char *with) {
    return xasprintf("%.*s%s%s", from, s, with, s + to);
}

static const char *const extremes[] = {"0", "-1", "1", "2147483648", "-2147483649", "4294967296", "9223372036854775808",
                                       "-9223372036854775809", "1e308", "nan", "inf", "0.5", "", "65536", "1099511627777"};

/* one random change of the text, 0 where the one drawn finds nothing to change; `what` says
 * which, for the report */
static int mutate(Text *t, StrBuf *what) {
    int i = (int)below((size_t)t->n), j = (int)below((size_t)t->n);
    char *s = t->line[i];
    switch (below(8)) {
    case 0: { /* a number replaced by an extreme value */
        int st[64], en[64], n = numbers_of(s, st, en, 64);
        if (!n) return 0;
        int k = (int)below((size_t)n);
        const char *v = extremes[below(sizeof extremes / sizeof *extremes)];
        sb_printf(what, " line %d: number %d -> '%s';", i + 1, k, v);
        t->line[i] = spliced(s, st[k], en[k], v);
        break;
    }
    case 1: { /* a number moved by one */
        int st[64], en[64], n = numbers_of(s, st, en, 64);
        if (!n) return 0;
        int k = (int)below((size_t)n);
        char *num = xstrndup(s + st[k], (size_t)(en[k] - st[k]));
        char *v = xasprintf("%lld", strtoll(num, NULL, 10) + (below(2) ? 1 : -1));
        sb_printf(what, " line %d: %s -> %s;", i + 1, num, v);
        t->line[i] = spliced(s, st[k], en[k], v);
        break;
    }
    case 2: /* a line deleted */
        sb_printf(what, " line %d deleted;", i + 1);
        memmove(t->line + i, t->line + i + 1, (size_t)(t->n - i - 1) * sizeof *t->line);
        t->n--;
        break;
    case 3: /* a line repeated */
        sb_printf(what, " line %d repeated at %d;", i + 1, j + 1);
        t->line = xrealloc(t->line, (size_t)(t->n + 1) * sizeof *t->line);
        memmove(t->line + j + 1, t->line + j, (size_t)(t->n - j) * sizeof *t->line);
        t->line[j] = xstrdup(s);
        t->n++;
        break;
    case 4: /* two lines swapped */
        sb_printf(what, " lines %d and %d swapped;", i + 1, j + 1);
        t->line[i] = t->line[j], t->line[j] = s;
        break;
    case 5: { /* a field given the value of the same key on another line */
        int n_eq = 0;
        for (const char *e = s; (e = strchr(e, '=')); e++) n_eq++;
        if (!n_eq) return 0;
        const char *eq = strchr(s, '=');
        for (size_t k = below((size_t)n_eq); k--;) eq = strchr(eq + 1, '=');
        const char *key = eq;
        while (key > s && key[-1] != ' ') key--;
        char *k = xasprintf(" %.*s", (int)(eq - key + 1), key);
        const char *other = strstr(t->line[j], k);
        if (!other || i == j) return 0;
        other += strlen(k);
        char *v = xstrndup(other, strcspn(other, " "));
        sb_printf(what, " line %d:%s -> %s (line %d);", i + 1, k, v, j + 1);
        t->line[i] = spliced(s, (int)(eq + 1 - s), (int)(eq + 1 - s + strcspn(eq + 1, " ")), v);
        break;
    }
    case 6: { /* bytes flipped */
        size_t len = strlen(s);
        if (!len) return 0;
        for (size_t n = 1 + below(3); n--;) {
            size_t at = below(len);
            char c = below(2) ? (char)(s[at] ^ (1 << below(7))) : " =,%-+.0123456789x"[below(18)];
            if (c == '\n' || c == 0) c = ' ';
            sb_printf(what, " line %d byte %zu -> 0x%02x;", i + 1, at, (unsigned char)c);
            s[at] = c;
        }
        break;
    }
    default: { /* cut at a byte */
        size_t len = strlen(s), at = below(len + 1);
        sb_printf(what, " cut in line %d at byte %zu;", i + 1, at);
        s[at] = 0;
        t->n = i + 1;
        break;
    }
    }
    return 1;
}

static jmp_buf on_die;
static char message[4096];
static void hook(const char *msg) {
    snprintf(message, sizeof message, "%s", msg);
    longjmp(on_die, 1);
}

/* refused the plan's way: "mmc: PATH:LINE: ..." */
static int located(const char *msg, const char *path) {
    size_t n = strlen(path);
    if (strncmp(msg, "mmc: ", 5) || strncmp(msg + 5, path, n) || msg[5 + n] != ':') return 0;
    const char *p = msg + 6 + n;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return p[0] == ':' && p[1] == ' ';
}

/* an accepted plan's training step, as mmc train makes one: weights from their initialisers,
 * the constant tables, a batch of ids below the vocabulary in the role inputs, a fresh state.
 * 0 where mmc train would not run the plan (no vocabulary or tokens) or the buffers are more
 * than a test should allocate; else 1 and the loss. */
static int step(Plan *pl, double *loss) {
    int64_t total = 0;
    for (int b = 0; b < BUF_COUNT; b++) total += pl->p->buffer_bytes[b];
    if (total > FUZZ_MAX_BUFFERS || !model_has(&pl->g->model, MF_VOCAB) || !pl->g->role[ROLE_TOKENS]) return 0;
    Backend *b = ref_backend_create(pl);
    init_params(b, 1);
    init_consts(b);
    for (int k = 0; k < ROLE_COUNT; k++) {
        const Node *n = pl->g->role[k];
        if (!n) continue;
        int64_t count = shape_numel(&n->shape);
        int32_t *ids = xmalloc((size_t)count * sizeof *ids);
        for (int64_t e = 0; e < count; e++) ids[e] = (int32_t)below((size_t)pl->g->model.value[MF_VOCAB]);
        b->write(b, n->buffer, n->offset, ids, count * (int64_t)sizeof *ids);
        free(ids);
    }
    MmcStepState st = init_state(pl, 10);
    b->write(b, BUF_STATE, 0, &st, sizeof st);
    b->run_phase(b, PHASE_MICRO);
    *loss = read_loss(b);
    b->run_phase(b, PHASE_UPDATE);
    b->destroy(b);
    return 1;
}

enum { REFUSED = 10, ACCEPTED, STEPPED, STEPPED_NAN, MISPLACED, STEP_REFUSED };

static int run_case(const char *text, int run_step) {
    const char *path = "fuzz/plan";
    set_die_hook(hook);
    if (setjmp(on_die)) {
        if (located(message, path)) return REFUSED;
        fprintf(stderr, "  refused without a plan line: %s\n", message);
        return MISPLACED;
    }
    Plan *pl = plan_read(text, path);
    if (!run_step) return ACCEPTED;
    if (setjmp(on_die)) {
        fprintf(stderr, "  accepted, then refused by the ref backend: %s\n", message);
        return STEP_REFUSED;
    }
    double loss = 0;
    return !step(pl, &loss) ? ACCEPTED : isfinite(loss) ? STEPPED : STEPPED_NAN;
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : fallback;
}

static char *make_case(char *const *plans, uint64_t seed, uint64_t index, StrBuf *what) {
    rng = seed * 0x100000001b3ull ^ (index + 1) * 0x9e3779b97f4a7c15ull;
    next_u64();
    int base = (int)below(2);
    Text t = lines_of(plans[base]);
    sb_printf(what, "plan %d;", base);
    for (size_t m = 1 + below(3); m--;)
        for (int tries = 0; tries < 16 && !mutate(&t, what); tries++) continue;
    char *text = joined(&t);
    if (below(10)) {
        text = plan_seal(text);
        sb_append(what, " sealed");
    }
    return text;
}

/* Cases [from, to) in a worker process, one result byte each on `fd`, `stepped` steps run
 * before them: a worker runs many cases (a fork of this binary, which maps the CUDA
 * libraries, takes milliseconds), and the leaks of the refused plans end with it. */
static MMC_NORETURN void worker(char *const *plans, uint64_t seed, uint64_t from, uint64_t to, int stepped, int fd) {
    for (uint64_t c = from; c < to; c++) {
        StrBuf what = {0};
        char *text = make_case(plans, seed, c, &what);
        unsigned char rc = (unsigned char)run_case(text, stepped < FUZZ_RUNS);
        stepped += rc == STEPPED || rc == STEPPED_NAN || rc == STEP_REFUSED;
        if (write(fd, &rc, 1) != 1) _exit(2);
        free(text), sb_free(&what);
    }
    _exit(0);
}

/* The plan of the tiny graph under a policy at batch 2, seq 8, compiled in a child: a
 * compile leaves a few hundred MB behind, which every fork of the cases would copy. */
static char *base_plan(const char *policy) {
    char *path = xasprintf("build/tests/tmp/fuzz_plan_base_%s", policy);
    make_dirs("build/tests/tmp");
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        CompileOptions o = {0};
        Define d[2] = {{"batch", "2"}, {"seq", "8"}};
        o.front.graph_path = "graphs/tiny.lua";
        o.front.policy_path = policy;
        o.front.defines = d, o.front.n_defines = 2;
        char *plan = compile_graph(&o).plan;
        write_file_atomic(path, plan, strlen(plan));
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) die("%s: the tiny graph did not compile", policy);
    return read_file(path, NULL);
}

int main(void) {
    setenv("MMC_THREADS", "1", 1); /* a case is small; its children share the machine */
    setenv("MMC_QUIET", "1", 1);
    uint64_t seed = env_u64("MMC_FUZZ_SEED", 1), cases = env_u64("MMC_FUZZ_CASES", 3000);
    const char *only = getenv("MMC_FUZZ_ONLY");
    printf("test_fuzz_plan: seed %llu, %llu cases (MMC_FUZZ_SEED, MMC_FUZZ_CASES)\n", (unsigned long long)seed,
           (unsigned long long)cases);
    const char *policies[] = {"amp_fp16", "fp32"};
    char *plans[2];
    for (int i = 0; i < 2; i++) {
        plans[i] = base_plan(policies[i]);
        fflush(stdout), fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) _exit(run_case(plans[i], 1));
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == STEPPED, "%s: the plan as written does not run a step (status %#x)",
              policies[i], status);
    }
    if (only) {
        StrBuf what = {0};
        char *text = make_case(plans, seed, strtoull(only, NULL, 10), &what);
        printf("case %s:%s\n", only, what.s);
        write_file_atomic("build/tests/tmp/fuzz_plan_only", text, strlen(text));
        int rc = run_case(text, 1);
        printf("case %s: %s\n", only, rc == REFUSED || rc == MISPLACED ? message : "accepted");
        return 0;
    }
    int count[STEP_REFUSED + 1] = {0}, crashes = 0, hangs = 0, stepped = 0;
    double t0 = now_seconds();
    for (uint64_t c = 0; c < cases;) {
        uint64_t to = c + FUZZ_BATCH < cases ? c + FUZZ_BATCH : cases;
        int fd[2];
        if (pipe(fd)) die("pipe: cannot start a worker");
        fflush(stdout), fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) die("fork: cannot start a worker");
        if (pid == 0) {
            close(fd[0]);
            worker(plans, seed, c, to, stepped, fd[1]);
        }
        close(fd[1]);
        while (c < to) {
            /* a case that gives no result in time hangs; a worker that ends before it gives one crashed */
            struct pollfd p = {fd[0], POLLIN, 0};
            unsigned char rc = 0;
            int ready = poll(&p, 1, FUZZ_SECONDS * 1000), hung = ready == 0, got = ready > 0 && read(fd[0], &rc, 1) == 1;
            if (got) {
                count[rc < REFUSED || rc > STEP_REFUSED ? MISPLACED : rc]++;
                stepped += rc == STEPPED || rc == STEPPED_NAN || rc == STEP_REFUSED;
            }
            if (hung) kill(pid, SIGKILL);
            int status = 0;
            if (!got) waitpid(pid, &status, 0), pid = -1;
            if (!got || rc == MISPLACED || rc == STEP_REFUSED) {
                StrBuf what = {0};
                char *text = make_case(plans, seed, c, &what);
                char *path = xasprintf("build/tests/tmp/fuzz_plan_%llu", (unsigned long long)c);
                write_file_atomic(path, text, strlen(text));
                char *how = hung ? xstrdup("hung") : !got && WIFSIGNALED(status) ? xasprintf("crashed (signal %d)", WTERMSIG(status))
                          : !got ? xasprintf("ended its worker (status %d)", WEXITSTATUS(status))
                          : xstrdup(rc == MISPLACED ? "a message without its line" : "refused by the ref backend");
                fprintf(stderr, "  case %llu %s:%s; the plan is %s (MMC_FUZZ_ONLY=%llu runs it alone)\n", (unsigned long long)c, how,
                        what.s, path, (unsigned long long)c);
                crashes += !got && !hung, hangs += hung;
            }
            c++;
            if (!got) break;
        }
        close(fd[0]);
        if (pid > 0) waitpid(pid, NULL, 0);
    }
    double secs = now_seconds() - t0;
    int accepted = count[ACCEPTED] + count[STEPPED] + count[STEPPED_NAN] + count[STEP_REFUSED];
    printf("test_fuzz_plan: %llu cases in %.1f s: %d refused with their line, %d accepted (%d ran a step, %d of them to a "
           "non-finite loss), %d crashes, %d hangs, %d messages without a line, %d refused by the ref backend\n",
           (unsigned long long)cases, secs, count[REFUSED], accepted, stepped, count[STEPPED_NAN], crashes, hangs,
           count[MISPLACED], count[STEP_REFUSED]);
    CHECK(crashes == 0 && hangs == 0, "%d crashes, %d hangs", crashes, hangs);
    CHECK(count[MISPLACED] == 0, "%d refusals do not name the plan's line", count[MISPLACED]);
    CHECK(count[STEP_REFUSED] == 0, "%d accepted plans were refused by the ref backend", count[STEP_REFUSED]);
    CHECK(count[REFUSED] + accepted + count[MISPLACED] + crashes + hangs == (int)cases, "cases unaccounted for");
    return test_done("test_fuzz_plan");
}
