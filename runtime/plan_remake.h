/* plan_remake: a plan's graph compiled again inside another command, into a temp folder:
 * forward-only for `mmc generate` and train's --val (which evaluates beside the training
 * plan), or with other settings for train's --lr, --weight-decay, --clip, --accumulation. */
#ifndef MMC_PLAN_REMAKE_H
#define MMC_PLAN_REMAKE_H

#include "frontend.h"
#include "plan.h"

/* Compiles `graph` (with `policy`, a built-in name or a file, or NULL for the graph's own,
 * and the -D settings) into a new folder under /tmp, forward-only if asked; returns it. A
 * graph with a precision schedule or a fallback gets every plan of its folder there, each
 * with these settings (compile_plans.h); a policy must then be the last phase's. */
char *plan_compile_temp(const char *graph, const char *policy, const Define *defines, int n_defines, const Define *train,
                        int n_train, int forward_only);
/* the same with a precision schedule in place of the graph's (mmc compare); policy NULL */
char *plan_compile_temp_scheduled(const char *graph, const char *policy, const struct PrecisionSchedule *schedule,
                                  const Define *defines, int n_defines, const Define *train, int n_train, int forward_only);
/* The plan's graph again, with its policy and settings and then `overrides` (replacing the
 * settings of the same name, each of which the graph must have) and `train` (training
 * settings by their keys in train_settings.h, over what train{} set); forward-only if asked.
 * The compile options are the defaults. */
char *plan_remake(const Plan *pl, const Define *overrides, int n_overrides, const Define *train, int n_train, int forward_only);
/* A run folder's graph compiled again: its config.json names the graph file, the policy and
 * every setting it was trained with. `overrides` come first (a command line's -D, and what
 * the command needs, as batch=1); `graph` and `policy`, when given, replace the run's; with
 * no run folder (NULL) `graph` is needed. `cmd` names the command in errors. */
char *plan_from_run(const char *cmd, const char *run_dir, const char *graph, const char *policy, const Define *overrides,
                    int n_overrides, int forward_only);
/* a setting from a run folder's config.json as text (%.17g for numbers), or NULL */
char *run_setting(const char *run_dir, const char *key);
void plan_remove_temp(const char *dir); /* the folder, its phases.json, phaseK/ and fallback/ too */

#endif
