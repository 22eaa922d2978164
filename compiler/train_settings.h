/* train_settings: the one table of training settings. Each row is a field of TrainConfig,
 * its kind and its key on the plan's `train` line; the plan writes and reads that line from
 * the table, so a setting added here travels from the graph file to both backends. train{}
 * in the graph file (frontend_train.c) sets them; grad_norm.cu, adamw.cu, step_finish.cu and
 * the ref backend use them. */
#ifndef MMC_TRAIN_SETTINGS_H
#define MMC_TRAIN_SETTINGS_H

#include <stddef.h>

#include "lr_schedule.h"
#include "step_state.h"

struct PrecisionSchedule;

typedef enum TrainKind {
    TK_REAL,     /* a double, written so that it reads back exactly */
    TK_INT,      /* an int */
    TK_SCHEDULE, /* an LrSchedule, written by name */
} TrainKind;

/* The range is what the update kernels and the ref backend assume of a value (beta < 1 for
 * the bias corrections, eps > 0 for the denominator, accumulation >= 1 for the seed): a plan
 * with a value outside it is refused when read.
 *  field           C type      kind         range                 what it is (torch names in brackets) */
#define MMC_TRAIN_SETTINGS(X)                                                                                                     \
    X(lr,             double,     TK_REAL,     0, 1e6,               "peak learning rate (AdamW lr)")                             \
    X(beta1,          double,     TK_REAL,     0, 0.999999999,       "AdamW betas[0]")                                            \
    X(beta2,          double,     TK_REAL,     0, 0.999999999,       "AdamW betas[1]")                                            \
    X(eps,            double,     TK_REAL,     1e-30, 1,             "AdamW eps")                                                 \
    X(weight_decay,   double,     TK_REAL,     0, 1e6,               "AdamW weight_decay, decoupled")                             \
    X(schedule,       LrSchedule, TK_SCHEDULE, 0, 0,                 "the learning-rate schedule (lr_schedule.h)")                \
    X(warmup,         int,        TK_INT,      0, 2147483647,        "updates of linear warm-up: lr x (update + 1) / warmup")     \
    X(clip,           double,     TK_REAL,     0, 1e30,              "max grad norm (clip_grad_norm_); 0 disables clipping")      \
    X(loss_scaling,   int,        TK_INT,      0, 1,                 "1: dynamic loss scaling (GradScaler); 0: none (fp32 runs)") \
    X(scale_init,     double,     TK_REAL,     1e-30, 1e38,          "GradScaler init_scale")                                     \
    X(scale_growth,   double,     TK_REAL,     1, 1e6,               "GradScaler growth_factor")                                  \
    X(scale_backoff,  double,     TK_REAL,     1e-30, 1,             "GradScaler backoff_factor")                                 \
    X(scale_interval, int,        TK_INT,      1, 2147483647,        "GradScaler growth_interval, in clean updates")              \
    X(scale_max,      double,     TK_REAL,     0, 1e38,              "the scale's cap (max_scale); 0: none")                      \
    X(scale_min,      double,     TK_REAL,     0, 1e38,              "the scale's floor (min_scale), an alarm when reached; 0: none") \
    X(scale_hysteresis, int,      TK_INT,      1, 2147483647,        "consecutive overflowing updates before a backoff (hysteresis)") \
    X(scale_fixed,    int,        TK_INT,      0, 1,                 "1: a static scale, scale_init, never grown or backed off")  \
    X(accumulation,   int,        TK_INT,      1, 1048576,           "micro-batches per optimizer update")                        \
    X(epochs,         int,        TK_INT,      1, 2147483647,        "passes over the training data")                             \
    X(log_interval,   int,        TK_INT,      1, 2147483647,        "updates between progress lines")

typedef struct TrainConfig {
#define X(field, ctype, kind, lo, hi, doc) ctype field;
    MMC_TRAIN_SETTINGS(X)
#undef X
    char *where; /* the graph file's train{} call */
    /* train{}'s precision schedule and fallback (precision_schedule.h), or NULL: no setting
     * of the table, since each plan of the schedule has one policy and the plan file holds
     * none of it */
    struct PrecisionSchedule *precision;
} TrainConfig;

typedef struct TrainSetting {
    const char *key; /* the field's name */
    TrainKind kind;
    size_t offset;   /* of the field in TrainConfig */
    double lo, hi;   /* the values it may take (numbers), both included */
    const char *doc;
} TrainSetting;

extern const TrainSetting train_settings[];
extern const int n_train_settings;

struct StrBuf;
void train_settings_print(struct StrBuf *o, const TrainConfig *t); /* " key=value" for each, in table order */
/* sets the setting of that key from its text; NULL, or what is wrong, a value outside its
 * range included (caller frees) */
char *train_setting_parse(TrainConfig *t, const TrainSetting *s, const char *text);
/* NULL, or the first setting outside its range (caller frees): the frontend refuses what the
 * plan reader would */
char *train_settings_check(const TrainConfig *t);
/* NULL, or what is wrong between the loss scaler's settings: a floor above the cap, an init
 * outside them (caller frees) */
char *train_scaler_check(const TrainConfig *t);
MmcScaler train_scaler(const TrainConfig *t); /* the scaler's settings as the update takes them */

#endif
