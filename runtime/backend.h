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
    /* The training loop's path, which never waits for the device: copies queued behind the
     * work already queued, from and to host memory made by host_alloc (pinned on a GPU),
     * which must stay untouched until a fence after the copy has been waited for. */
    void *(*host_alloc)(Backend *b, size_t bytes);
    void (*write_async)(Backend *b, int buffer, int64_t offset, const void *src, int64_t bytes);
    void (*read_async)(Backend *b, int buffer, int64_t offset, void *dst, int64_t bytes);
    int (*fence)(Backend *b);           /* marks the work queued so far; returns a ticket */
    void (*wait)(Backend *b, int ticket); /* until the work before that fence is done */
};

/* dies unless [offset, offset + bytes) lies inside the plan's buffer; `what` names the copy */
void backend_check_range(const Backend *b, int buffer, int64_t offset, int64_t bytes, const char *what);

Backend *ref_backend_create(Plan *pl);
/* NULL with a one-line reason in *why when no GPU can be used here */
Backend *cuda_backend_create(Plan *pl, char **why);

#endif
