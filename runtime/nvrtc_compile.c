/* nvrtc_compile: see nvrtc_compile.h. Also `mmc check-kernels`, which checks that a plan's
 * kernels.cu is the one made with the plan (or takes a .cu file as it is) and compiles it for
 * the archs users run (sm_90a H100/H200, sm_80 A100, sm_75 T4) without needing a GPU, and with
 * --cache keeps the cubins in the kernel cache, so a GPU machine given that cache starts warm. */
#include "nvrtc_compile.h"

#include <errno.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli.h"
#include "plan.h"
#include "program.h"
#include "util.h"

static const char *const base_options[] = {"-std=c++17", "-default-device"};

/* cuda_fp16.h and cuda_bf16.h come from the toolkit: $MMC_CUDA_INCLUDE, else
 * $CUDA_HOME/include, else /usr/local/cuda/include. Made once, before any compile thread
 * starts (nvrtc_compile_start), so the workers inherit it. */
static const char *include_option(void) {
    static char *opt;
    if (opt) return opt;
    const char *dir = getenv("MMC_CUDA_INCLUDE");
    char *owned = NULL;
    if (!dir || !*dir) {
        const char *home = getenv("CUDA_HOME");
        dir = owned = xasprintf("%s/include", home && *home ? home : "/usr/local/cuda");
    }
    opt = xasprintf("--include-path=%s", dir);
    free(owned);
    return opt;
}

char *mmc_cache_dir(void) {
    const char *c = getenv("MMC_CACHE");
    if (c && *c) return xstrdup(c);
    const char *home = getenv("HOME");
    return xasprintf("%s/.cache/mmc", home && *home ? home : "/tmp");
}

/* the cache file of a source's cubin: a hash of the source, arch, NVRTC version and options */
static char *cache_path(const char *dir, const char *source, const char *arch) {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    Sha256 h;
    sha256_init(&h);
    char ver[64];
    snprintf(ver, sizeof ver, "nvrtc %d.%d", major, minor);
    const char *parts[] = {source, arch, ver, include_option()};
    for (int i = 0; i < 4; i++) sha256_update(&h, parts[i], strlen(parts[i]) + 1);
    for (size_t i = 0; i < sizeof base_options / sizeof base_options[0]; i++)
        sha256_update(&h, base_options[i], strlen(base_options[i]) + 1);
    char hex[65];
    sha256_hex(&h, hex);
    return xasprintf("%s/%s.cubin", dir, hex);
}

/* the cached cubin, or NULL */
static void *cache_read(const char *path, size_t *size) {
    void *cubin = try_read_file(path, size);
    if (cubin && *size > 0) return cubin;
    free(cubin);
    return NULL;
}

void *nvrtc_compile_cached(const char *source, const char *source_name, const char *arch, size_t *size, int *hit) {
    char *dir = mmc_cache_dir();
    char *path = cache_path(dir, source, arch);
    void *cubin = cache_read(path, size);
    *hit = cubin != NULL;
    if (!*hit) {
        cubin = nvrtc_compile(source, source_name, arch, size);
        make_dirs(dir);
        write_file_atomic(path, cubin, *size);
    }
    free(dir);
    free(path);
    return cubin;
}

/* The kernel a source line belongs to: the last "// ---- NAME" marker above it. */
static char *kernel_at_line(const char *src, long line) {
    long cur = 1;
    const char *name = NULL, *p = src;
    while (*p && cur <= line) {
        if (strncmp(p, "// ---- ", 8) == 0) name = p + 8;
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        p = nl + 1;
        cur++;
    }
    if (!name) return xstrdup("(prelude)");
    size_t n = strcspn(name, ": \n");
    return xstrndup(name, n);
}

