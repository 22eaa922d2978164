/* train_settings: the table of training settings (train_settings.h), printed and parsed. */
#include "train_settings.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "util.h"

const TrainSetting train_settings[] = {
#define X(field, ctype, kind, lo, hi, doc) {#field, kind, offsetof(TrainConfig, field), lo, hi, doc},
    MMC_TRAIN_SETTINGS(X)
#undef X
};
const int n_train_settings = sizeof train_settings / sizeof train_settings[0];

#define FIELD(t, s, type) (*(type *)((char *)(t) + (s)->offset))

void train_settings_print(StrBuf *o, const TrainConfig *t) {
    char d[32];
    for (int i = 0; i < n_train_settings; i++) {
        const TrainSetting *s = &train_settings[i];
        switch (s->kind) {
        case TK_REAL: sb_printf(o, " %s=%s", s->key, fmt_double(d, FIELD(t, s, const double))); break;
        case TK_INT: sb_printf(o, " %s=%d", s->key, FIELD(t, s, const int)); break;
        case TK_SCHEDULE: sb_printf(o, " %s=%s", s->key, lr_schedule_name(FIELD(t, s, const LrSchedule))); break;
        }
    }
}

char *train_setting_parse(TrainConfig *t, const TrainSetting *s, const char *text) {
    char *end;
    errno = 0;
    switch (s->kind) {
    case TK_REAL: {
        double v = strtod(text, &end);
        if (end == text || *end) return xasprintf("%s: '%s' is not a number", s->key, text);
        char lo[32], hi[32];
        if (!(v >= s->lo && v <= s->hi))
            return xasprintf("%s: %s is outside [%s, %s]", s->key, text, fmt_double(lo, s->lo), fmt_double(hi, s->hi));
        FIELD(t, s, double) = v;
        return NULL;
    }
    case TK_INT: {
        long v = strtol(text, &end, 10);
        if (end == text || *end || errno || v < -2147483647L - 1 || v > 2147483647L)
            return xasprintf("%s: '%s' is not an integer", s->key, text);
        if (v < s->lo || v > s->hi) return xasprintf("%s: %s is outside [%.0f, %.0f]", s->key, text, s->lo, s->hi);
        FIELD(t, s, int) = (int)v;
        return NULL;
    }
    case TK_SCHEDULE: {
        int v = lr_schedule_parse(text);
        if (v < 0) return xasprintf("%s: unknown schedule '%s' (known: %s)", s->key, text, word_list(lr_schedule_names));
        FIELD(t, s, LrSchedule) = (LrSchedule)v;
        return NULL;
    }
    }
    return xasprintf("%s: unknown kind", s->key);
}

char *train_scaler_check(const TrainConfig *t) {
    if (t->scale_max > 0 && t->scale_min > t->scale_max)
        return xasprintf("loss_scale: min %g is above max %g", t->scale_min, t->scale_max);
    if (t->scale_max > 0 && t->scale_init > t->scale_max)
        return xasprintf("loss_scale: init %g is above max %g", t->scale_init, t->scale_max);
    if (t->scale_init < t->scale_min) return xasprintf("loss_scale: init %g is below min %g", t->scale_init, t->scale_min);
    return NULL;
}

MmcScaler train_scaler(const TrainConfig *t) {
    MmcScaler p = {t->scale_growth, t->scale_backoff, t->scale_max, t->scale_min, t->scale_interval, t->scale_hysteresis,
                   t->scale_fixed};
    return p;
}

char *train_settings_check(const TrainConfig *t) {
    for (int i = 0; i < n_train_settings; i++) {
        StrBuf one = {0};
        TrainConfig scratch = *t;
        const TrainSetting *s = &train_settings[i];
        char d[32];
        switch (s->kind) {
        case TK_REAL: sb_append(&one, fmt_double(d, *(const double *)((const char *)t + s->offset))); break;
        case TK_INT: sb_printf(&one, "%d", *(const int *)((const char *)t + s->offset)); break;
        case TK_SCHEDULE: sb_append(&one, lr_schedule_name(*(const LrSchedule *)((const char *)t + s->offset))); break;
        }
        char *err = train_setting_parse(&scratch, s, one.s);
        sb_free(&one);
        if (err) return err;
    }
    return train_scaler_check(t);
}
