/* lr_schedule: the schedules' names (see lr_schedule.h). */
#include "lr_schedule.h"

#include <stddef.h>
#include <string.h>

const char *const lr_schedule_names[SCHED_COUNT + 1] = {
#define X(e, name, doc) name,
    MMC_LR_SCHEDULES(X)
#undef X
    NULL};

const char *lr_schedule_name(LrSchedule s) { return (unsigned)s < SCHED_COUNT ? lr_schedule_names[s] : "?"; }

int lr_schedule_parse(const char *name) {
    for (int i = 0; i < SCHED_COUNT; i++)
        if (strcmp(lr_schedule_names[i], name) == 0) return i;
    return -1;
}
