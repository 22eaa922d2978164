/* backend: what the trainer needs from a place that runs plans. Two implement it: ref
 * (plain C on the CPU, the oracle) and cuda (generated kernels + cuBLASLt on a GPU). */
#ifndef MMC_BACKEND_H
#define MMC_BACKEND_H

#include <stdint.h>

#include "plan.h"

typedef struct Backend Backend;
struct Backend {
    const char *name;
    Plan *pl;
    /* copies between host memory and a plan buffer (both synchronous) */
    void (*write)(Backend *b, int buffer, int64_t offset, const void *src, int64_t bytes);
    void (*read)(Backend *b, int buffer, int64_t offset, void *dst, int64_t bytes);
    void (*run_group)(Backend *b, int index); /* one kernel or GEMM of the schedule */
    void (*run_phase)(Backend *b, Phase phase);
    void (*destroy)(Backend *b);
};

Backend *ref_backend_create(Plan *pl);
/* NULL with a one-line reason in *why when no GPU can be used here */
Backend *cuda_backend_create(Plan *pl, char **why);

#endif
