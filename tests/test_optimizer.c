/* The update phase on the ref backend against the formulas of docs/precision.md §2-4, computed
 * here in double from the same inputs:
 *  - unscale (g / scale), global L2 norm over all parameters, clip coefficient
 *    min(1, max_norm / (norm + 1e-6)), AdamW (decoupled decay, bias corrections), MiniMind's
 *    cosine learning rate; tolerance 2e-6 of the magnitude of the terms each result is a
 *    sum of (m and p are differences of similar terms): the kernels round each of about ten
 *    ops to f32 (2^-24 ~ 6e-8 each);
 *  - GradScaler: an injected inf or nan skips the step (weights, moments and Adam's step
 *    count unchanged, bit for bit), halves the scale and resets the tracker; after
 *    `interval` clean updates the scale doubles (PyTorch's traced sequence with interval 3:
 *    65536, 65536, 131072 with trackers 1, 2, 0; an inf then gives 65536 and 0). */
#include "test_util.h"

typedef struct Setup {
    Backend *b;
    int64_t n; /* elements of the flat buffers */
    float *p, *m, *v, *g;
    MmcStepState st;
} Setup;

static Setup setup(Plan *pl, double grad_scale, float loss_scale, int adam_step, int update) {
    Setup s = {0};
    s.b = ref_backend_create(pl);
    s.n = pl->p->buffer_bytes[BUF_PARAMS] / 4;
    s.p = xcalloc((size_t)s.n, 4), s.m = xcalloc((size_t)s.n, 4), s.v = xcalloc((size_t)s.n, 4), s.g = xcalloc((size_t)s.n, 4);
    for (int64_t i = 0; i < s.n; i++) {
        s.p[i] = (float)(test_uniform() * 2 - 1);
        s.m[i] = (float)((test_uniform() * 2 - 1) * 1e-3);
        s.v[i] = (float)(test_uniform() * 1e-6);
        s.g[i] = (float)((test_uniform() * 2 - 1) * grad_scale * loss_scale);
    }
    s.b->write(s.b, BUF_PARAMS, 0, s.p, s.n * 4);
    s.b->write(s.b, BUF_ADAM_M, 0, s.m, s.n * 4);
    s.b->write(s.b, BUF_ADAM_V, 0, s.v, s.n * 4);
    s.b->write(s.b, BUF_GRADS, 0, s.g, s.n * 4);
    s.st.scale = loss_scale;
    s.st.adam_step = adam_step;
    s.st.update = update;
    s.st.total_micro = 1000;
    s.st.loss_seed = loss_scale;
    s.b->write(s.b, BUF_STATE, 0, &s.st, sizeof s.st);
    return s;
}

static void release(Setup *s) {
    free(s->p), free(s->m), free(s->v), free(s->g);
    s->b->destroy(s->b);
}

static int close_to(double got, double want, double rel) { return fabs(got - want) <= rel * fabs(want) + 1e-12; }

/* within `rel` of the size of the terms the result is made of */
static int close_terms(double got, double want, double terms, double rel) { return fabs(got - want) <= rel * terms + 1e-12; }

