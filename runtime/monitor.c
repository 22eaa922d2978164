/* monitor: see monitor.h. */
#include "monitor.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void monitor_init(Monitor *m, const Plan *pl, int64_t interval) {
    memset(m, 0, sizeof *m);
    m->g = pl->g;
    m->interval = interval > 0 ? interval : 1;
    m->underflow_warned = -1;
    m->low_precision = xcalloc((size_t)pl->g->n_params + 1, 1);
    /* a tensor's gradient is low-precision where one of its contributions is: a GEMM's dW in
     * f16 under eager rounding, added to the f32 gradient by grad_accumulate */
    for (int i = 0; i < pl->g->n_nodes; i++) {
        const Node *n = pl->g->nodes[i];
        if (n->op != OP_GRAD_ACCUMULATE || (n->in[0]->dtype != DT_F16 && n->in[0]->dtype != DT_BF16)) continue;
        if (n->a.param >= 0 && n->a.param < pl->g->n_params && !m->low_precision[n->a.param])
            m->low_precision[n->a.param] = 1, m->n_low_precision++;
    }
}

void monitor_free(Monitor *m) { free(m->low_precision), free(m->skip_ring); }

void monitor_fallback(Monitor *m, double rate, int64_t window, double min_scale, const char *what, int64_t delay) {
    m->fb_what = what;
    m->fb_rate = rate, m->fb_window = window > 0 ? window : 1, m->fb_min_scale = min_scale, m->fb_delay = delay;
    free(m->skip_ring);
    m->skip_ring = xcalloc((size_t)m->fb_window, 1);
}

/* this update's overflow into the ring of the last fb_window */
static void push_skip(Monitor *m, int skipped_now) {
    int overflowed = skipped_now > m->last_skipped;
    m->last_skipped = skipped_now;
    if (!m->skip_ring) return;
    m->skip_ring[m->seen % m->fb_window] = (unsigned char)overflowed;
    m->seen++;
}

static void push_loss(Monitor *m, double loss) {
    if (!isfinite(loss)) return;
    m->losses[m->next_loss] = loss;
    m->next_loss = (m->next_loss + 1) % MONITOR_SPIKE_WINDOW;
    if (m->n_losses < MONITOR_SPIKE_WINDOW) m->n_losses++;
}

void monitor_resume(Monitor *m, const char *metrics_path, int64_t start) {
    m->window_start = start / m->interval * m->interval;
    m->skipped_at_start = 0;
    size_t len = 0;
    char *text = try_read_file(metrics_path, &len);
    int found_start = m->window_start == 0;
    for (char *line = text, *nl; line && (nl = memchr(line, '\n', len - (size_t)(line - text))); line = nl + 1) {
        *nl = 0;
        json_t *j = json_loads(line, 0, NULL);
        json_t *u = j ? json_object_get(j, "update") : NULL;
        if (json_is_integer(u) && json_integer_value(u) <= start) {
            json_t *loss = json_object_get(j, "loss"), *skipped = json_object_get(j, "skipped"),
                   *fallback_at = json_object_get(j, "fallback_at");
            if (json_is_number(loss)) push_loss(m, json_number_value(loss));
            if (json_is_integer(skipped)) push_skip(m, (int)json_integer_value(skipped));
            if (json_is_integer(fallback_at)) m->fallback_at = json_integer_value(fallback_at);
            if (json_integer_value(u) == m->window_start && json_is_integer(skipped)) {
                m->skipped_at_start = (int)json_integer_value(skipped);
                found_start = 1;
            }
        }
        json_decref(j);
    }
    free(text);
    if (!found_start) { /* the line that began the interval is gone: the interval begins here */
        fprintf(stderr, "train: %s has no line of update %lld: the skip rate of the interval it began counts from "
                        "update %lld\n",
                metrics_path, (long long)m->window_start, (long long)start);
        m->window_start = -1; /* taken from the first update's state, monitor_update */
    }
}

/* The mean and standard deviation of the window, in a fixed order (oldest first), so that a
 * rebuilt window gives the same verdict bit for bit. */
static void window_stats(const Monitor *m, double *mean, double *sd) {
    int first = m->n_losses < MONITOR_SPIKE_WINDOW ? 0 : m->next_loss;
    double s = 0, ss = 0;
    for (int k = 0; k < m->n_losses; k++) s += m->losses[(first + k) % MONITOR_SPIKE_WINDOW];
    *mean = s / m->n_losses;
    for (int k = 0; k < m->n_losses; k++) {
        double d = m->losses[(first + k) % MONITOR_SPIKE_WINDOW] - *mean;
        ss += d * d;
    }
    *sd = sqrt(ss / m->n_losses);
}

