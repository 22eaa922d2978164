/* lr_schedule: the schedules' names (see lr_schedule.h). */
#include "lr_schedule.h"

#include <stddef.h>

#include "util.h"

const char *const lr_schedule_names[SCHED_COUNT + 1] = {
#define X(e, name, doc) name,
    MMC_LR_SCHEDULES(X)
#undef X
    NULL};

const char *lr_schedule_name(LrSchedule s) { return (unsigned)s < SCHED_COUNT ? lr_schedule_names[s] : "?"; }

int lr_schedule_parse(const char *name) { return word_index(lr_schedule_names, name); }
