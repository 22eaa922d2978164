/* The loss scaler (templates/step_state.h, mmc_scaler_update): each setting against its
 * formula on sequences written out by hand; the ref backend's update phase against the same
 * rule on a plan compiled with those settings, with an inf written into the gradients before
 * the chosen updates; and the graph file's loss_scale{} refusals. With --trajectories FILE it
 * writes the scale after every update of random overflow sequences under several settings,
 * one JSON line each, for tests/scaler_model.py to check against its own model of each
 * rule (tests/test_scaler_model.sh). */
#include "test_util.h"

#include <setjmp.h>

#include "init.h"

static jmp_buf on_die;
static char last_error[1024];
static void hook(const char *msg) {
    snprintf(last_error, sizeof last_error, "%s", msg);
    longjmp(on_die, 1);
}

/* the message compiling the graph file dies with, or NULL when it compiles */
static char *test_compile_error(const char *path) {
    set_die_hook(hook);
    last_error[0] = 0;
    char *err = NULL;
    if (!setjmp(on_die)) test_compile(path, NULL, NULL, 1);
    else err = xstrdup(last_error);
    set_die_hook(NULL);
    return err;
}

static MmcScaler gradscaler(void) { return (MmcScaler){2.0, 0.5, 0, 0, 3, 1, 0}; }

/* runs the rule over `found` ('x' an overflowing update, '.' a clean one) from scale s0 */
static MmcStepState walk(MmcScaler p, float s0, const char *found, float *scales) {
    MmcStepState s = {0};
    s.scale = s0;
    for (int i = 0; found[i]; i++) {
        s.found_inf = found[i] == 'x' ? 1.0f : 0.0f;
        mmc_scaler_update(&s, &p);
        s.found_inf = 0;
        if (scales) scales[i] = s.scale;
    }
    return s;
}

static void expect(const char *what, MmcScaler p, float s0, const char *found, const float *want) {
    float got[64];
    walk(p, s0, found, got);
    for (int i = 0; found[i]; i++)
        CHECK(got[i] == want[i], "%s: after update %d of '%s' the scale is %g, the formula gives %g", what, i + 1, found, got[i],
              want[i]);
}

static void formulas(void) {
    /* GradScaler: x0.5 on each overflow, x2 after 3 clean updates in a row */
    expect("gradscaler", gradscaler(), 8, ".x..x...", (float[]){8, 4, 4, 4, 2, 2, 2, 4});
    MmcScaler p = gradscaler();
    p.hysteresis = 2; /* the first overflow of a streak is forgiven; each one after it backs off */
    expect("hysteresis 2", p, 8, "x.xxx..x.", (float[]){8, 8, 8, 4, 2, 2, 2, 2, 2});
    p = gradscaler();
    p.max = 10; /* a growth stops at the cap, and stays there */
    expect("max 10", p, 4, "......", (float[]){4, 4, 8, 8, 8, 10});
    p = gradscaler();
    p.min = 3; /* a backoff stops at the floor */
    expect("min 3", p, 16, "xxxx", (float[]){8, 4, 3, 3});
    p = gradscaler();
    p.fixed = 1;
    expect("fixed", p, 1024, "x...x..", (float[]){1024, 1024, 1024, 1024, 1024, 1024, 1024});
    p = gradscaler();
    p.growth = 1e30; /* a product that is not finite in f32 leaves the scale, as GradScaler */
    expect("overflowing growth", p, 1e20f, "...", (float[]){1e20f, 1e20f, 1e20f});
    MmcStepState s = walk(gradscaler(), 8, "..x", NULL);
    CHECK(s.growth_tracker == 0 && s.overflow_streak == 1, "an overflow restarts the growth count (%d) and starts a streak (%d)",
          s.growth_tracker, s.overflow_streak);
    s = walk(gradscaler(), 8, "xx.", NULL);
    CHECK(s.overflow_streak == 0 && s.growth_tracker == 1, "a clean update ends the streak (%d) and counts (%d)",
          s.overflow_streak, s.growth_tracker);
}