static char *annotate_log(const char *src, const char *source_name, const char *log) {
    StrBuf o = {0};
    const char *p = log;
    size_t nlen = strlen(source_name);
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (strncmp(p, source_name, nlen) == 0 && p[nlen] == '(') {
            long line = strtol(p + nlen + 1, NULL, 10);
            char *k = kernel_at_line(src, line);
            sb_printf(&o, "[%s] ", k);
            free(k);
        }
        sb_appendn(&o, p, len);
        sb_append(&o, "\n");
        if (!nl) break;
        p = nl + 1;
    }
    return o.s ? o.s : xstrdup("");
}

/* One program: the cubin, or NULL with *error set to the message to die with (NVRTC's log
 * annotated with kernel names). It never dies itself, so a compile thread can call it:
 * every NVRTC call here is on the program it made. */
static void *compile_program(const char *source, const char *source_name, const char *arch, size_t *size, char **error) {
    *error = NULL;
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, source, source_name, 0, NULL, NULL) != NVRTC_SUCCESS) {
        *error = xasprintf("%s: NVRTC could not create a program", source_name);
        return NULL;
    }
    char *archopt = xasprintf("--gpu-architecture=%s", arch);
    const char *opts[8];
    int n = 0;
    opts[n++] = archopt;
    for (size_t i = 0; i < sizeof base_options / sizeof base_options[0]; i++) opts[n++] = base_options[i];
    opts[n++] = include_option();
    nvrtcResult rc = nvrtcCompileProgram(prog, n, opts);
    free(archopt);
    void *cubin = NULL;
    size_t cubin_size = 0;
    if (rc != NVRTC_SUCCESS) {
        size_t log_size = 0;
        nvrtcGetProgramLogSize(prog, &log_size);
        char *log = xmalloc(log_size + 1);
        log[0] = 0;
        if (log_size > 1) nvrtcGetProgramLog(prog, log);
        char *ann = annotate_log(source, source_name, log);
        *error = xasprintf("%s: NVRTC failed for %s (%s):\n%s", source_name, arch, nvrtcGetErrorString(rc), ann);
        free(ann), free(log);
    } else if (nvrtcGetCUBINSize(prog, &cubin_size) != NVRTC_SUCCESS || cubin_size == 0) {
        *error = xasprintf("%s: NVRTC produced no cubin for %s", source_name, arch);
    } else {
        cubin = xmalloc(cubin_size);
        nvrtcGetCUBIN(prog, cubin);
    }
    nvrtcDestroyProgram(&prog);
    *size = cubin_size;
    return cubin;
}

void *nvrtc_compile(const char *source, const char *source_name, const char *arch, size_t *size) {
    char *error;
    void *cubin = compile_program(source, source_name, arch, size, &error);
    if (!cubin) die("%s", error);
    return cubin;
}

/* ---- the split into translation units */

/* A kernel's entry with no code (a GEMM's, which cuBLASLt runs): blank and // lines only. */
static int comment_only(const char *s, size_t len) {
    const char *p = s, *end = s + len;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
        if (p == end) break;
        if (end - p < 2 || p[0] != '/' || p[1] != '/') return 0;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    return 1;
}

/* The end of the shared part: where the first kernel after the marker line starts (its
 * "\n// ---- "), so the marker line and anything before that kernel go to every unit; or
 * NULL for a source without the marker or without kernels. */
static const char *shared_end(const char *source) {
    const char *m = strstr(source, KERNELS_MARKER);
    while (m && m != source && m[-1] != '\n') m = strstr(m + 1, KERNELS_MARKER);
    if (!m) return NULL;
    const char *nl = strchr(m, '\n');
    return nl ? strstr(nl, KERNEL_START) : NULL;
}

/* a kernel's kind, for the split: the ops on its marker line */
typedef struct KindOf {
    const char *ops;
    size_t len;
    int index; /* in the source */
} KindOf;

/* the kind of the kernel whose marker line starts at `name` ("NAME: ops...\n") */
static KindOf kind_of(const char *name, int index) {
    const char *nl = strchr(name, '\n'), *end = nl ? nl : name + strlen(name);
    const char *colon = memchr(name, ':', (size_t)(end - name));
    return colon ? (KindOf){colon + 1, (size_t)(end - colon - 1), index} : (KindOf){"", 0, index};
}