static void adamw_case(Plan *pl, const char *what, double grad_scale, int adam_step, int update) {
    const TrainConfig *t = &pl->g->train;
    Setup s = setup(pl, grad_scale, 1024.0f, adam_step, update);
    s.b->run_phase(s.b, PHASE_UPDATE);
    float *p = (float *)test_buffer(s.b, BUF_PARAMS), *m = (float *)test_buffer(s.b, BUF_ADAM_M);
    float *v = (float *)test_buffer(s.b, BUF_ADAM_V), *g = (float *)test_buffer(s.b, BUF_GRADS);
    MmcStepState st;
    s.b->read(s.b, BUF_STATE, 0, &st, sizeof st);
    /* the formulas, in double */
    double ss = 0;
    for (int64_t i = 0; i < s.n; i++) ss += ((double)s.g[i] / 1024) * ((double)s.g[i] / 1024);
    double norm = sqrt(ss), coef = fmin(1.0, t->clip / (norm + 1e-6));
    double micro = (double)update * t->accumulation + t->accumulation - 1;
    double lr = t->lr / 10 + 0.5 * t->lr * (1 + cos(M_PI * micro / 1000));
    int step = adam_step + 1;
    double bc1 = 1 - pow(t->beta1, step), bc2 = 1 - pow(t->beta2, step);
    int bad = 0;
    for (int64_t i = 0; i < s.n; i++) {
        double gi = (double)s.g[i] / 1024 * coef;
        double mi = t->beta1 * s.m[i] + (1 - t->beta1) * gi;
        double vi = t->beta2 * s.v[i] + (1 - t->beta2) * gi * gi;
        double step_i = (lr / bc1) * mi / (sqrt(vi) / sqrt(bc2) + t->eps);
        double pi = s.p[i] * (1 - lr * t->weight_decay) - step_i;
        double m_terms = fabs(t->beta1 * s.m[i]) + fabs((1 - t->beta1) * gi), p_terms = fabs(s.p[i]) + fabs(step_i);
        if (!close_terms(p[i], pi, p_terms, 2e-6) || !close_terms(m[i], mi, m_terms, 2e-6) || !close_to(v[i], vi, 2e-6) ||
            g[i] != 0) {
            if (bad++ < 5)
                fprintf(stderr, "  %s: element %lld: p %.9g want %.9g, m %.9g want %.9g, v %.9g want %.9g, g %g\n", what,
                        (long long)i, p[i], pi, m[i], mi, v[i], vi, g[i]);
        }
    }
    CHECK(bad == 0, "%s: %d elements differ from the AdamW formulas", what, bad);
    CHECK(close_to(st.grad_norm, norm, 1e-6), "%s: grad norm %.9g, want %.9g", what, st.grad_norm, norm);
    CHECK(close_to(st.clip_coef, coef, 1e-6), "%s: clip coefficient %.9g, want %.9g", what, st.clip_coef, coef);
    CHECK(close_to(st.lr, lr, 1e-12), "%s: lr %.12g, want %.12g", what, st.lr, lr);
    CHECK(st.adam_step == step && st.update == update + 1 && st.skipped == 0, "%s: counters %d %d %d", what, st.adam_step,
          st.update, st.skipped);
    printf("  %-34s norm %.4g coef %.4g lr %.6g: matches\n", what, norm, coef, lr);
    free(p), free(m), free(v), free(g);
    release(&s);
}

static void skip_case(Plan *pl, const char *what, float bad_value) {
    Setup s = setup(pl, 1e-3, 65536.0f, 7, 9);
    s.st.growth_tracker = 5;
    s.b->write(s.b, BUF_STATE, 0, &s.st, sizeof s.st);
    float inject = bad_value;
    s.b->write(s.b, BUF_GRADS, (s.n / 3) * 4, &inject, 4);
    s.b->run_phase(s.b, PHASE_UPDATE);
    float *p = (float *)test_buffer(s.b, BUF_PARAMS), *m = (float *)test_buffer(s.b, BUF_ADAM_M);
    float *v = (float *)test_buffer(s.b, BUF_ADAM_V), *g = (float *)test_buffer(s.b, BUF_GRADS);
    MmcStepState st;
    s.b->read(s.b, BUF_STATE, 0, &st, sizeof st);
    CHECK(!memcmp(p, s.p, (size_t)s.n * 4), "%s: weights changed on a skipped step", what);
    CHECK(!memcmp(m, s.m, (size_t)s.n * 4) && !memcmp(v, s.v, (size_t)s.n * 4), "%s: moments changed", what);
    int zero = 1;
    for (int64_t i = 0; i < s.n; i++) zero &= g[i] == 0;
    CHECK(zero, "%s: gradients not cleared for the next accumulation", what);
    CHECK(st.adam_step == 7, "%s: Adam step count %d, want 7 (unchanged)", what, st.adam_step);
    CHECK(st.scale == 32768.0f && st.growth_tracker == 0, "%s: scale %g tracker %d, want 32768 and 0", what, st.scale,
          st.growth_tracker);
    CHECK(st.skipped == 1 && st.update == 10 && st.found_inf == 0, "%s: skipped %d update %d found_inf %g", what, st.skipped,
          st.update, st.found_inf);
    CHECK(st.loss_seed == 32768.0f / pl->g->train.accumulation, "%s: loss seed %g", what, st.loss_seed);
    printf("  %-34s skipped, scale 65536 -> %g, tracker 5 -> %d\n", what, st.scale, st.growth_tracker);
    free(p), free(m), free(v), free(g);
    release(&s);
}

