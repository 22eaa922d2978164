/* backend: what the trainer needs from a place that runs plans. Two implement it: ref
 * (plain C on the CPU, the oracle) and cuda (generated kernels + cuBLASLt on a GPU). */
#ifndef MMC_BACKEND_H
#define MMC_BACKEND_H

#include <stdint.h>

#include "plan.h"

typedef struct Backend Backend;
typedef struct BackendProbe BackendProbe;
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
    const BackendProbe *probe;          /* measurements, where the backend has them (NULL on ref) */
    /* set after creation: what runs the plan ("NVIDIA H200", "CPU, 2 threads") and its dense
     * f16 tensor-core peak in FLOP/s where known (0 otherwise), for MFU */
    const char *device;
    double peak_flops;
    /* Takes over `from`'s parameters, gradients, AdamW moments and step state (the buffers a
     * run carries from plan to plan, plan_set.h) and its host allocations, before this
     * backend has run anything; `from` is then only fit to destroy. Both plans share the
     * layout of those buffers. Nothing is copied. */
    void (*adopt)(Backend *b, Backend *from);
    /* Called at the start of each update phase, on the stream the phase runs on (and inside
     * its captured graph): data parallelism's all-reduce of the gradients. NULL: none. */
    void (*before_update)(void *ctx, void *stream, void *grads, int64_t bytes);
    void *before_update_ctx;
};

/* dies unless b's and from's plans lay out the buffers adopt carries alike */
void backend_check_adopt(const Backend *b, const Backend *from);

/* the buffers a run carries from one plan to the next (adopt) */
static inline int backend_carried(int buffer) {
    return buffer == BUF_PARAMS || buffer == BUF_GRADS || buffer == BUF_ADAM_M || buffer == BUF_ADAM_V || buffer == BUF_STATE;
}

/* What `mmc bench` measures on a device. Times are of device work, by device events. */
struct BackendProbe {
    int (*mark)(Backend *b);                        /* a timing event after the work queued so far */
    double (*ms_between)(Backend *b, int from, int to); /* waits for `to`, then the ms between the two */
    /* runs the phase's groups one by one, each between two events: ms[g] for group g (0 for
     * the groups of other phases) */
    void (*profile_phase)(Backend *b, Phase phase, double *ms);
    int (*launches)(Backend *b, Phase phase);       /* kernels in the phase's captured graph, -1 before capture */
    int64_t (*device_bytes)(Backend *b);            /* device memory taken since the backend started */
    /* ms a call (the best of 5) for GEMM group g: ms[0] with the algorithm in use, ms[k] with
     * the k-th of the up to `max` cuBLASLt's heuristic offers; returns how many */
    int (*gemm_candidates)(Backend *b, int g, int max, double *ms);
};

/* dies unless [offset, offset + bytes) lies inside the plan's buffer; `what` names the copy */
void backend_check_range(const Backend *b, int buffer, int64_t offset, int64_t bytes, const char *what);

Backend *ref_backend_create(Plan *pl);
/* the ref backend calls `watch` with every value it computes (rounded as stored), and the
 * values of the node's inputs, as it runs a group: how the overflow finder sees inside a
 * fused kernel */
typedef void (*RefWatch)(void *ctx, const Node *n, const double *value, double *const *inputs);
void ref_backend_watch(Backend *b, RefWatch watch, void *ctx);
/* NULL with a one-line reason in *why when no GPU can be used here */
Backend *cuda_backend_create(Plan *pl, char **why);
/* Where the plan computes in bf16 and the GPU has no bf16 tensor cores (before sm_80), the
 * message that refuses it, proposing what runs there (caller frees); else NULL. sm: the GPU's
 * compute capability as 75, 80, ... (cuda_device_sm), what: how to name the plan. */
char *backend_bf16_refusal(const Plan *pl, int sm, const char *device, const char *what);
/* the compute capability of GPU 0 as 10 major + minor, or -1 without one */
int cuda_device_sm(void);
/* the GPU the cuda backends of this process use (0 unless told: a rank's local rank) */
void cuda_select_device(int device);

#endif
