/* lr_schedule: the learning-rate schedules train{ schedule = NAME } can name. grad_norm.cu
 * and the ref backend's grad_norm compute each update's lr from it, at the update's last
 * micro-step s of the run's S, before the warm-up factor. */
#ifndef MMC_LR_SCHEDULE_H
#define MMC_LR_SCHEDULE_H

/*        enum             name               the lr at micro-step s of S */
#define MMC_LR_SCHEDULES(X)                                                               \
    X(MINIMIND_COSINE, "minimind_cosine", "MiniMind's: lr/10 + lr/2 (1 + cos(pi s / S))") \
    X(CONSTANT,        "constant",        "lr throughout")

typedef enum LrSchedule {
#define X(e, name, doc) SCHED_##e,
    MMC_LR_SCHEDULES(X)
#undef X
    SCHED_COUNT
} LrSchedule;

extern const char *const lr_schedule_names[SCHED_COUNT + 1]; /* NULL-terminated, for messages */
const char *lr_schedule_name(LrSchedule s);
int lr_schedule_parse(const char *name); /* -1 if unknown */

#endif
