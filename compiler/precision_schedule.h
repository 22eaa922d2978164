/* precision_schedule: train{}'s precision schedule and fallback, as the frontend read them
 * (frontend_schedule.c): the policy each run phase trains with, and the plan a run falls back
 * to when its updates keep overflowing. `mmc compile` turns them into one plan a phase and one
 * for the fallback, beside a phases.json (compile_plans.h); the plan file itself holds none of
 * it, so a plan reads the same with or without a schedule. */
#ifndef MMC_PRECISION_SCHEDULE_H
#define MMC_PRECISION_SCHEDULE_H

#include <stdint.h>

enum { PRECISION_MAX_PHASES = 100 }; /* each phase is a compile of its own */

typedef struct SchedulePhase {
    int64_t updates; /* optimizer updates the phase runs; 0 for the last, which runs to the end */
    char *policy;    /* a built-in policy's name, or a policy file's path found as `precision "file"` finds it */
} SchedulePhase;

typedef struct PrecisionSchedule {
    int n_phases;          /* 0: no schedule (a fallback alone), else >= 2 */
    SchedulePhase *phases;
    char *where;           /* the train{} call that gave the schedule */
    int has_fallback;
    double overflow_rate;  /* fall back when more than this share of `window` updates overflow; 0: not given */
    int64_t window;        /* updates; 0: not given */
    double min_scale;      /* or when the loss scale falls below this; 0: no scale condition */
    char *to_policy;       /* the fallback's policy (as a phase's), or NULL for a fixed scale */
    double to_scale;       /* the fallback's fixed loss scale (with the last phase's policy), or 0 */
    char *fallback_where;  /* the train{} call that gave the fallback */
} PrecisionSchedule;

/* "when more than 1% of 100 updates overflow, or the scale falls below 1" */
char *schedule_fallback_condition(const PrecisionSchedule *s);

#endif
