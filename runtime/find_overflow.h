/* find_overflow: which op's output first went inf or NaN in an update whose gradients
 * overflowed. `mmc train --find-overflow` runs it at the first such update: the update's
 * micro-steps run again from the step state they started from, one kernel at a time, and
 * after each kernel its stored values are read back and checked. The first kernel with a
 * value that is not finite is then run again op by op on the ref backend (from its inputs as
 * the backend left them), which names the first op inside it whose value is not finite,
 * with the tensors it read and their largest magnitudes. Works on both backends; the
 * backend's gradients are zero again and its step state as it was afterwards. */
#ifndef MMC_FIND_OVERFLOW_H
#define MMC_FIND_OVERFLOW_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef struct OverflowInput {
    char name[160];   /* the node's label */
    const char *dtype;
    double max_abs;   /* inf or nan where the input itself is not finite */
} OverflowInput;

typedef struct OverflowReport {
    int found;           /* 0: the micro-steps ran again without a value that is not finite */
    int micro;           /* which micro-step of the update (from 0) */
    const Node *node;    /* the first op whose value is not finite */
    const char *kernel;  /* the kernel that computes it */
    const Node *stored;  /* the first value of that kernel the backend stored that is not finite */
    OverflowInput in[IR_MAX_INPUTS];
    int n_in;
} OverflowReport;

/* Runs the update's micro-steps again from `before` (the step state when it started), with
 * the batches `ids[a]`, `labels[a]` (batch_bytes each) of each micro-step a. */
OverflowReport find_overflow(Backend *b, const MmcStepState *before, int32_t *const *ids, int32_t *const *labels,
                             size_t batch_bytes);
/* the report as text lines for the log, and as one JSON object (caller frees both) */
char *overflow_text(const OverflowReport *r, int64_t update);
char *overflow_json(const OverflowReport *r, int64_t update);

#endif
