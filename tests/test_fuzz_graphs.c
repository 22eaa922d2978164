/* test_fuzz_graphs: a graph file, however damaged or hostile, ends in one located error or a
 * compiled plan, within the limits (lowered here, so that a case takes milliseconds): never
 * a crash, a hang or a machine's worth of memory. The cases:
 *   - bombs: loops that never end, recursion, strings and tables that grow without end,
 *     nodes and rules without end, shapes no machine holds, include of /dev/zero, of
 *     /etc/passwd by "..", of a FIFO, of a symbolic link out and of a folder, finalizers,
 *     library functions that loop in C;
 *   - mutants of graphs/tiny.lua and of graphs/minimind.lua (which tiny includes, here found
 *     through -I graphs): lines deleted, repeated, swapped or cut off, tokens swapped,
 *     numbers replaced by extremes, strings by odd names and paths, names by other DSL
 *     functions, bombs put in.
 * Each case is compiled through the whole pipeline (compile_graph, die() jumping back) in a
 * worker process, so that a crash or a hang (FUZZ_SECONDS) is counted rather than suffered;
 * an error must be one line that names a file:line or the graph's path. The die path must
 * close the Lua state: thirty failing memory bombs in one process may not leave thirty Lua
 * states behind. MMC_FUZZ_SEED (default 1) and MMC_FUZZ_CASES (mutants, default 3000) repeat
 * a run, MMC_FUZZ_VERBOSE=1 prints every case; a failing case is written to
 * build/tests/tmp/fuzz_graphs/fail_N.lua. */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

/* the seconds a case may take, the limits it runs under (tiny takes 9 * 10^4 steps, 60 KiB
 * and 75 nodes; a thousand nodes, 30 layers, compile in half a second, while the passes after
 * the frontend take minutes for a few thousand), the cases a worker process runs, and the
 * most memory a worker may reach (this binary maps the CUDA libraries: 180 MiB before it
 * starts) */
enum {
    FUZZ_SECONDS = 30, FUZZ_LUA_MIB = 64, FUZZ_LUA_STEPS = 2000000, FUZZ_MAX_NODES = 1000, FUZZ_BATCH = 200,
    FUZZ_MAX_RSS_MIB = 1024,
};
#define FUZZ_DIR "build/tests/tmp/fuzz_graphs"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1 /* its shadow memory is no case's own */
#else
#define UNDER_ASAN 0
#endif

/* the case's own generator: splitmix64 of (seed, case), so each case repeats alone */
static uint64_t rng;
static uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(next_u64() % n) : 0; }

static CompileOptions fuzz_options(const char *path) {
    static const char *const dirs[] = {"graphs"};
    CompileOptions o = {0};
    o.front.graph_path = path;
    o.front.include_dirs = dirs;
    o.front.n_include_dirs = 1;
    o.front.lua_memory = (int64_t)FUZZ_LUA_MIB << 20;
    o.front.lua_steps = FUZZ_LUA_STEPS;
    o.front.max_nodes = FUZZ_MAX_NODES;
    return o;
}

/* ---- the cases */

