/* plan_set: the plans one training run goes through. A plan folder compiled from a graph
 * with a precision schedule or a fallback (train{ schedule = {...}, fallback = {...} }) holds
 * phases.json beside its plan, naming a plan folder for each phase (the last phase is the
 * folder's own plan) and one for the fallback. They all share one layout of parameters,
 * gradients, optimizer state and step state (the compiler checks it, and so does
 * planset_load), so the trainer moves from one to the next by handing the buffers over
 * (backend adopt), copying nothing.
 *
 * Checkpoints are the run's, whatever plan wrote them: every plan of the set takes the
 * folder's own plan hash, which covers the graph file and so the schedule. */
#ifndef MMC_PLAN_SET_H
#define MMC_PLAN_SET_H

#include <stdint.h>

#include "plan.h"

typedef struct PlanSet {
    int n_phases;
    Plan **phase;      /* [n_phases]; the last is the folder's own plan */
    int64_t *first;    /* [n_phases]: the first update (0-based) each phase runs */
    Plan *fallback;    /* NULL without one */
    double overflow_rate; /* fall back when more than this share of the last `window` updates overflowed (0: never) */
    int64_t window;
    double min_scale;  /* or when the scale falls below this (0: never) */
    char *fallback_what; /* "amp_bf16", or "a fixed scale of 1024", for messages */
} PlanSet;

/* `top` loaded already; its phases.json, if any, read and its plans loaded and checked. A
 * folder without phases.json is a set of one phase. */
PlanSet *planset_load(Plan *top);
void planset_free(PlanSet *s); /* the plans but `top` */
/* the phase that runs update u (0-based) */
int planset_phase_of(const PlanSet *s, int64_t u);

#endif