static int by_kind(const void *pa, const void *pb) {
    const KindOf *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->ops, b->ops, n);
    if (c) return c;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->index - b->index; /* in source order within a kind: the same split every time */
}

static void one_unit(KernelUnits *u, const char *source) {
    u->n = 1;
    u->source = xcalloc(1, sizeof *u->source);
    u->source[0] = xstrdup(source);
}

KernelUnits kernel_units(const char *source) {
    KernelUnits u = {0};
    const char *head = shared_end(source);
    if (!head) {
        one_unit(&u, source);
        return u;
    }
    /* the kernels with code: where each starts and how long it is */
    const char **start = NULL;
    size_t *len = NULL;
    int cap = 0, cap_len = 0, n_len = 0;
    for (const char *p = head; p;) {
        const char *next = strstr(p + 1, KERNEL_START);
        size_t n = next ? (size_t)(next - p) : strlen(p);
        if (!comment_only(p, n)) {
            vec_push(start, u.n_kernels, cap, p);
            vec_push(len, n_len, cap_len, n);
        }
        p = next;
    }
    if (!u.n_kernels) {
        one_unit(&u, source);
        free(start), free(len);
        return u;
    }
    u.n = u.n_kernels < KERNEL_UNITS_MAX ? u.n_kernels : KERNEL_UNITS_MAX;
    u.kernel = xcalloc((size_t)u.n_kernels, sizeof *u.kernel);
    u.unit = xcalloc((size_t)u.n_kernels, sizeof *u.unit);
    StrBuf *b = xcalloc((size_t)u.n, sizeof *b);
    for (int i = 0; i < u.n; i++) sb_appendn(&b[i], source, (size_t)(head - source));
    /* The kernels of one kind (their ops, after the name on the marker line) cost about the
     * same to compile, and kinds differ tenfold (flash attention's backward against a
     * cast): the units take the kernels kind by kind in turn, so that each kind spreads
     * over all of them and no unit holds two of the costliest. */
    KindOf *order = xcalloc((size_t)u.n_kernels, sizeof *order);
    for (int j = 0; j < u.n_kernels; j++) {
        const char *name = start[j] + strlen(KERNEL_START);
        u.kernel[j] = xstrndup(name, strcspn(name, ": \n"));
        order[j] = kind_of(name, j);
    }
    qsort(order, (size_t)u.n_kernels, sizeof *order, by_kind);
    for (int r = 0; r < u.n_kernels; r++) u.unit[order[r].index] = r % u.n;
    free(order);
    for (int j = 0; j < u.n_kernels; j++) sb_appendn(&b[u.unit[j]], start[j], len[j]);
    u.source = xcalloc((size_t)u.n, sizeof *u.source);
    for (int i = 0; i < u.n; i++) u.source[i] = b[i].s;
    free(b), free(start), free(len);
    return u;
}

void kernel_units_free(KernelUnits *u) {
    for (int i = 0; i < u->n; i++) free(u->source[i]);
    for (int j = 0; j < u->n_kernels; j++) free(u->kernel[j]);
    free(u->source), free(u->kernel), free(u->unit);
    *u = (KernelUnits){0};
}

int kernel_unit(const KernelUnits *u, const char *kernel) {
    for (int j = 0; j < u->n_kernels; j++)
        if (!strcmp(u->kernel[j], kernel)) return u->unit[j];
    return u->n == 1 ? 0 : -1;
}

