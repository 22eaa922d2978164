/* precision_schedule: see precision_schedule.h. */
#include "precision_schedule.h"

#include "util.h"

char *schedule_fallback_condition(const PrecisionSchedule *s) {
    StrBuf o = {0};
    sb_append(&o, "when ");
    if (s->overflow_rate > 0) /* %g: a rate of 0.07 is 7%, not 7.000000000000001% */
        sb_printf(&o, "more than %g%% of %lld updates overflow", 100 * s->overflow_rate, (long long)s->window);
    if (s->min_scale > 0) {
        char d[32];
        sb_printf(&o, "%sthe scale falls below %s", s->overflow_rate > 0 ? ", or " : "", fmt_double(d, s->min_scale));
    }
    return o.s;
}
