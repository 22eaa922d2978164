/* nvrtc_compile: compiles generated CUDA source to a cubin with NVRTC, for a given GPU arch. A
 * compile error dies with NVRTC's log and the name of the kernel each error is in. */
#ifndef MMC_NVRTC_COMPILE_H
#define MMC_NVRTC_COMPILE_H

#include <stddef.h>

/* arch: "sm_90", "sm_80", ... Returns the cubin (caller frees). */
void *nvrtc_compile(const char *source, const char *source_name, const char *arch, size_t *size);
/* the disk cache of compiled kernels and tuned GEMMs: $MMC_CACHE, else ~/.cache/mmc (caller frees) */
char *mmc_cache_dir(void);
/* The same through a disk cache of cubins: $MMC_CACHE, else ~/.cache/mmc, one file per hash
 * of source + arch + NVRTC version + options, written to a temp file and renamed. Sets
 * *hit when the cubin came from the cache. */
void *nvrtc_compile_cached(const char *source, const char *source_name, const char *arch, size_t *size, int *hit);

#endif
