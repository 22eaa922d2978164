/* nvrtc_compile: compiles generated CUDA source to cubins with NVRTC, for a given GPU arch. A
 * plan's kernels.cu is split into translation units (each the shared part above
 * KERNELS_MARKER and some of the kernels) compiled in several processes at once, each unit
 * with its own cubin and its own entry in the disk cache. A compile error dies with NVRTC's
 * log and the name of the kernel each error is in. */
#ifndef MMC_NVRTC_COMPILE_H
#define MMC_NVRTC_COMPILE_H

#include <stddef.h>

/* At most this many units and compile processes. The split depends on the source only, never
 * on the machine, so a cache filled on one machine (mmc check-kernels --cache) serves
 * another. */
enum { KERNEL_UNITS_MAX = 32 };

typedef struct KernelUnits {
    int n;          /* units: min(kernels with code, KERNEL_UNITS_MAX), or 1 */
    char **source;  /* by unit: the shared part, the marker line, then its kernels in order */
    int n_kernels;
    char **kernel;  /* the kernels' names, in the source's order */
    int *unit;      /* by kernel: the unit that holds it */
} KernelUnits;

/* Splits a source at KERNELS_MARKER (compiler/program.h): the kernel with code j of the
 * source goes to unit j % n, which mixes heavy and light kernels; entries without code (a
 * GEMM's comment) are left out. A source without the marker is one unit, as it is. */
KernelUnits kernel_units(const char *source);
void kernel_units_free(KernelUnits *u);
/* the unit that holds a kernel; 0 for a source of one unit; -1 if no unit has it */
int kernel_unit(const KernelUnits *u, const char *kernel);

typedef struct KernelCubins {
    int n;           /* as the units */
    void **cubin;    /* by unit */
    size_t *size;
    size_t bytes;    /* all the cubins together */
    int cached;      /* units whose cubin came from the cache */
    int jobs;        /* processes that compiled the others (0 when none was compiled) */
    double seconds;  /* wall time, cache reads and writes included */
} KernelCubins;

/* Compiles every unit (through the cache when `cache`) in MMC_NVRTC_JOBS worker processes
 * (1 to KERNEL_UNITS_MAX), else one per core online, never more than there are units to
 * compile (one: in the calling process).
 * Units are named "NAME[unit i of n]" in NVRTC's log (just NAME for one unit). An error in
 * any unit dies, from the calling process, with that unit's annotated log. */
KernelCubins nvrtc_compile_units(const KernelUnits *u, const char *source_name, const char *arch, int cache);
/* The same in two halves, so the caller does other work while the workers compile (the cuda
 * backend starts its context and allocates its buffers): start reads the cache and forks the
 * workers; finish collects their cubins (compiling itself what they did not send), writes
 * the cache, dies on an error and frees k. `u` must outlive the compile. */
typedef struct KernelCompile KernelCompile;
KernelCompile *nvrtc_compile_start(const KernelUnits *u, const char *source_name, const char *arch, int cache);
KernelCubins nvrtc_compile_finish(KernelCompile *k);
void kernel_cubins_free(KernelCubins *c);

/* The whole source as one program. arch: "sm_90", "sm_80", ... Returns the cubin (caller
 * frees). */
void *nvrtc_compile(const char *source, const char *source_name, const char *arch, size_t *size);
/* the disk cache of compiled kernels and tuned GEMMs: $MMC_CACHE, else ~/.cache/mmc (caller frees) */
char *mmc_cache_dir(void);
/* The same through a disk cache of cubins: $MMC_CACHE, else ~/.cache/mmc, one file per hash
 * of source + arch + NVRTC version + options, written to a temp file and renamed. Sets
 * *hit when the cubin came from the cache. */
void *nvrtc_compile_cached(const char *source, const char *source_name, const char *arch, size_t *size, int *hit);

#endif