/* PyTorch's traced GradScaler sequence with growth_interval 3 */
static void growth_case(void) {
    char *path = test_write_graph("scaler_interval3", "include \"../../../graphs/tiny.lua\"\n"
                                                      "train { loss_scale = { init = 65536, interval = 3 } }\n");
    Plan *pl = test_compile(path, NULL, NULL, 1);
    Setup s = setup(pl, 1e-3, 65536.0f, 0, 0);
    const float want_scale[] = {65536, 65536, 131072, 65536, 65536};
    const int want_tracker[] = {1, 2, 0, 0, 1};
    for (int u = 0; u < 5; u++) {
        for (int64_t i = 0; i < s.n; i++) s.g[i] = (float)((test_uniform() * 2 - 1) * 60);
        if (u == 3) s.g[0] = INFINITY;
        s.b->write(s.b, BUF_GRADS, 0, s.g, s.n * 4);
        s.b->run_phase(s.b, PHASE_UPDATE);
        MmcStepState st;
        s.b->read(s.b, BUF_STATE, 0, &st, sizeof st);
        CHECK(st.scale == want_scale[u] && st.growth_tracker == want_tracker[u], "update %d: scale %g tracker %d, want %g %d",
              u + 1, st.scale, st.growth_tracker, want_scale[u], want_tracker[u]);
        CHECK(st.adam_step == (u < 3 ? u + 1 : u), "update %d: Adam step %d", u + 1, st.adam_step);
    }
    printf("  growth interval 3: scale 65536 65536 131072, inf -> 65536, then tracker 1: matches\n");
    release(&s);
    free(path);
}

int main(void) {
    Plan *pl = test_compile("graphs/tiny.lua", NULL, NULL, 1);
    CHECK(pl->g->train.loss_scaling && pl->g->train.clip == 1.0, "tiny's defaults: loss scaling on, clip 1");
    adamw_case(pl, "clipping active (norm > 1)", 1e-2, 0, 0);
    adamw_case(pl, "clipping inactive (norm < 1)", 1e-4, 4, 17);
    adamw_case(pl, "late step, late in the schedule", 3e-3, 499, 990);
    skip_case(pl, "injected +inf", INFINITY);
    skip_case(pl, "injected nan", NAN);
    growth_case();
    /* without loss scaling (fp32), PyTorch runs no inf check: the step is taken */
    Plan *fp32 = test_compile("graphs/tiny.lua", "fp32", NULL, 1);
    Setup s = setup(fp32, 1e-3, 1.0f, 0, 0);
    float inject = INFINITY;
    s.b->write(s.b, BUF_GRADS, 0, &inject, 4);
    s.b->run_phase(s.b, PHASE_UPDATE);
    MmcStepState st;
    s.b->read(s.b, BUF_STATE, 0, &st, sizeof st);
    CHECK(st.adam_step == 1 && st.skipped == 0 && st.scale == 1.0f, "fp32: step %d skipped %d scale %g", st.adam_step,
          st.skipped, st.scale);
    release(&s);
    return test_done("test_optimizer");
}