/* Each needs nothing but the files of fixtures() beside it. */
static const char *const bombs[] = {
    "while true do end",
    "local function f() return f() end f()",
    "local function f(n) return f(n + 1) + 1 end f(1)",
    "local t = setmetatable({}, { __index = function(t, k) return t[k] end }) local _ = t.x",
    "local s = string.rep('x', 1 << 40)",
    "local s = string.rep('x', 60 << 20)",
    "local s = ('').rep('', 1 << 62) loss(sum_all(param('w', {2}, 'ones')))",
    "local s = 'x' while true do s = s .. s end",
    "local s = ('a'):rep(1 << 20) while true do local t = s:upper() end",
    "local t, i = {}, 0 while true do i = i + 1 t[i] = i end",
    "local t = {} while true do t[#t + 1] = {} end",
    "local t = {} for i = 1, 1e5 do t[i] = i end while true do table.remove(t, 1) end",
    "local t = {} for i = 1, 1e5 do t[i] = i end while true do table.insert(t, 1, 0) end",
    "table.move({}, 1, 1 << 62, 2)",
    "local t = {} for i = 1, 2e5 do t[i] = i end local function f(...) return f(...) end f(table.unpack(t))",
    "local t = {} for i = 1, 2e5 do t[i] = i end local function f(...) while true do local n = select('#', ...) end end "
    "f(table.unpack(t))",
    "local t = {} for i = 1, 2e5 do t[i] = i end while true do local a = math.max(table.unpack(t)) end",
    "local s = ('x'):rep(2e5) while true do local a = s:byte(1, -1) end",
    "local s = ('x'):rep(1 << 20) while true do print(s) end",
    "local w = param('w', {1}, 'ones') getmetatable(w).__gc = function() while true do end end",
    "local t = {} for i = 1, 1e5 do t[i] = -i end while true do table.sort(t) end",
    "local t = {} for i = 1, 1e6 do t['k' .. i] = i end config(t)",
    "local x = param('w', {1}, 'ones') while true do x = add(x, x) end",
    "for i = 1, 1e9 do param('p' .. i, {1}, 'ones') end",
    "for i = 1, 1e9 do rule { op = 'silu', compute = 'f32' } end",
    "while true do train {} end",
    "for i = 1, 1e9 do include 'small.lua' end",
    "include 'case.lua'",
    "include '/dev/zero'",
    "include '/dev/stdin'",
    "include '../../../../../../../../etc/passwd'",
    "include 'fifo.lua'",
    "include 'out.lua'",
    "include 'dir.lua'",
    "include ''",
    "precision '/dev/zero'",
    "precision 'fifo.lua'",
    "precision 'out.lua'",
    "param('w', {1 << 20, 1 << 20, 1 << 20}, 'ones')",
    "input('x', {1 << 62})",
    "input('x', {1 << 40, 1 << 40})",
    "rope_tables(1 << 40, 1 << 40, 1e4)",
    "local cos, sin = rope_tables(1 << 30, 1 << 12, 1e4)",
    "local x = input('x', {1 << 30, 1}) loss(sum_all(linear(x, param('w', {1 << 12, 1}, 'ones'))))",
    "for i = 1, 100 do input('x' .. i, {1 << 40}) end",
    "setmetatable({}, { __gc = function() while true do end end })",
    "local mt = {} setmetatable({}, mt) mt.__gc = function() while true do end end while true do end",
    "error({})",
    "error()",
    "error('no place', 0)",
    "error(setmetatable({}, { __tostring = function() while true do end end }))",
    "pcall(function() while true do end end)",
    "load('return 1')()",
    "collectgarbage('stop')",
    "print(('x'):find('x'))",
    "coroutine.wrap(function() while true do end end)()",
    "string.dump(print)",
    "return " "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((",
    "config { ['a b'] = 1 }",
    "config { s = 'x\\ny' }",
    "named(silu(param('w', {2}, 'ones')), 'x\\nparam 0 evil')",
    "param('', {2}, 'ones')",
    "param(('w'):rep(300), {2}, 'ones')",
    "param('w\\0x', {2}, 'ones')",
    "param('w', {2}, 'normal(0,\\n1)')",
    "tie('a b', param('w', {2}, 'ones'))",
    "policy { name = 'x y' }",
    "input('ids', {2, 8}, 'i32', { role = 'tokens' }) input('ids', {2, 8}, 'i32', { role = 'tokens' })",
    "defaults { vocab = 1 << 40 } include 'tiny.lua'",
    "defaults { dim = 0 } include 'tiny.lua'",
    "defaults { seq = 1 << 30, batch = 1 << 30 } include 'tiny.lua'",
};

/* odd values for a number, a string, a name */
static const char *const numbers[] = {"0", "-1", "1", "2", "3", "7", "0.5", "-0.0", "1e-300", "65536", "2^31",
                                      "1 << 31", "1 << 40", "1 << 62", "1 << 63", "(1 << 63) - 1", "2^53",
                                      "9007199254740993", "1e308", "-1e308", "0/0", "math.huge", "-math.huge", "nil"};
static const char *const strings[] = {"\"\"", "\" \"", "\"a b\"", "\"x\\ny\"", "\"%1\"", "\"../../../../etc/passwd\"",
                                      "\"/dev/zero\"", "\"fifo.lua\"", "\"out.lua\"", "\"dir.lua\"", "\"minimind.lua\"",
                                      "\"tiny.lua\"", "\"case.lua\"", "\"f16\"", "\"bf16\"", "\"f64\"", "\"i32\"",
                                      "\"nope\"", "\"fp64\"", "\"tokens\"", "\"targets\"", "\"lm_head.weight\"",
                                      "\"model.layers.0.mlp.gate_proj.weight\"", "\"\\0\"", "\"normal(0, 1)\"",
                                      "\"uniform(1,0)\"", "(\"a\"):rep(300)", "{}", "nil", "1"};
