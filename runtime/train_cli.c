/* train_cli: `mmc train PLAN_DIR --data FILE ...` (see README, "Training"). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "checkpoint.h"
#include "cli.h"
#include "init.h"
#include "plan_remake.h"
#include "train.h"
#include "util.h"

/* `mmc init PLAN_DIR -o DIR [--seed N]`: a run folder at update 0, so another program (the
 * PyTorch reference) can start from the same weights. */
int cmd_init(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = (uint64_t)option_range("train", "--seed", argv[++i], 0, INT64_MAX);
        else if (argv[i][0] == '-') die("init: unknown option %s", argv[i]);
        else dir = argv[i];
    }
    if (!dir || !out) die("init: usage: mmc init PLAN_DIR -o RUN_DIR [--seed N]");
    if (!out[0]) die("init: -o needs a folder, not an empty name");
    Plan *pl = plan_load(dir);
    Backend *b = ref_backend_create(pl);
    init_params(b, seed);
    MmcStepState st = init_state(pl, 1);
    b->write(b, BUF_STATE, 0, &st, sizeof st);
    RunPosition pos = {0, seed, 0, "", ""};
    int lock = run_folder_lock(out, "init");
    checkpoint_tidy(out, 0);
    checkpoint_save(b, out, &pos);
    close(lock);
    b->destroy(b);
    return 0;
}

/* --loss-scale-NAME: the training setting it replaces (train_settings.h), or NULL */
static const char *loss_scale_key(const char *name) {
    static const char *const names[][2] = {{"init", "scale_init"}, {"growth", "scale_growth"}, {"backoff", "scale_backoff"},
                                           {"interval", "scale_interval"}, {"max", "scale_max"}, {"min", "scale_min"},
                                           {"hysteresis", "scale_hysteresis"}, {"fixed", "scale_init"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i][0], name)) return names[i][1];
    return NULL;
}

