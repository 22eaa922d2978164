/* test_nvrtc_units: kernels.cu splits into translation units as nvrtc_compile.h says, and
 * they compile in several worker processes (no GPU needed, NVRTC only). On generated/minimind and on
 * the tiny plan: every kernel with code is in exactly one unit, the one kernel_unit names,
 * every unit starts with the whole part above the marker and holds nothing else, and the
 * split is the same every time; a source without the marker is one unit, as it is. The tiny
 * plan compiled by 2 processes gives cubins that hold each launched kernel in its unit's cubin
 * only, and in 1 finds every unit in the cache (the split does not depend on the
 * process count). A syntax error in one kernel dies once, naming that kernel and its unit;
 * a bad MMC_NVRTC_JOBS is refused. The GEMM-epilogue kernels compile for sm_90a, sm_80
 * and sm_75. */
#include <sys/wait.h>
#include <unistd.h>

#include "nvrtc_compile.h"
#include "program.h"
#include "test_util.h"

#ifdef MMC_NO_CUDA
int main(void) {
    printf("test_nvrtc_units: skipped (this build has no NVRTC)\n");
    return 0;
}
#else

static const char *const arch = "sm_90";

/* A kernel entry of the source, found here without kernel_units: from its "\n// ---- " to
 * the next. */
typedef struct Chunk {
    const char *start;
    size_t len;
    int code; /* it defines a kernel (a GEMM's entry is a comment) */
} Chunk;

static int find_chunks(const char *src, Chunk *out, int max) {
    const char *m = strstr(src, KERNELS_MARKER);
    if (!m) return 0;
    int n = 0;
    for (const char *p = strstr(m, KERNEL_START); p && n < max; n++) {
        const char *next = strstr(p + 1, KERNEL_START);
        out[n].start = p;
        out[n].len = next ? (size_t)(next - p) : strlen(p);
        char *text = xstrndup(p, out[n].len);
        out[n].code = strstr(text, "__global__") != NULL;
        free(text);
        p = next;
    }
    return n;
}

static void check_split(const char *src, const char *what) {
    enum { MAX_CHUNKS = 4096 };
    Chunk *ch = xcalloc(MAX_CHUNKS, sizeof *ch);
    int n_chunks = find_chunks(src, ch, MAX_CHUNKS), n_code = 0;
    char **kind = xcalloc(MAX_CHUNKS, sizeof *kind);
    int *unit_of = xcalloc(MAX_CHUNKS, sizeof *unit_of);
    CHECK(n_chunks > 0, "%s: no kernels after the marker", what);
    if (!n_chunks) return;
    size_t shared = (size_t)(strchr(strstr(src, KERNELS_MARKER), '\n') + 1 - src); /* through the marker line */
    size_t head = (size_t)(ch[0].start - src), code_bytes = 0;
    KernelUnits u = kernel_units(src);
    for (int c = 0; c < n_chunks; c++) {
        if (!ch[c].code) continue;
        int in = 0, where = -1;
        for (int i = 0; i < u.n; i++)
            if (memmem(u.source[i], strlen(u.source[i]), ch[c].start, ch[c].len)) in++, where = i;
        const char *name = ch[c].start + strlen(KERNEL_START);
        char *k = xstrndup(name, strcspn(name, ": \n"));
        CHECK(in == 1, "%s: kernel %s is in %d units", what, k, in);
        CHECK(n_code < u.n_kernels && !strcmp(u.kernel[n_code], k), "%s: kernel %d is %s, not %s", what, n_code, k,
              n_code < u.n_kernels ? u.kernel[n_code] : "(none)");
        CHECK(kernel_unit(&u, k) == where, "%s: %s in unit %d, kernel_unit says %d", what, k, where, kernel_unit(&u, k));
        const char *colon = strchr(name, ':'), *nl = strchr(name, '\n');
        kind[n_code] = colon && nl && colon < nl ? xstrndup(colon + 1, (size_t)(nl - colon - 1)) : xstrdup("");
        unit_of[n_code] = where;
        free(k);
        code_bytes += ch[c].len;
        n_code++;
    }
    /* each kind (the ops on the marker line) is dealt over the units in turn: the units
     * hold as many of a kind as each other, give or take one */
    for (int a = 0; a < n_code; a++) {
        int count[KERNEL_UNITS_MAX] = {0}, first = 1;
        for (int b = 0; b < n_code; b++) {
            if (!strcmp(kind[a], kind[b])) count[unit_of[b]]++;
            if (b < a && !strcmp(kind[a], kind[b])) first = 0;
        }
        if (!first) continue;
        int lo = count[0], hi = count[0];
        for (int i = 1; i < u.n; i++) lo = count[i] < lo ? count[i] : lo, hi = count[i] > hi ? count[i] : hi;
        CHECK(hi - lo <= 1, "%s: kind '%.40s' is %d in one unit and %d in another", what, kind[a], hi, lo);
    }
    for (int a = 0; a < n_code; a++) free(kind[a]);
    int want = n_code < KERNEL_UNITS_MAX ? n_code : KERNEL_UNITS_MAX;
    CHECK(u.n == want && u.n_kernels == n_code, "%s: %d units of %d kernels, want %d of %d", what, u.n, u.n_kernels, want, n_code);
    size_t total = 0;
    for (int i = 0; i < u.n; i++) {
        CHECK(!strncmp(u.source[i], src, shared), "%s: unit %d does not start with the shared part", what, i);
        total += strlen(u.source[i]);
    }
    CHECK(total == (size_t)u.n * head + code_bytes, "%s: the units hold %zu bytes, not %zu: more than the shared part and their kernels",
          what, total, (size_t)u.n * head + code_bytes);
    KernelUnits again = kernel_units(src);
    int same = again.n == u.n;
    for (int i = 0; same && i < u.n; i++) same = !strcmp(again.source[i], u.source[i]);
    CHECK(same, "%s: two splits of one source differ", what);
    kernel_units_free(&again);
    kernel_units_free(&u);
    free(ch), free(kind), free(unit_of);
}