static const char *const words[] = {"add", "mul", "linear", "param", "input", "silu", "cast", "include", "named", "tie",
                                    "loss", "rule", "train", "config", "defaults", "model", "precision", "rope",
                                    "attention", "embedding", "rms_normalize", "sum_all", "x", "cfg", "nil", "{}",
                                    "error", "shape", "rope_tables", "export_hf", "checkpoint_config"};

typedef struct Span {
    size_t at, len;
    char kind; /* 'n' number, 's' string, 'w' word */
} Span;

/* the numbers, strings and words of Lua text, comments left out */
static int spans_of(const StrBuf *t, Span *out, int cap) {
    int n = 0;
    for (size_t i = 0; i < t->len && n < cap;) {
        char c = t->s[i];
        size_t j = i + 1;
        if (c == '-' && i + 1 < t->len && t->s[i + 1] == '-') {
            while (j < t->len && t->s[j] != '\n') j++;
        } else if (c == '"' || c == '\'') {
            while (j < t->len && t->s[j] != c && t->s[j] != '\n') j += t->s[j] == '\\' ? 2 : 1;
            if (j < t->len) out[n++] = (Span){i, ++j - i, 's'};
        } else if (c >= '0' && c <= '9') {
            while (j < t->len && (isalnum((unsigned char)t->s[j]) || t->s[j] == '.')) j++;
            out[n++] = (Span){i, j - i, 'n'};
        } else if (isalpha((unsigned char)c) || c == '_') {
            while (j < t->len && (isalnum((unsigned char)t->s[j]) || t->s[j] == '_')) j++;
            out[n++] = (Span){i, j - i, 'w'};
        }
        i = j > t->len ? t->len : j;
    }
    return n;
}

/* t with [at, at + len) replaced by `with` */
static void splice(StrBuf *t, size_t at, size_t len, const char *with, size_t with_len) {
    StrBuf o = {0};
    sb_appendn(&o, t->s, at);
    sb_appendn(&o, with, with_len);
    sb_appendn(&o, t->s + at + len, t->len - at - len);
    sb_free(t);
    *t = o;
}

/* the start of line `i` of t (0-based), or t->len */
static size_t line_start(const StrBuf *t, size_t i) {
    size_t at = 0;
    while (i-- && at < t->len) {
        const char *nl = memchr(t->s + at, '\n', t->len - at);
        at = nl ? (size_t)(nl - t->s) + 1 : t->len;
    }
    return at;
}
static size_t line_count(const StrBuf *t) {
    size_t n = 0;
    for (size_t i = 0; i < t->len; i++) n += t->s[i] == '\n';
    return n + 1;
}

/* One random change to Lua text, named in `what`; most replace a value, since a change to
 * the syntax ends at the parser. */
