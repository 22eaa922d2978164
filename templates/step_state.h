/* The step state: every scalar the training step reads or writes, in one struct that lives in
 * device memory on the cuda backend and host memory on the ref backend, so a step needs no
 * host synchronisation. Shared by the C runtime and the generated kernels; the plan places
 * the loss-gradient seed inside it. Saved verbatim in resume files. */
#ifndef MMC_STEP_STATE_H
#define MMC_STEP_STATE_H

typedef struct MmcStepState {
    double lr;            /* learning rate of the update in progress */
    double total_micro;   /* micro-steps in the whole run (the schedule's horizon) */
    float loss_seed;      /* gradient fed to the loss: scale / accumulation */
    float scale;          /* dynamic loss scale (GradScaler._scale) */
    float found_inf;      /* 1 when a gradient of this update is inf or nan */
    float grad_norm;      /* total L2 norm of the unscaled gradients, before clipping */
    float clip_coef;      /* min(1, max_norm / (norm + 1e-6)) */
    int growth_tracker;   /* clean updates since the scale last changed (GradScaler) */
    int adam_step;        /* AdamW's step count: updates actually applied */
    int update;           /* updates attempted, skipped ones included */
    int skipped;          /* updates skipped because of inf/nan */
    unsigned int ticket;  /* the last-block counter (below); MMC_TICKET_IDLE between launches */
    int overflow_streak;  /* consecutive updates with inf/nan (the scaler's hysteresis) */
    int pad_;             /* explicit, so the struct has no padding bytes of unknown value */
} MmcStepState;

/* The state buffer holds the step state, then one unsigned int a parameter (in the graph's
 * parameter order): how many elements of its gradient were exactly zero when the update
 * phase read them, written by grad_norm each update. A gradient that reaches zero through f16
 * or bf16 has underflowed; the trainer reports the share per tensor. Resume files keep the
 * step state alone, as these counts are rewritten every update. */
#define MMC_STATE_ZEROS sizeof(MmcStepState)
#define MMC_STATE_BYTES(params) (MMC_STATE_ZEROS + (params) * sizeof(unsigned int))

/* The loss scaler's settings (train { loss_scale = {...} }, compiler/train_settings.h). */
typedef struct MmcScaler {
    double growth, backoff; /* factors: after `interval` clean updates, and on an overflow */
    double max, min;        /* cap and floor of the scale; 0: none */
    int interval;           /* clean updates between growths */
    int hysteresis;         /* consecutive overflowing updates before a backoff */
    int fixed;              /* 1: the scale never changes (a static scale) */
} MmcScaler;

#ifdef __CUDACC__
#define MMC_SCALER_FN __device__ __forceinline__
#else
#include <math.h>
#define MMC_SCALER_FN static inline
#endif

/* The scaler's update at the end of an update, on the device (step_finish.cu) and on the
 * ref backend alike: GradScaler.update (torch/amp/grad_scaler.py) when max, min and
 * hysteresis are off. An update with an inf/nan gradient restarts the growth count and
 * lengthens the overflow streak; once the streak reaches `hysteresis` (1: every overflow, as
 * GradScaler) each further overflow multiplies the scale by backoff, not below min (as the
 * dynamic scalers of Megatron and DeepSpeed, with DeepSpeed's consecutive_hysteresis). A
 * clean update ends the streak, and every `interval`-th clean one in a row multiplies the
 * scale by growth, not above max, unless that is not finite (GradScaler). Products are
 * taken in double and rounded to the f32 scale, as GradScaler's _amp_update_scale_ does. */
MMC_SCALER_FN void mmc_scaler_update(MmcStepState *s, const MmcScaler *p) {
    if (p->fixed) return;
    if (s->found_inf != 0.0f) {
        s->growth_tracker = 0;
        if (s->overflow_streak < 2147483647) s->overflow_streak += 1;
        if (s->overflow_streak >= p->hysteresis) {
            double next = (double)s->scale * p->backoff;
            if (p->min > 0 && next < p->min) next = p->min;
            s->scale = (float)next;
        }
        return;
    }
    s->overflow_streak = 0;
    if (s->growth_tracker + 1 == p->interval) {
        double next = (double)s->scale * p->growth;
        if (p->max > 0 && next > p->max) next = p->max;
        const float grown = (float)next;
        if (isfinite(grown)) s->scale = grown;
        s->growth_tracker = 0;
    } else {
        s->growth_tracker += 1;
    }
}

/* The ticket: a kernel whose last block to finish completes the launch (cross_entropy*.cu
 * sums the row losses, grad_norm.cu the norms) has each block take a ticket once its part
 * is written and fenced; the block that takes the last one reads every part and puts the
 * counter back to MMC_TICKET_IDLE. So the counter is idle whenever no such launch runs, as
 * each of them needs at its start: init_state makes it so, a resume file (saved between
 * updates) keeps it so, and the kernels that use it all run on the main stream, one at a time. */
#define MMC_TICKET_IDLE 0u

#ifdef __CUDACC__
// true in the block that takes the launch's last ticket, which ends with mmc_ticket_reset
__device__ __forceinline__ bool mmc_ticket_last(MmcStepState *s) {
    return atomicAdd(&s->ticket, 1u) == MMC_TICKET_IDLE + gridDim.x - 1;
}
__device__ __forceinline__ void mmc_ticket_reset(MmcStepState *s) { s->ticket = MMC_TICKET_IDLE; }
// The mean of a loss over the kept targets of a launch, from each warp's loss and kept count
// (wloss, wkept: shared, one a warp): each block adds its warps' in order into its row of
// `table` (2 doubles a block), and the block that takes the last ticket adds the rows in
// order and stores the mean (in R) and the count. Every thread of every block calls it.
template <typename R, int BLOCKS, typename L, typename C>
__device__ __forceinline__ void mmc_loss_mean(MmcStepState *state, double *table, const double *wloss, const double *wkept,
                                              L *loss, C *count) {
    __shared__ double dred[32];
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) {
        double l = 0, k = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) l += wloss[w], k += wkept[w];
        table[2 * blockIdx.x] = l, table[2 * blockIdx.x + 1] = k;
        __threadfence();
        last = mmc_ticket_last(state);
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    double total = 0, kept = 0;
#pragma unroll 8
    for (int r = threadIdx.x; r < BLOCKS; r += blockDim.x) {
        total += __ldcg(table + 2L * r);
        kept += __ldcg(table + 2L * r + 1);
    }
    total = block_sum(total, dred);
    kept = block_sum(kept, dred);
    if (threadIdx.x == 0) {
        // a batch whose every target is left out (a loss mask can do it) has the loss 0,
        // not a mean over nothing, and its gradients are 0 too
        st(loss, 0, kept > 0 ? mmc_div((R)total, (R)kept) : (R)0);
        st(count, 0, kept);
        mmc_ticket_reset(state);
    }
}
#endif

#endif