int cmd_train(int argc, char **argv) {
    TrainOptions o = {0};
    o.backend = "cuda";
    o.seed = 1;
    o.save_interval = 1000; /* a long run loses at most this many updates to a crash */
    Define *settings = NULL, *scaler = NULL;
    int n_settings = 0, cap_settings = 0, n_scaler = 0, cap_scaler = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (a[0] == '-' && strcmp(a, "--quiet") && strcmp(a, "--force") && strcmp(a, "--find-overflow") && strcmp(a, "--no-fallback") && !has)
            die("train: %s needs a value", a);
        if (!strcmp(a, "--data")) o.data = argv[++i];
        else if (!strcmp(a, "--backend")) o.backend = argv[++i];
        else if (!strcmp(a, "--out")) o.out = argv[++i];
        else if (!strcmp(a, "--resume")) o.resume = argv[++i];
        else if (!strcmp(a, "--init")) o.init = argv[++i];
        else if (!strcmp(a, "--tokenizer")) o.tokenizer = argv[++i];
        else if (!strcmp(a, "--lr") || !strcmp(a, "--weight-decay") || !strcmp(a, "--clip") || !strcmp(a, "--accumulation") ||
                 !strcmp(a, "--warmup")) {
            /* the graph's settings of these names: the plan is made again with them */
            const char *key = !strcmp(a, "--lr") ? "lr" : !strcmp(a, "--weight-decay") ? "weight_decay" : a + 2;
            const char *v = argv[++i];
            if (!strcmp(key, "accumulation")) option_int("train", a, v, 1);
            else if (!strcmp(key, "warmup")) option_int("train", a, v, 0);
            else option_double("train", a, v);
            Define d = {xstrdup(key), xstrdup(v)};
            vec_push(settings, n_settings, cap_settings, d);
        }
        else if (!strncmp(a, "--loss-scale-", 13) && loss_scale_key(a + 13)) {
            /* the scaler's settings: the plan is made again with them over train{}'s */
            const char *v = argv[++i];
            if (!strcmp(a + 13, "interval") || !strcmp(a + 13, "hysteresis")) option_int("train", a, v, 1);
            else option_double("train", a, v);
            Define d = {xstrdup(loss_scale_key(a + 13)), xstrdup(v)};
            vec_push(scaler, n_scaler, cap_scaler, d);
            if (!strcmp(a + 13, "fixed")) {
                Define f = {xstrdup("scale_fixed"), xstrdup("1")};
                vec_push(scaler, n_scaler, cap_scaler, f);
            }
        }
        else if (!strcmp(a, "--val")) o.val = argv[++i];
        else if (!strcmp(a, "--eval-interval")) o.eval_interval = option_int("train", a, argv[++i], 1);
        else if (!strcmp(a, "--val-batches")) o.val_batches = option_int("train", a, argv[++i], 1);
        else if (!strcmp(a, "--steps")) o.steps = option_int("train", a, argv[++i], 0);
        else if (!strcmp(a, "--batch")) o.batch = option_int("train", a, argv[++i], 0);
        else if (!strcmp(a, "--seed")) o.seed = (uint64_t)option_range("train", a, argv[++i], 0, INT64_MAX);
        else if (!strcmp(a, "--shuffle")) o.shuffle = (uint64_t)option_range("train", a, argv[++i], 0, INT64_MAX - 1) + 1;
        else if (!strcmp(a, "--log-interval")) o.log_interval = (int)option_int("train", a, argv[++i], 0);
        else if (!strcmp(a, "--save-interval")) o.save_interval = (int)option_int("train", a, argv[++i], 0);
        else if (!strcmp(a, "--inject-inf")) o.inject_inf = option_int("train", a, argv[++i], 0);
        else if (!strcmp(a, "--stop-after")) o.stop_after = option_int("train", a, argv[++i], 0);
        else if (!strcmp(a, "--quiet")) o.quiet = 1;
        else if (!strcmp(a, "--find-overflow")) o.find_overflow = 1;
        else if (!strcmp(a, "--no-fallback")) o.no_fallback = 1;
        else if (!strcmp(a, "--force")) o.force = 1;
        else if (a[0] == '-') {
            static const char *const known[] = {"--data", "--backend", "--out", "--resume", "--init", "--steps", "--batch",
                                                "--seed", "--shuffle", "--log-interval", "--save-interval",
                                                "--inject-inf", "--stop-after", "--quiet", "--force", "--tokenizer",
                                                "--val", "--eval-interval", "--val-batches", "--lr", "--weight-decay",
                                                "--clip", "--accumulation", "--warmup", "--loss-scale-init",
                                                "--loss-scale-growth", "--loss-scale-backoff", "--loss-scale-interval",
                                                "--loss-scale-max", "--loss-scale-min", "--loss-scale-hysteresis",
                                                "--loss-scale-fixed", "--find-overflow", "--no-fallback", NULL};
            die_unknown_option("train", a, known);
        } else if (!o.plan_dir) o.plan_dir = a;
        else die("train: one plan folder at a time (got %s and %s)", o.plan_dir, a);
    }
    if (!o.plan_dir) die("train: which plan? usage: mmc train PLAN_DIR --data FILE [--backend ref|cuda]");
    if (!o.data) die("train: --data FILE is needed (a token file; see README, \"Token files\")");
    /* an empty name would put the run's files in the current folder */
    if ((o.out && !o.out[0]) || (o.resume && !o.resume[0])) die("train: --out and --resume need a folder, not an empty name");
    if ((o.eval_interval || o.val_batches) && !o.val) die("train: --eval-interval and --val-batches need --val FILE");
    char *remade = NULL;
    if (n_settings || n_scaler) {
        Plan *pl = plan_load(o.plan_dir);
        if (n_scaler && !pl->g->train.loss_scaling)
            die("train: --loss-scale-* on %s, whose policy %s scales no loss (fp16 gradients need a scaler; fp32 and bf16 do "
                "not)", o.plan_dir, pl->g->policy.name);
        remade = plan_remake(pl, settings, n_settings, scaler, n_scaler, 0);
        StrBuf name = {0};
        sb_printf(&name, "%s made again with", o.plan_dir);
        for (int k = 0; k < n_settings; k++) sb_printf(&name, " %s=%s", settings[k].key, settings[k].value);
        for (int k = 0; k < n_scaler; k++) sb_printf(&name, " %s=%s", scaler[k].key, scaler[k].value);
        o.plan_name = name.s;
        o.plan_dir = remade;
    }
    int rc = train_run(&o);
    if (remade) plan_remove_temp(remade);
    for (int k = 0; k < n_settings; k++) free(settings[k].key), free(settings[k].value);
    for (int k = 0; k < n_scaler; k++) free(scaler[k].key), free(scaler[k].value);
    free(settings), free(scaler), free(remade), free((char *)o.plan_name);
    return rc;
}
