/* monitor: what the trainer watches besides the loss, reported in the log line and in
 * metrics.jsonl, with an alarm on stderr:
 *  - skipped updates per log interval, and their rate. Intervals are aligned on multiples
 *    of the interval (updates kI+1 .. (k+1)I), so a resumed run reports the same windows;
 *  - underflow: the total gradient norm of an applied update below 1e-5, or a tensor whose
 *    gradient reaches f32 through f16 or bf16 with a quarter or more of its elements exactly
 *    zero (the counts come from grad_norm, step_state.h). Each such tensor's zero share is in
 *    the metrics line that ends an interval;
 *  - a loss spike: an update's loss above the mean of the last 50 finite losses by more than
 *    4 of their standard deviations and by more than a tenth of that mean (of 1 where the
 *    mean is below 1).
 *  - the fallback's condition (plan_set.h): more than a share of the last `window` updates
 *    overflowed, or the loss scale fell below a floor, while a plan with a loss scaler runs.
 *    It fires once: the line of that update says so ("fallback", and "fallback_at", the
 *    update the trainer switches on: `delay` updates later, as the trainer reads each
 *    update's state that many updates behind).
 * Everything here is a function of the metrics lines, which a resume reads back, so a
 * resumed run writes the lines an uninterrupted one writes. */
#ifndef MMC_MONITOR_H
#define MMC_MONITOR_H

#include <stdint.h>

#include "plan.h"
#include "step_state.h"
#include "util.h"

enum { MONITOR_SPIKE_WINDOW = 50 };
#define MONITOR_UNDERFLOW_NORM 1e-5
#define MONITOR_UNDERFLOW_ZERO_SHARE 0.25

typedef struct Monitor {
    const Graph *g;
    int64_t interval;
    unsigned char *low_precision; /* [params] a gradient contribution arrives in f16 or bf16 */
    int n_low_precision;
    int64_t window_start;         /* the update that ends the previous interval */
    int skipped_at_start;         /* the run's skipped updates then */
    double losses[MONITOR_SPIKE_WINDOW];
    int n_losses, next_loss;
    int64_t underflow_warned;     /* the interval whose underflow alarm was given, -1 none */
    int last_skipped;             /* the run's skipped updates after the previous update */
    /* the fallback: armed while fb_what is set and fallback_at is 0 */
    const char *fb_what;
    double fb_rate, fb_min_scale;
    int64_t fb_window, fb_delay;
    unsigned char *skip_ring;     /* [fb_window] whether each of the last updates overflowed */
    int64_t seen;                 /* updates pushed into the ring */
    int64_t fallback_at;          /* the 1-based update the run falls back on; 0: not fired */
} Monitor;

/* What one update's monitoring found, for the log line. */
typedef struct MonitorReport {
    int window_ended;     /* the update ends an interval: the fields below are set */
    int window_skipped;   /* skipped updates in the interval */
    int64_t window_updates;
    int underflow, spike;
    int fallback;         /* the fallback's condition held: the run falls back (Monitor.fallback_at) */
} MonitorReport;

void monitor_init(Monitor *m, const Plan *pl, int64_t interval);
/* Arms the fallback's condition (rate over window, and/or min_scale; 0: that one off). */
void monitor_fallback(Monitor *m, double rate, int64_t window, double min_scale, const char *what, int64_t delay);
/* A resumed run, `start` updates done: the interval and the loss window from the metrics
 * lines of metrics_path (up to update `start`). */
void monitor_resume(Monitor *m, const char *metrics_path, int64_t start);
/* Update u (0-based) of a run of `steps`: appends its fields to the metrics line being
 * written (", \"key\": value" each) and gives the alarms on stderr. zeros: the state
 * buffer's per-parameter zero counts; scaling: the plan it ran has a loss scaler. */
MonitorReport monitor_update(Monitor *m, int64_t u, int64_t steps, double loss, const MmcStepState *st,
                             const unsigned int *zeros, int scaling, StrBuf *json);
void monitor_free(Monitor *m);

#endif
