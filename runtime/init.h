/* init: the values a run starts from, made on the host and written to the backend:
 * parameters from their init specs, constant tables from their generators, the step state. */
#ifndef MMC_INIT_H
#define MMC_INIT_H

#include <stdint.h>

#include "backend.h"
#include "step_state.h"

void init_params(Backend *b, uint64_t seed);
void init_consts(Backend *b);
/* a fresh step state for a run of total_updates optimizer updates */
MmcStepState init_state(const Plan *pl, int64_t total_updates);

#endif
