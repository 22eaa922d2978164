/* no_cuda: what stands in for the cuda backend and NVRTC in an mmc built where the CUDA
 * toolkit is absent (the Makefile compiles this file instead of cuda_backend.c and
 * nvrtc_compile.c then). The compiler and the ref backend work as ever; what needs a GPU
 * or NVRTC says in one line that this build has neither. */
#ifdef MMC_NO_CUDA
#include "backend.h"
#include "cli.h"
#include "util.h"

#define NO_CUDA "this mmc was built without the CUDA toolkit (build it where one is, or with make CUDA=/path/to/cuda)"

Backend *cuda_backend_create(Plan *pl, char **why) {
    (void)pl;
    *why = xstrdup(NO_CUDA);
    return NULL;
}

int cuda_device_sm(void) { return -1; }
void cuda_select_device(int device) { (void)device; }

int cmd_check_kernels(int argc, char **argv) {
    (void)argc, (void)argv;
    die("check-kernels: %s", NO_CUDA);
}
#endif
