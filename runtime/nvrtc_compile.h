/* nvrtc_compile: compiles generated CUDA source to a cubin with NVRTC, for a given GPU arch. A
 * compile error dies with NVRTC's log and the name of the kernel each error is in. */
#ifndef MMC_NVRTC_COMPILE_H
#define MMC_NVRTC_COMPILE_H

#include <stddef.h>

/* arch: "sm_90", "sm_80", ... Returns the cubin (caller frees). */
void *nvrtc_compile(const char *source, const char *source_name, const char *arch, size_t *size);
/* The options the compile uses, as one string (part of the cubin cache key). */
const char *nvrtc_options_key(void);
int nvrtc_version(int *major, int *minor);

#endif
