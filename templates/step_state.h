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
    unsigned int ticket;  /* last-block-done counter of the grad-norm kernel; 0 between launches */
    int pad_[2];          /* explicit, so the struct has no padding bytes of unknown value */
} MmcStepState;

#endif