/* the ref backend's update phase takes the settings the graph file gives */
static void ref_backend(void) {
    const char *lua = "defaults { vocab = 320, dim = 64, layers = 1, heads = 4, kv_heads = 2, ffn = 192, batch = 2, seq = 16 }\n"
                      "include \"../../../graphs/minimind.lua\"\n"
                      "train { loss_scale = { init = 1024, growth = 2, backoff = 0.25, interval = 2, max = 4096, min = 64, "
                      "hysteresis = 2 } }\n";
    Plan *pl = test_compile(test_write_graph("scaler", lua), NULL, NULL, 1);
    const TrainConfig *t = &pl->g->train;
    CHECK(t->scale_max == 4096 && t->scale_min == 64 && t->scale_hysteresis == 2 && t->scale_backoff == 0.25,
          "the plan's train line keeps the settings (max %g min %g hysteresis %d)", t->scale_max, t->scale_min,
          t->scale_hysteresis);
    Backend *b = ref_backend_create(pl);
    init_consts(b);
    test_rng = 99;
    test_fill(b, 320, 0.1, 1024.0f);
    MmcStepState st, model;
    b->read(b, BUF_STATE, 0, &st, sizeof st);
    st.scale = 1024.0f, st.loss_seed = 1024.0f, st.total_micro = 40;
    b->write(b, BUF_STATE, 0, &st, sizeof st);
    model = st;
    MmcScaler p = train_scaler(t);
    const char *found = "x.xx....xxxxxxxx.";
    const float inf = INFINITY;
    for (int u = 0; found[u]; u++) {
        b->run_phase(b, PHASE_MICRO);
        if (found[u] == 'x') b->write(b, BUF_GRADS, 0, &inf, sizeof inf);
        b->run_phase(b, PHASE_UPDATE);
        b->read(b, BUF_STATE, 0, &st, sizeof st);
        model.found_inf = found[u] == 'x';
        mmc_scaler_update(&model, &p);
        CHECK(st.scale == model.scale && st.overflow_streak == model.overflow_streak && st.growth_tracker == model.growth_tracker,
              "update %d: ref backend scale %g streak %d tracker %d, the rule gives %g %d %d", u + 1, (double)st.scale,
              st.overflow_streak, st.growth_tracker, (double)model.scale, model.overflow_streak, model.growth_tracker);
    }
    CHECK(st.scale == 64.0f, "the streak of overflows ends at the floor (scale %g)", (double)st.scale);
    int skipped = 0;
    for (int u = 0; found[u]; u++) skipped += found[u] == 'x';
    CHECK(st.skipped == skipped, "%d updates skipped, %d overflowed", st.skipped, skipped);
    b->destroy(b);
    printf("  ref backend: %d updates under init 1024, max 4096, min 64, hysteresis 2: the rule's scales\n", (int)strlen(found));
}

/* a graph file's loss_scale{} that cannot be meant is refused where it is written */
static void refusals(void) {
    static const struct {
        const char *table, *message;
    } bad[] = {
        {"{ fixed = 1024, growth = 2 }", "fixed = S is a static scale; 'growth' would change it"},
        {"{ fixed = 0 }", "fixed must be a scale above 0"},
        {"{ min = 100, max = 10 }", "min 100 is above max 10"},
        {"{ init = 65536, max = 1024 }", "init 65536 is above max 1024"},
        {"{ hysteresis = 0 }", "hysteresis >= 1"},
        {"{ cap = 3 }", "cap"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *lua = xasprintf("defaults { vocab = 320, dim = 64, layers = 1, heads = 4, kv_heads = 2, ffn = 192, batch = 2, "
                              "seq = 16 }\ninclude \"../../../graphs/minimind.lua\"\ntrain { loss_scale = %s }\n",
                              bad[i].table);
        char *path = test_write_graph("scaler_bad", lua);
        char *err = test_compile_error(path);
        CHECK(err && strstr(err, bad[i].message) && strstr(err, "scaler_bad.lua:3"), "loss_scale = %s: message '%s' lacks '%s' at line 3",
              bad[i].table, err ? err : "(none)", bad[i].message);
        free(err), free(lua), free(path);
    }
}

/* random overflow sequences under several settings, the scale after each update */
static void trajectories(const char *path) {
    static const struct {
        const char *name;
        MmcScaler p;
        float init;
    } cases[] = {
        {"gradscaler", {2.0, 0.5, 0, 0, 20, 1, 0}, 65536},
        {"hysteresis2", {2.0, 0.5, 0, 0, 20, 2, 0}, 65536},
        {"max65536", {2.0, 0.5, 65536, 0, 5, 1, 0}, 32768},
        {"min1024", {2.0, 0.5, 0, 1024, 50, 1, 0}, 4096},
        {"all", {3.0, 0.25, 1e6, 16, 7, 3, 0}, 1000},
        {"fixed", {2.0, 0.5, 0, 0, 20, 1, 1}, 1024},
    };
    StrBuf o = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int rate = 5; rate <= 50; rate += 15) {
            MmcStepState s = {0};
            s.scale = cases[c].init;
            sb_printf(&o, "{\"case\": \"%s\", \"growth\": %.17g, \"backoff\": %.17g, \"max\": %.17g, \"min\": %.17g, "
                          "\"interval\": %d, \"hysteresis\": %d, \"fixed\": %d, \"init\": %.9g, \"found\": \"",
                      cases[c].name, cases[c].p.growth, cases[c].p.backoff, cases[c].p.max, cases[c].p.min, cases[c].p.interval,
                      cases[c].p.hysteresis, cases[c].p.fixed, (double)cases[c].init);
            char found[3001];
            for (int i = 0; i < 3000; i++) found[i] = test_uniform() * 100 < rate ? 'x' : '.';
            found[3000] = 0;
            sb_printf(&o, "%s\", \"scales\": [", found);
            for (int i = 0; i < 3000; i++) {
                s.found_inf = found[i] == 'x';
                mmc_scaler_update(&s, &cases[c].p);
                sb_printf(&o, "%s%.9g", i ? ", " : "", (double)s.scale);
            }
            sb_append(&o, "]}\n");
        }
    write_file_atomic(path, o.s, o.len);
    sb_free(&o);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--trajectories")) {
        trajectories(argv[2]);
        return 0;
    }
    formulas();
    ref_backend();
    refusals();
    return test_done("test_scaler");
}