static void mutate(StrBuf *t, StrBuf *what) {
    size_t lines = line_count(t);
    size_t a = below(lines), b = below(lines);
    size_t a0 = line_start(t, a), a1 = line_start(t, a + 1), b0 = line_start(t, b);
    Span sp[4096];
    int n = spans_of(t, sp, 4096);
    switch (below(12)) {
    case 0:
        sb_printf(what, " delete line %zu;", a + 1);
        splice(t, a0, a1 - a0, "", 0);
        break;
    case 1: {
        sb_printf(what, " line %zu again before %zu;", a + 1, b + 1);
        char *copy = xstrndup(t->s + a0, a1 - a0);
        splice(t, b0, 0, copy, a1 - a0);
        free(copy);
        break;
    }
    case 2: { /* swap lines a < b */
        if (a > b) {
            size_t x = a;
            a = b, b = x;
        }
        a0 = line_start(t, a), a1 = line_start(t, a + 1), b0 = line_start(t, b);
        size_t b1 = line_start(t, b + 1);
        if (a == b || a1 > b0) break;
        sb_printf(what, " swap lines %zu and %zu;", a + 1, b + 1);
        char *la = xstrndup(t->s + a0, a1 - a0), *lb = xstrndup(t->s + b0, b1 - b0);
        splice(t, b0, b1 - b0, la, a1 - a0);
        splice(t, a0, a1 - a0, lb, b1 - b0);
        free(la), free(lb);
        break;
    }
    case 3: {
        size_t at = below(t->len);
        sb_printf(what, " cut at byte %zu;", at);
        t->len = at;
        t->s[at] = 0;
        break;
    }
    case 4: { /* swap two tokens */
        if (n < 2) break;
        int i = (int)below((size_t)n), j = (int)below((size_t)n);
        if (i == j) break;
        if (i > j) {
            int x = i;
            i = j, j = x;
        }
        char *ti = xstrndup(t->s + sp[i].at, sp[i].len), *tj = xstrndup(t->s + sp[j].at, sp[j].len);
        sb_printf(what, " swap tokens '%s' and '%s';", ti, tj);
        splice(t, sp[j].at, sp[j].len, ti, sp[i].len);
        splice(t, sp[i].at, sp[i].len, tj, sp[j].len);
        free(ti), free(tj);
        break;
    }
    case 5:
    case 6:
    case 7:
    case 8:
    case 9:
    case 10: { /* a number, a string or a word replaced */
        char kind = "nsw"[below(3)];
        const char *const *pool = kind == 'n' ? numbers : kind == 's' ? strings : words;
        size_t n_pool = kind == 'n' ? sizeof numbers / sizeof *numbers
                        : kind == 's' ? sizeof strings / sizeof *strings : sizeof words / sizeof *words;
        int picks[4096], k = 0;
        for (int i = 0; i < n; i++)
            if (sp[i].kind == kind) picks[k++] = i;
        if (!k) break;
        const Span *s = &sp[picks[below((size_t)k)]];
        const char *with = pool[below(n_pool)];
        sb_printf(what, " '%.*s' -> '%s';", (int)s->len, t->s + s->at, with);
        splice(t, s->at, s->len, with, strlen(with));
        break;
    }
    default: {
        const char *bomb = bombs[below(sizeof bombs / sizeof *bombs)];
        sb_printf(what, " bomb before line %zu: %s;", a + 1, bomb);
        char *line = xasprintf("%s\n", bomb);
        splice(t, a0, 0, line, strlen(line));
        free(line);
    }
    }
}

/* the files the bombs reach for, beside the case */
static void fixtures(void) {
    make_dirs(FUZZ_DIR);
    unlink(FUZZ_DIR "/fifo.lua");
    if (mkfifo(FUZZ_DIR "/fifo.lua", 0644) != 0) die("%s/fifo.lua: cannot make a FIFO", FUZZ_DIR);
    unlink(FUZZ_DIR "/out.lua");
    if (symlink("/etc/passwd", FUZZ_DIR "/out.lua") != 0) die("%s/out.lua: cannot make a link", FUZZ_DIR);
    make_dirs(FUZZ_DIR "/dir.lua");
    const char *small = "local small = 1\n";
    write_file_atomic(FUZZ_DIR "/small.lua", small, strlen(small));
}

/* ---- running the cases */

typedef enum { COMPILED, ERRORED, UNCLEAR, CRASHED, HUNG, OUTCOMES } Outcome;
static const char *const outcome_names[] = {"compiled", "errors", "unclear", "crashes", "hangs"};

typedef struct Case {
    StrBuf text;     /* case.lua */
    StrBuf minimind; /* minimind.lua beside it, or empty: the one -I graphs finds */
    StrBuf what;
} Case;

static size_t n_bombs(void) { return sizeof bombs / sizeof *bombs; }

/* the bombs, the tiny graph as it is (which must compile), then the mutants */
static Case make_case(const char *tiny, const char *minimind, uint64_t seed, uint64_t c) {
    Case k = {{0}, {0}, {0}};
    if (c < n_bombs()) {
        sb_append(&k.text, bombs[c]);
        sb_printf(&k.what, "bomb %llu", (unsigned long long)c);
        return k;
    }
    sb_append(&k.text, tiny);
    if (c == n_bombs()) {
        sb_append(&k.what, "graphs/tiny.lua");
        return k;
    }
    rng = seed * 0x100000001b3ull ^ (c + 1) * 0x9e3779b97f4a7c15ull;
    next_u64();
    int of_minimind = (int)below(2);
    if (of_minimind) sb_append(&k.minimind, minimind);
    sb_printf(&k.what, "mutant %llu of %s:", (unsigned long long)(c - n_bombs()), of_minimind ? "minimind.lua" : "tiny.lua");
    for (size_t m = 1 + below(3); m--;) mutate(of_minimind ? &k.minimind : &k.text, &k.what);
    return k;
}