/* ---- compiling the units in worker processes
 *
 * NVRTC's threads in one process hardly run at once: on the H200 host's 16-core Xeon,
 * MiniMind's 32 units took 3.0 s on 1 thread, 2.2 s on 4, 2.4 s on 8 and 3.1 s on 16 (mmc
 * check-kernels), and 4.9 s on 8 inside a process that holds a CUDA context. So each worker
 * is a process of its own, forked before the compile starts, with an NVRTC of its own. The
 * workers take unit numbers from one pipe (4-byte writes and reads, which a pipe keeps
 * whole) and send each cubin, or the message to die with, down a pipe of their own; they
 * die with the parent (PR_SET_PDEATHSIG) and touch nothing else: cache reads and writes,
 * and dying, stay in the parent. A unit that no worker sent (one died, or none could be
 * started) compiles in the parent when it collects. */

/* The workers: MMC_NVRTC_JOBS, else one a core online, at most one a unit. On that H200
 * host the first step of MiniMind at batch 64 came 2.5 s after the start with 16 workers,
 * 3.5 s with 12, 3.7 and 4.4 s with 8, 7.2 s with 4 (an empty cache each time). */
static int compile_jobs(void) {
    const char *e = getenv("MMC_NVRTC_JOBS");
    if (e && *e) return (int)option_range("nvrtc", "MMC_NVRTC_JOBS", e, 1, KERNEL_UNITS_MAX);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 1 ? 1 : cores > KERNEL_UNITS_MAX ? KERNEL_UNITS_MAX : (int)cores;
}

static char *unit_name(const char *source_name, int unit, int n) {
    return n == 1 ? xstrdup(source_name) : xasprintf("%s[unit %d of %d]", source_name, unit + 1, n);
}

/* what a worker sends for a unit: this header, then `bytes` of cubin (ok) or of message */
typedef struct UnitResult {
    int unit, ok;
    size_t bytes;
} UnitResult;

struct KernelCompile {
    const KernelUnits *u;
    char *source_name, *arch, *dir; /* dir: the cache's, or NULL when not through the cache */
    double t0;
    KernelCubins c;
    char **path;  /* by unit: its cache file */
    int *todo, n_todo;
    char **error; /* by unit: the message to die with, or NULL */
    int n_workers;
    pid_t pid[KERNEL_UNITS_MAX];
    int out[KERNEL_UNITS_MAX]; /* each worker's pipe, the parent's end */
};

static int write_all(int fd, const void *p, size_t n) {
    for (const char *c = p; n;) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w, n -= (size_t)w;
    }
    return 0;
}

/* a worker: units from `work` until it is empty, each result down `out`; never returns */
static void worker(KernelCompile *k, int work, int out) {
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(0); /* the parent is gone already */
#endif
    int unit;
    while (read(work, &unit, sizeof unit) == (ssize_t)sizeof unit) {
        char *name = unit_name(k->source_name, unit, k->u->n), *error = NULL;
        size_t size = 0;
        void *cubin = compile_program(k->u->source[unit], name, k->arch, &size, &error);
        UnitResult r = {unit, cubin != NULL, cubin ? size : strlen(error) + 1};
        if (write_all(out, &r, sizeof r) || write_all(out, cubin ? cubin : error, r.bytes)) _exit(1);
        free(name), free(cubin), free(error);
    }
    _exit(0);
}

/* forks the workers (as many as there are units to compile, at most compile_jobs()); with
 * one, or none to be had, the parent compiles every unit itself */
static void start_workers(KernelCompile *k) {
    int jobs = compile_jobs();
    if (jobs > k->n_todo) jobs = k->n_todo;
    if (jobs < 2) return;
    int work[2];
    if (pipe(work)) return;
    for (int i = 0; i < k->n_todo; i++)
        if (write_all(work[1], &k->todo[i], sizeof k->todo[i])) { /* a pipe holds 32 ints */
            close(work[0]), close(work[1]);
            return;
        }
    close(work[1]);
    fflush(NULL); /* nothing buffered twice */
    for (int w = 0; w < jobs; w++) {
        int out[2];
        if (pipe(out)) break;
#ifdef F_SETPIPE_SZ
        fcntl(out[1], F_SETPIPE_SZ, 1 << 20); /* room for a worker's cubins while the parent is busy */
#endif
        pid_t pid = fork();
        if (pid == 0) {
            close(out[0]);
            for (int j = 0; j < k->n_workers; j++) close(k->out[j]);
            worker(k, work[0], out[1]);
        }
        close(out[1]);
        if (pid < 0) {
            close(out[0]);
            break;
        }
        k->pid[k->n_workers] = pid, k->out[k->n_workers++] = out[0];
    }
    close(work[0]);
}

