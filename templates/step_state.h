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
    int pad_[2];          /* explicit, so the struct has no padding bytes of unknown value */
} MmcStepState;

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
#endif

#endif