static void check_one_unit(const char *src, const char *what) {
    KernelUnits u = kernel_units(src);
    CHECK(u.n == 1 && !strcmp(u.source[0], src) && u.n_kernels == 0, "%s: %d units, %d kernels", what, u.n, u.n_kernels);
    CHECK(kernel_unit(&u, "k000_anything") == 0, "%s: a kernel is not in the only unit", what);
    kernel_units_free(&u);
}

/* the source without its marker line: a .cu of one's own */
static char *without_marker(const char *src) {
    const char *m = strstr(src, KERNELS_MARKER);
    const char *end = strchr(m, '\n') + 1;
    return xasprintf("%.*s%s", (int)(m - src), src, end);
}

/* runs fn(ctx) in a child with stderr to a file; returns its exit status (-1: not an exit)
 * and its stderr (caller frees) */
static int in_child(void (*fn)(const void *ctx), const void *ctx, char **err) {
    char *path = xasprintf("build/tests/tmp/nvrtc_units_err.%ld", (long)getpid());
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(path, "w", stderr)) _exit(99);
        fn(ctx);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    *err = try_read_file(path, NULL);
    if (!*err) *err = xstrdup("");
    unlink(path);
    free(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void compile_uncached(const void *ctx) {
    KernelUnits u = kernel_units(ctx);
    nvrtc_compile_units(&u, "tiny/kernels.cu", arch, 0);
}

/* a line that does not compile, put into the kernel with code number `k` */
static char *break_kernel(const char *src, int k) {
    Chunk ch[512];
    int n = find_chunks(src, ch, 512);
    for (int c = 0, seen = 0; c < n; c++) {
        if (!ch[c].code || seen++ != k) continue;
        const char *after = strchr(ch[c].start + 1, '\n') + 1; /* after its "// ---- NAME" line */
        return xasprintf("%.*sint mmc_injected = mmc_undefined_name;\n%s", (int)(after - src), src, after);
    }
    return NULL;
}

static void check_error(const char *src) {
    KernelUnits u = kernel_units(src);
    int k = 1; /* in unit 2 of n, compiled by one worker while the other does unit 1 */
    char *broken = break_kernel(src, k);
    setenv("MMC_NVRTC_JOBS", "2", 1);
    char *err;
    int rc = in_child(compile_uncached, broken, &err);
    char *where = xasprintf("tiny/kernels.cu[unit %d of %d](", u.unit[k] + 1, u.n);
    char *tag = xasprintf("[%s] %s", u.kernel[k], where);
    const char *line = strstr(err, "mmc_undefined_name");
    while (line && line != err && line[-1] != '\n') line--;
    CHECK(rc == 1, "a broken kernel: exit status %d", rc);
    CHECK(line && !strncmp(line, tag, strlen(tag)), "the error does not begin with %s:\n%s", tag, err);
    const char *first = strstr(err, "NVRTC failed");
    CHECK(first && !strstr(first + 1, "NVRTC failed"), "not one report of the error:\n%s", err);
    free(where), free(tag), free(err), free(broken);
    kernel_units_free(&u);
}

static void compile_jobs_of_env(const void *ctx) {
    setenv("MMC_NVRTC_JOBS", ctx, 1);
    KernelUnits u = kernel_units("extern \"C\" __global__ void k() {}\n");
    nvrtc_compile_units(&u, "k.cu", arch, 0);
}

static void check_jobs_option(void) {
    const char *bad[] = {"0", "33", "two"};
    for (int i = 0; i < 3; i++) {
        char *err;
        int rc = in_child(compile_jobs_of_env, bad[i], &err);
        char *want = xasprintf("MMC_NVRTC_JOBS needs an integer from 1 to %d, got '%s'", KERNEL_UNITS_MAX, bad[i]);
        CHECK(rc == 1 && strstr(err, want), "MMC_NVRTC_JOBS=%s: status %d, %s", bad[i], rc, err);
        free(want), free(err);
    }
}

/* name\0 in a cubin: the kernel's symbol (and not a longer one it begins) */
static int holds_symbol(const KernelCubins *c, int i, const char *name) {
    return memmem(c->cubin[i], c->size[i], name, strlen(name) + 1) != NULL;
}

/* an empty kernel cache of its own (MMC_CACHE), and its removal */
static char *fresh_cache(const char *name) {
    char *cache = xasprintf("build/tests/tmp/%s.XXXXXX", name);
    CHECK(mkdtemp(cache), "mkdtemp %s", cache);
    setenv("MMC_CACHE", cache, 1);
    return cache;
}
static void remove_cache(char *cache) {
    char *rm = xasprintf("rm -rf '%s'", cache);
    CHECK(system(rm) == 0, "%s", rm);
    free(rm), free(cache);
}

static void check_compile(const Plan *pl, const char *src) {
    char *cache = fresh_cache("nvrtc_units_cache");
    KernelUnits u = kernel_units(src);
    setenv("MMC_NVRTC_JOBS", "2", 1);
    KernelCubins two = nvrtc_compile_units(&u, "tiny/kernels.cu", arch, 1);
    CHECK(two.n == u.n && two.cached == 0 && two.jobs == 2, "2 processes: %d cubins, %d cached, %d processes", two.n, two.cached,
          two.jobs);
    const Program *p = pl->p;
    int launched = 0;
    for (int g = 0; g < p->n_groups; g++) {
        const Group *gr = p->groups[g];
        if (gr->kind == GK_GEMM && gr->n_nodes == 1) continue; /* a cuBLASLt call */
        int unit = kernel_unit(&u, gr->kernel), in = 0;
        CHECK(unit >= 0, "kernel %s is in no unit", gr->kernel);
        for (int i = 0; i < two.n; i++) in += holds_symbol(&two, i, gr->kernel);
        CHECK(in == 1 && unit >= 0 && holds_symbol(&two, unit, gr->kernel), "kernel %s: in %d cubins, unit %d's %s", gr->kernel, in,
              unit, unit >= 0 && holds_symbol(&two, unit, gr->kernel) ? "too" : "not");
        launched++;
    }
    CHECK(launched == u.n_kernels, "the plan launches %d kernels, kernels.cu has %d", launched, u.n_kernels);
    setenv("MMC_NVRTC_JOBS", "1", 1);
    KernelCubins one = nvrtc_compile_units(&u, "tiny/kernels.cu", arch, 1);
    CHECK(one.cached == one.n && one.jobs == 0 && one.bytes == two.bytes, "1 process: %d of %d units from the cache", one.cached,
          one.n);
    for (int i = 0; i < one.n && i < two.n; i++)
        CHECK(one.size[i] == two.size[i] && !memcmp(one.cubin[i], two.cubin[i], one.size[i]), "unit %d: another cubin from the cache", i);
    kernel_cubins_free(&one);
    kernel_cubins_free(&two);
    kernel_units_free(&u);
    remove_cache(cache);
}

/* The GEMM-epilogue kernels compile for every target mmc supports: sm_90a takes the TMA and
 * wgmma GEMM, sm_80 and sm_75 the epilogue alone (NVRTC here, no GPU). */
static void check_epilogue_targets(void) {
    Plan *pl = test_compile_with("graphs/minimind.lua", NULL, "dim=128,heads=2,kv_heads=1,ffn=384,batch=4,seq=40",
                                 TEST_GEMM_EPILOGUES);
    int fused = 0;
    for (int g = 0; g < pl->p->n_groups; g++) fused += pl->p->groups[g]->kind == GK_GEMM && pl->p->groups[g]->n_nodes > 1;
    CHECK(fused > 0, "--gemm-epilogues: no GEMM with an epilogue in the small MiniMind");
    char *cache = fresh_cache("nvrtc_epilogue_cache");
    KernelUnits u = kernel_units(pl->kernels);
    const char *targets[] = {"sm_90a", "sm_80", "sm_75"};
    for (int i = 0; i < 3; i++) {
        KernelCubins c = nvrtc_compile_units(&u, "epilogues/kernels.cu", targets[i], 0);
        CHECK(c.n == u.n, "%s: %d of %d units compiled", targets[i], c.n, u.n);
        kernel_cubins_free(&c);
    }
    kernel_units_free(&u);
    remove_cache(cache);
}

int main(void) {
    make_dirs("build/tests/tmp");
    char *big = try_read_file("generated/minimind/kernels.cu", NULL);
    CHECK(big, "generated/minimind/kernels.cu: missing (run from the repository root)");
    if (big) {
        check_split(big, "generated/minimind");
        char *plain = without_marker(big);
        check_one_unit(plain, "generated/minimind without the marker");
        free(plain);
    }
    check_one_unit("extern \"C\" __global__ void k() {}\n", "a .cu of one kernel");
    Plan *pl = test_compile("graphs/tiny.lua", NULL, NULL, 1);
    const char *tiny = pl->kernels;
    check_split(tiny, "tiny");
    check_jobs_option();
    check_error(tiny); /* before the compile below, so each child forks from a process that never ran NVRTC */
    check_compile(pl, tiny);
    check_epilogue_targets();
    free(big);
    return test_done("test_nvrtc_units");
}
#endif
