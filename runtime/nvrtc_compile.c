/* nvrtc_compile: see nvrtc_compile.h. Also `mmc check-kernels`, which checks that a plan's
 * kernels.cu is the one made with the plan (or takes a .cu file as it is) and compiles it for
 * the archs users run (sm_90 H100/H200, sm_80 A100, sm_75 T4) without needing a GPU, and with
 * --cache keeps the cubins in the kernel cache, so a GPU machine given that cache starts warm. */
#include "nvrtc_compile.h"

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "plan.h"
#include "util.h"

static const char *const base_options[] = {"-std=c++17", "-default-device"};

/* cuda_fp16.h and cuda_bf16.h come from the toolkit: $MMC_CUDA_INCLUDE, else
 * $CUDA_HOME/include, else /usr/local/cuda/include. */
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

void *nvrtc_compile_cached(const char *source, const char *source_name, const char *arch, size_t *size, int *hit) {
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
    char *dir = mmc_cache_dir();
    char *path = xasprintf("%s/%s.cubin", dir, hex);
    void *cubin = try_read_file(path, size);
    *hit = cubin != NULL && *size > 0;
    if (!*hit) {
        free(cubin);
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

void *nvrtc_compile(const char *source, const char *source_name, const char *arch, size_t *size) {
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, source, source_name, 0, NULL, NULL) != NVRTC_SUCCESS)
        die("%s: NVRTC could not create a program", source_name);
    char *archopt = xasprintf("--gpu-architecture=%s", arch);
    const char *opts[8];
    int n = 0;
    opts[n++] = archopt;
    for (size_t i = 0; i < sizeof base_options / sizeof base_options[0]; i++) opts[n++] = base_options[i];
    opts[n++] = include_option();
    nvrtcResult rc = nvrtcCompileProgram(prog, n, opts);
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    char *log = xmalloc(log_size + 1);
    log[0] = 0;
    if (log_size > 1) nvrtcGetProgramLog(prog, log);
    if (rc != NVRTC_SUCCESS) {
        char *ann = annotate_log(source, source_name, log);
        die("%s: NVRTC failed for %s (%s):\n%s", source_name, arch, nvrtcGetErrorString(rc), ann);
    }
    free(log);
    size_t cubin_size = 0;
    if (nvrtcGetCUBINSize(prog, &cubin_size) != NVRTC_SUCCESS || cubin_size == 0)
        die("%s: NVRTC produced no cubin for %s", source_name, arch);
    void *cubin = xmalloc(cubin_size);
    nvrtcGetCUBIN(prog, cubin);
    nvrtcDestroyProgram(&prog);
    free(archopt);
    *size = cubin_size;
    return cubin;
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
    if (!n_arch) archs[n_arch++] = "sm_90", archs[n_arch++] = "sm_80", archs[n_arch++] = "sm_75";
    /* a plan folder's kernels.cu must be the plan's own (an empty or foreign one is refused);
     * a .cu file named itself is a source of one's own, compiled as it is */
    struct stat st;
    int file = stat(dir, &st) == 0 && S_ISREG(st.st_mode);
    char *path = file ? xstrdup(dir) : path_join(dir, "kernels.cu");
    char *src = file ? read_file(path, NULL) : plan_kernels(plan_load(dir));
    for (int i = 0; i < n_arch; i++) {
        size_t size;
        int hit = 0;
        void *cubin = cache ? nvrtc_compile_cached(src, path, archs[i], &size, &hit) : nvrtc_compile(src, path, archs[i], &size);
        printf("%s: %s ok (%zu bytes of cubin%s)\n", path, archs[i], size, !cache ? "" : hit ? ", already in the cache" : ", now in the cache");
        free(cubin);
    }
    free(src);
    free(path);
    return 0;
}