static void case_free(Case *k) { sb_free(&k->text), sb_free(&k->minimind), sb_free(&k->what); }

static jmp_buf on_die;
static char message[4096];
static void jump_back(const char *msg) {
    snprintf(message, sizeof message, "%s", msg);
    longjmp(on_die, 1);
}

/* one line "mmc: PLACE: ..." whose first word holds a Lua file's name: a file:line, or the
 * graph's path */
static int located(const char *msg) {
    if (strncmp(msg, "mmc: ", 5) || strchr(msg, '\n')) return 0;
    size_t word = strcspn(msg + 5, " ");
    const char *lua = strstr(msg + 5, ".lua:");
    return lua && (size_t)(lua - (msg + 5)) < word;
}

/* Compiles the case in this process, with die() jumping back: COMPILED or ERRORED/UNCLEAR
 * with the message in `message`. */
static Outcome compile_case(const Case *k) {
    write_file_atomic(FUZZ_DIR "/case.lua", k->text.s, k->text.len);
    if (k->minimind.len) write_file_atomic(FUZZ_DIR "/minimind.lua", k->minimind.s, k->minimind.len);
    else unlink(FUZZ_DIR "/minimind.lua");
    message[0] = 0;
    set_die_hook(jump_back);
    CompileOptions o = fuzz_options(FUZZ_DIR "/case.lua");
    Outcome r = COMPILED;
    if (setjmp(on_die) == 0) compile_graph(&o);
    else r = located(message) ? ERRORED : UNCLEAR;
    set_die_hook(NULL);
    return r;
}

/* Cases [from, to) in a worker process, each reported on `fd` as its outcome byte and its
 * message: a worker runs many cases (a fork of this binary, which maps the CUDA libraries,
 * takes milliseconds), and what a compile leaves behind ends with it. */
static MMC_NORETURN void worker(const char *tiny, const char *minimind, uint64_t seed, uint64_t from, uint64_t to,
                                int fd) {
    for (uint64_t c = from; c < to; c++) {
        Case k = make_case(tiny, minimind, seed, c);
        unsigned char rc = (unsigned char)compile_case(&k);
        uint32_t len = (uint32_t)strlen(message);
        if (write(fd, &rc, 1) != 1 || write(fd, &len, 4) != 4 || write(fd, message, len) != (ssize_t)len) _exit(2);
        case_free(&k);
    }
    _exit(0);
}