/* reads one result from a worker's pipe into k; 0 at its end (or a broken message) */
static int read_result(KernelCompile *k, int fd) {
    UnitResult r;
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = read(fd, (char *)&r + got, sizeof r - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0;
        got += (size_t)n;
    }
    if (r.unit < 0 || r.unit >= k->u->n || r.bytes == 0) return 0;
    char *data = xmalloc(r.bytes);
    for (got = 0; got < r.bytes;) {
        ssize_t n = read(fd, data + got, r.bytes - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            free(data);
            return 0;
        }
        got += (size_t)n;
    }
    if (r.ok) k->c.cubin[r.unit] = data, k->c.size[r.unit] = r.bytes;
    else k->error[r.unit] = data, data[r.bytes - 1] = 0;
    return 1;
}

/* every worker's results, as they come (poll: no worker waits on a full pipe for long) */
static void collect_workers(KernelCompile *k) {
    struct pollfd fds[KERNEL_UNITS_MAX];
    int open = k->n_workers;
    for (int w = 0; w < k->n_workers; w++) fds[w] = (struct pollfd){k->out[w], POLLIN, 0};
    while (open > 0) {
        if (poll(fds, (nfds_t)k->n_workers, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int w = 0; w < k->n_workers; w++)
            if (fds[w].fd >= 0 && fds[w].revents && !read_result(k, fds[w].fd)) {
                close(fds[w].fd);
                fds[w].fd = -1;
                open--;
            }
    }
    for (int w = 0; w < k->n_workers; w++) {
        if (fds[w].fd >= 0) close(fds[w].fd);
        while (waitpid(k->pid[w], NULL, 0) < 0 && errno == EINTR) {
        }
    }
}

KernelCompile *nvrtc_compile_start(const KernelUnits *u, const char *source_name, const char *arch, int cache) {
    KernelCompile *k = xcalloc(1, sizeof *k);
    k->t0 = now_seconds();
    k->u = u;
    k->source_name = xstrdup(source_name), k->arch = xstrdup(arch);
    (void)include_option(); /* made here, before any worker starts */
    k->c.n = u->n;
    k->c.cubin = xcalloc((size_t)u->n, sizeof *k->c.cubin);
    k->c.size = xcalloc((size_t)u->n, sizeof *k->c.size);
    k->dir = cache ? mmc_cache_dir() : NULL;
    k->path = xcalloc((size_t)u->n, sizeof *k->path);
    k->todo = xcalloc((size_t)u->n, sizeof *k->todo);
    k->error = xcalloc((size_t)u->n, sizeof *k->error);
    for (int i = 0; i < u->n; i++) {
        if (cache) k->path[i] = cache_path(k->dir, u->source[i], arch);
        if (cache && (k->c.cubin[i] = cache_read(k->path[i], &k->c.size[i]))) k->c.cached++;
        else k->todo[k->n_todo++] = i;
    }
    if (k->n_todo) start_workers(k);
    return k;
}

KernelCubins nvrtc_compile_finish(KernelCompile *k) {
    const KernelUnits *u = k->u;
    collect_workers(k);
    KernelCubins c = k->c;
    c.jobs = k->n_todo ? (k->n_workers ? k->n_workers : 1) : 0;
    for (int t = 0; t < k->n_todo; t++) { /* what no worker sent */
        int i = k->todo[t];
        if (c.cubin[i] || k->error[i]) continue;
        char *name = unit_name(k->source_name, i, u->n);
        c.cubin[i] = compile_program(u->source[i], name, k->arch, &c.size[i], &k->error[i]);
        free(name);
    }
    /* what compiled is kept even when another unit failed: after the fix, only the units
     * that changed compile again */
    if (k->dir && k->n_todo) make_dirs(k->dir);
    for (int t = 0; t < k->n_todo; t++) {
        int i = k->todo[t];
        if (k->dir && c.cubin[i]) write_file_atomic(k->path[i], c.cubin[i], c.size[i]);
    }
    for (int t = 0; t < k->n_todo; t++) /* the first failed unit, in the source's order */
        if (k->error[k->todo[t]]) die("%s", k->error[k->todo[t]]);
    for (int i = 0; i < u->n; i++) {
        c.bytes += c.size[i];
        free(k->path[i]);
    }
    free(k->path), free(k->todo), free(k->error), free(k->dir), free(k->source_name), free(k->arch);
    c.seconds = now_seconds() - k->t0;
    free(k);
    return c;
}

KernelCubins nvrtc_compile_units(const KernelUnits *u, const char *source_name, const char *arch, int cache) {
    return nvrtc_compile_finish(nvrtc_compile_start(u, source_name, arch, cache));
}

void kernel_cubins_free(KernelCubins *c) {
    for (int i = 0; i < c->n; i++) free(c->cubin[i]);
    free(c->cubin), free(c->size);
    *c = (KernelCubins){0};
}

/* ---- mmc check-kernels */

/* "32 units, 2 processes, 14.1 s, now in the cache": what a compile did */
static char *compile_summary(const KernelCubins *c, int cache) {
    StrBuf b = {0};
    sb_printf(&b, "%d unit%s", c->n, c->n == 1 ? "" : "s");
    if (c->jobs) sb_printf(&b, ", %d process%s, %.1f s", c->jobs, c->jobs == 1 ? "" : "es", c->seconds);
    if (!cache) return b.s;
    if (c->cached == c->n) sb_append(&b, ", already in the cache");
    else if (c->cached == 0) sb_append(&b, ", now in the cache");
    else sb_printf(&b, ", %d already in the cache, the others now", c->cached);
    return b.s;
}

int cmd_check_kernels(int argc, char **argv) {
    const char *dir = NULL;
    const char *archs[16];
    int n_arch = 0, cache = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cache")) cache = 1;
        else if (!strcmp(argv[i], "--arch") && i + 1 < argc) {
            if (n_arch == 16) die("check-kernels: too many --arch");
            archs[n_arch++] = argv[++i];
        } else if (argv[i][0] == '-') die("check-kernels: unknown option %s", argv[i]);
        else dir = argv[i];
    }
    if (!dir) die("check-kernels: which plan folder? usage: mmc check-kernels DIR|FILE.cu [--arch sm_90]... [--cache]");
    if (!n_arch) archs[n_arch++] = "sm_90a", archs[n_arch++] = "sm_80", archs[n_arch++] = "sm_75";
    /* a plan folder's kernels.cu must be the plan's own (an empty or foreign one is refused);
     * a .cu file named itself is a source of one's own, compiled as it is (split into units
     * when it has the marker, as the runtime would) */
    struct stat st;
    int file = stat(dir, &st) == 0 && S_ISREG(st.st_mode);
    char *path = file ? xstrdup(dir) : path_join(dir, "kernels.cu");
    char *src = file ? read_file(path, NULL) : plan_kernels(plan_load(dir));
    KernelUnits units = kernel_units(src);
    for (int i = 0; i < n_arch; i++) {
        KernelCubins c = nvrtc_compile_units(&units, path, archs[i], cache);
        char *how = compile_summary(&c, cache);
        printf("%s: %s ok (%zu bytes of cubin in %s)\n", path, archs[i], c.bytes, how);
        fflush(stdout);
        free(how);
        kernel_cubins_free(&c);
    }
    kernel_units_free(&units);
    free(src);
    free(path);
    return 0;
}
