/* compile_plans: a graph's plan folder: its plan, and with a precision schedule or a
 * fallback (precision_schedule.h) the plans of the other phases and of the fallback, each
 * compiled with its own policy and otherwise the same options, settings and defines:
 *
 *   DIR/kernels.cu, DIR/plan                the last phase's plan (the graph's, without a schedule)
 *   DIR/phaseK/kernels.cu, DIR/phaseK/plan  phase K's (1-based), for each phase but the last
 *   DIR/fallback/kernels.cu, DIR/fallback/plan
 *   DIR/phases.json                         which plan runs when; written last
 *
 * The runtime (runtime/plan_set.h) reads phases.json and moves from one plan to the next by
 * handing its buffers over, so every plan must lay out the parameters, gradients, optimizer
 * state and step state alike: checked here, after each compile. Both `mmc compile` and the
 * plans train makes again into /tmp (runtime/plan_remake.c) go through here. */
#ifndef MMC_COMPILE_PLANS_H
#define MMC_COMPILE_PLANS_H

#include "compile.h"
#include "precision_schedule.h"

typedef struct CompiledPlans {
    const PrecisionSchedule *schedule; /* NULL: the folder holds one plan (no schedule, or --forward) */
    int n_phases;                      /* >= 1 */
    CompileResult *phase;              /* [n_phases]; the last is the folder's own plan */
    int has_fallback;
    CompileResult fallback;
} CompiledPlans;

/* Compiles every plan of the graph's folder; dies with a message at the train{} line on a
 * schedule the compile cannot follow (--policy other than the last phase's, a layout that
 * differs). With --dump each plan stops after that pass. */
CompiledPlans compile_plans(const CompileOptions *opt);
/* Writes them into dir (made if missing), each file atomically and phases.json last; an
 * earlier compile's phases.json, phaseK/ and fallback/ that this one has not are removed, so
 * a stale schedule never survives. */
void compiled_plans_write(const CompiledPlans *c, const char *dir);
/* the folder of plan k, as phases.json names it: phaseK for the phases but the last, "."
 * for the last, "fallback" for k = n_phases (caller frees) */
char *compiled_plan_dir(const CompiledPlans *c, int k);
/* the --dump text: each plan's, after a line naming its folder and policy */
char *compiled_plans_dump(const CompiledPlans *c);
/* phases.json's text */
char *compiled_plans_json(const CompiledPlans *c);
/* Removes dir's phases.json, phaseK/ and fallback/ (their kernels.cu and plan, then the
 * folders, where nothing else is left in them). */
void plan_folder_clean(const char *dir);
/* what `mmc compile` prints: the folder's own plan's report (compile_report), with the
 * schedule and the fallback (report.c) */
char *compiled_plans_report(const CompiledPlans *c, const char *out_dir);

#endif