/* reads n bytes from fd within `seconds`; 0 on a timeout or the end of the pipe */
static int read_within(int fd, void *buf, size_t n, int seconds) {
    for (size_t got = 0; got < n;) {
        struct pollfd p = {fd, POLLIN, 0};
        int ready = poll(&p, 1, seconds * 1000);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return 0;
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

/* ---- the die path frees the Lua state */

/* Thirty cases that each hold 16 MiB of Lua memory when they fail, in one process: were the
 * Lua state left open on the way out through die(), the process would grow by 480 MiB. */
static void die_path_frees(void) {
    const char *bomb = "local s = string.rep('x', 16 << 20)\nlocal t = 1\n";
    Case k = {{0}, {0}, {0}};
    sb_append(&k.text, bomb);
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        long before = ru.ru_maxrss;
        int failed = 0;
        for (int i = 0; i < 30; i++) failed += compile_case(&k) == ERRORED;
        getrusage(RUSAGE_SELF, &ru);
        if (failed != 30) _exit(1);
        _exit(UNDER_ASAN || ru.ru_maxrss - before < 200L << 10 ? 0 : 2);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "thirty failing memory bombs in one process: %s",
          !WIFEXITED(status) ? "crashed" : WEXITSTATUS(status) == 1 ? "not each a located error" : "the Lua states stayed");
    case_free(&k);
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : fallback;
}

int main(void) {
    setenv("MMC_THREADS", "1", 1);
    setenv("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1", 0); /* a report ends the worker: a crash */
    uint64_t seed = env_u64("MMC_FUZZ_SEED", 1), mutants = env_u64("MMC_FUZZ_CASES", 3000);
    int verbose = getenv("MMC_FUZZ_VERBOSE") != NULL; /* each case's outcome and message */
    uint64_t cases = n_bombs() + 1 + mutants;
    printf("test_fuzz_graphs: seed %llu, %zu bombs, graphs/tiny.lua and %llu mutants (MMC_FUZZ_SEED, MMC_FUZZ_CASES)\n",
           (unsigned long long)seed, n_bombs(), (unsigned long long)mutants);
    fixtures();
    char *tiny = read_file("graphs/tiny.lua", NULL), *minimind = read_file("graphs/minimind.lua", NULL);
    double t0 = now_seconds();
    int count[OUTCOMES] = {0}, failures = 0;
    long max_rss = 0;
    for (uint64_t c = 0; c < cases;) {
        uint64_t to = c + FUZZ_BATCH < cases ? c + FUZZ_BATCH : cases;
        int fd[2];
        if (pipe(fd)) die("pipe: cannot start a worker");
        fflush(stdout), fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) die("fork: cannot start a worker");
        if (pid == 0) {
            close(fd[0]);
            /* nothing writes to stderr but a sanitizer, whose report may not end the worker */
            if (!freopen(FUZZ_DIR "/worker.stderr", "w", stderr)) _exit(3);
            worker(tiny, minimind, seed, c, to, fd[1]);
        }
        uint64_t first = c;
        close(fd[1]);
        for (; c < to; c++) {
            unsigned char rc;
            uint32_t len = 0;
            char msg[4096] = "";
            Outcome o;
            if (!read_within(fd[0], &rc, 1, FUZZ_SECONDS)) {
                /* no outcome in time: the case hangs; the worker ended before giving one: it crashed */
                struct pollfd p = {fd[0], POLLIN, 0};
                o = poll(&p, 1, 0) > 0 ? CRASHED : HUNG;
                kill(pid, SIGKILL);
            } else if (!read_within(fd[0], &len, 4, FUZZ_SECONDS) || len >= sizeof msg ||
                       !read_within(fd[0], msg, len, FUZZ_SECONDS)) {
                o = CRASHED;
                kill(pid, SIGKILL);
            } else {
                o = (Outcome)rc;
            }
            count[o]++;
            Case k = make_case(tiny, minimind, seed, c);
            int bad = o > ERRORED || (c == n_bombs() && o != COMPILED);
            if (verbose) printf("case %llu (%s): %s %s\n", (unsigned long long)c, k.what.s, outcome_names[o], msg);
            if (bad && failures++ < 20) {
                char *path = xasprintf(FUZZ_DIR "/fail_%llu.lua", (unsigned long long)c);
                write_file_atomic(path, k.text.s, k.text.len);
                if (k.minimind.len) {
                    char *mpath = xasprintf(FUZZ_DIR "/fail_%llu_minimind.lua", (unsigned long long)c);
                    write_file_atomic(mpath, k.minimind.s, k.minimind.len);
                    free(mpath);
                }
                fprintf(stderr, "case %llu (%s): %s (%s) %s\n", (unsigned long long)c, k.what.s, outcome_names[o], path, msg);
                free(path);
            }
            case_free(&k);
            if (o >= CRASHED) {
                c++;
                break;
            }
        }
        close(fd[0]);
        int status = 0;
        struct rusage ru;
        while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) continue;
        if (ru.ru_maxrss > max_rss) max_rss = ru.ru_maxrss;
        size_t said = 0;
        char *text = read_file(FUZZ_DIR "/worker.stderr", &said);
        if (said) {
            fprintf(stderr, "cases %llu to %llu wrote on stderr:\n%.4000s\n", (unsigned long long)first,
                    (unsigned long long)c - 1, text);
            failures++;
        }
        free(text);
    }
    die_path_frees();
    double secs = now_seconds() - t0;
    printf("test_fuzz_graphs: %llu cases: %d errors, %d compiled, %d crashes, %d hangs, %d unclear; largest worker %.0f MiB; "
           "%.1f s\n",
           (unsigned long long)cases, count[ERRORED], count[COMPILED], count[CRASHED], count[HUNG], count[UNCLEAR],
           max_rss / 1024.0, secs);
    CHECK(failures == 0, "%d cases crashed, hung or failed without a located message (above)", failures);
    CHECK(UNDER_ASAN || max_rss < (long)FUZZ_MAX_RSS_MIB << 10, "a worker grew to %ld MiB", max_rss >> 10);
    free(tiny), free(minimind);
    return test_done("test_fuzz_graphs");
}
