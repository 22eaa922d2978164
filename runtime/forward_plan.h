/* forward_plan: a graph compiled without a backward pass into a temp folder, for the
 * commands that run a model forward only inside another job (`mmc generate`, and train's
 * --val, which evaluates beside the training plan). */
#ifndef MMC_FORWARD_PLAN_H
#define MMC_FORWARD_PLAN_H

#include "frontend.h"
#include "plan.h"

/* Compiles `graph` (with `policy`, a built-in name or a file, or NULL for the graph's own,
 * and the -D settings) forward-only into a new folder under /tmp; returns the folder. */
char *forward_plan_compile(const char *graph, const char *policy, const Define *defines, int n_defines);
/* The training plan's graph forward-only, with its settings (batch and seq as trained). */
char *forward_plan_twin(const Plan *pl);
void forward_plan_remove(const char *dir);

#endif