MonitorReport monitor_update(Monitor *m, int64_t u, int64_t steps, double loss, const MmcStepState *st,
                             const unsigned int *zeros, int scaling, StrBuf *json) {
    MonitorReport rep = {0};
    const Graph *g = m->g;
    int64_t update = u + 1;
    if (m->window_start < 0) { /* a resume without the interval's first line: after this update */
        m->window_start = update;
        m->skipped_at_start = st->skipped;
    }
    /* underflow: a clean update whose whole gradient is tiny, or tensors gone mostly to zero */
    int applied = isfinite(st->grad_norm);
    int tiny_norm = applied && st->grad_norm < MONITOR_UNDERFLOW_NORM;
    int worst = -1;
    double worst_share = 0;
    for (int p = 0; p < g->n_params; p++) {
        if (!m->low_precision[p]) continue;
        double share = (double)zeros[p] / (double)shape_numel(&g->params[p].node->shape);
        if (share > worst_share) worst_share = share, worst = p;
    }
    int zero_alarm = applied && worst >= 0 && worst_share >= MONITOR_UNDERFLOW_ZERO_SHARE;
    rep.underflow = tiny_norm || zero_alarm;
    int64_t window = (update - 1) / m->interval;
    if (rep.underflow) {
        sb_printf(json, ", \"underflow\": true");
        if (m->underflow_warned != window) {
            if (tiny_norm)
                fprintf(stderr, "mmc train: update %lld: the gradient norm is %.3g, below %g: the gradients have underflowed "
                                "(a higher loss scale, or a bf16 or fp32 policy)\n",
                        (long long)update, (double)st->grad_norm, MONITOR_UNDERFLOW_NORM);
            else
                fprintf(stderr, "mmc train: update %lld: %.1f%% of the gradient of %s is exactly zero: its f16/bf16 "
                                "gradient has underflowed (a higher loss scale, or a bf16 or fp32 policy)\n",
                        (long long)update, 100 * worst_share, g->params[worst].node->name);
            m->underflow_warned = window;
        }
    }
    /* a loss spike against the window of the losses before it */
    if (isfinite(loss) && m->n_losses == MONITOR_SPIKE_WINDOW) {
        double mean, sd;
        window_stats(m, &mean, &sd);
        /* a jump that is large beside both the noise and the loss itself (a tenth of it, or of
         * 1 below 1, where a small loss's noise is large compared with it) */
        double jump = loss - mean;
        if (jump > 4 * sd && jump > 0.1 * fmax(fabs(mean), 1.0)) {
            rep.spike = 1;
            sb_printf(json, ", \"loss_spike\": true");
            fprintf(stderr, "mmc train: update %lld: the loss spiked to %.4f, from %.4f +- %.4f over the %d updates "
                            "before it\n",
                    (long long)update, loss, mean, sd, MONITOR_SPIKE_WINDOW);
        }
    }
    push_loss(m, loss);
    push_skip(m, st->skipped);
    /* the fallback: once, while a plan with a loss scaler runs */
    if (m->fb_what && !m->fallback_at && scaling) {
        int64_t n = m->seen < m->fb_window ? m->seen : m->fb_window, over = 0;
        for (int64_t k = 0; k < n; k++) over += m->skip_ring[k];
        int by_rate = m->fb_rate > 0 && m->seen >= m->fb_window && (double)over > m->fb_rate * (double)m->fb_window;
        int by_scale = m->fb_min_scale > 0 && st->scale < m->fb_min_scale;
        if (by_rate || by_scale) {
            rep.fallback = 1;
            m->fallback_at = update + m->fb_delay + 1;
            json_t *what = json_string(m->fb_what);
            char *quoted = json_dumps(what, JSON_ENCODE_ANY);
            sb_printf(json, ", \"fallback\": %s, \"fallback_at\": %lld", quoted, (long long)m->fallback_at);
            free(quoted);
            json_decref(what);
            if (by_rate)
                fprintf(stderr, "mmc train: update %lld: %lld of the last %lld updates overflowed (%.1f%%, more than %g%%): "
                                "falling back to %s from update %lld\n",
                        (long long)update, (long long)over, (long long)m->fb_window,
                        100.0 * (double)over / (double)m->fb_window, 100 * m->fb_rate, m->fb_what, (long long)m->fallback_at);
            else
                fprintf(stderr, "mmc train: update %lld: the loss scale is %g, below the fallback's min_scale %g: falling "
                                "back to %s from update %lld\n",
                        (long long)update, (double)st->scale, m->fb_min_scale, m->fb_what, (long long)m->fallback_at);
        }
    }
    /* the interval's skip rate, and each low-precision tensor's zero share, at its end */
    if (update % m->interval == 0 || update == steps) {
        rep.window_ended = 1;
        rep.window_updates = update - m->window_start;
        rep.window_skipped = st->skipped - m->skipped_at_start;
        sb_printf(json, ", \"interval_updates\": %lld, \"interval_skipped\": %d, \"skip_rate\": %.6g",
                  (long long)rep.window_updates, rep.window_skipped,
                  rep.window_updates > 0 ? (double)rep.window_skipped / (double)rep.window_updates : 0.0);
        if (m->n_low_precision) {
            sb_append(json, ", \"zero_share\": {");
            int k = 0;
            for (int p = 0; p < g->n_params; p++) {
                if (!m->low_precision[p]) continue;
                double share = (double)zeros[p] / (double)shape_numel(&g->params[p].node->shape);
                sb_printf(json, "%s\"%s\": %.6g", k++ ? ", " : "", g->params[p].node->name, share);
            }
            sb_append(json, "}");
        }
        if (update % m->interval == 0) m->window_start = update, m->skipped_at_start = st->skipped;
    }
    return rep;
}
