/* eval_cli: `mmc eval RUN_DIR --data FILE`, or `mmc eval PLAN_DIR --init RUN_DIR|W.safetensors
 * --data FILE [--batches N]`: the mean loss and perplexity of given weights over a token
 * file's batches, in file order. A run folder's graph is compiled again forward-only, at the
 * run's batch and the data's seq; a plan given is best a forward-only one (`mmc compile
 * --forward`); a training plan gives the same losses, running its backward pass for nothing. The
 * mean weighs each batch by the targets it counts (pads left out), as one batch of them all
 * would. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "checkpoint.h"
#include "cli.h"
#include "data.h"
#include "init.h"
#include "plan_remake.h"
#include "tokens.h"
#include "train.h"
#include "util.h"

/* the count of targets the loss kernel leaves beside the loss (cross-entropy's part 2) */
static const Node *count_of_loss(const Plan *pl) {
    for (int i = 0; i < pl->g->n_nodes; i++) {
        const Node *n = pl->g->nodes[i];
        if (n->op == OP_PART && n->in[0] == pl->g->loss && n->a.index == 2 && n->materialized) return n;
    }
    die("eval: %s: the loss has no count of targets beside it (a cross-entropy loss has)", pl->path);
}

double eval_batches(Backend *b, Batcher *bt, int64_t max_batches, double *targets_out, int64_t *batches_out) {
    const Plan *pl = b->pl;
    const Node *ids_leaf = train_role(pl, ROLE_TOKENS), *labels_leaf = train_role(pl, ROLE_TARGETS), *count = count_of_loss(pl);
    int64_t n = bt->rows / bt->batch;
    if (max_batches > 0 && max_batches < n) n = max_batches;
    if (n < 1) die("eval: %s has %lld rows, fewer than one batch of %lld", bt->file->path, (long long)bt->rows, (long long)bt->batch);
    int64_t cells = bt->batch * bt->seq;
    int32_t *ids = xmalloc((size_t)cells * sizeof *ids), *labels = xmalloc((size_t)cells * sizeof *labels);
    double sum = 0, targets = 0;
    for (int64_t k = 0; k < n; k++) {
        batcher_next(bt, ids, labels);
        b->write(b, BUF_IO, ids_leaf->offset, ids, cells * (int64_t)sizeof *ids);
        b->write(b, BUF_IO, labels_leaf->offset, labels, cells * (int64_t)sizeof *labels);
        b->run_phase(b, PHASE_MICRO);
        unsigned char raw[8];
        b->read(b, count->buffer, count->offset, raw, (int64_t)dtype_size(count->dtype));
        double c = dtype_load(count->dtype, raw, 0), loss = read_loss(b);
        if (c > 0) sum += loss * c, targets += c;
    }
    free(ids), free(labels);
    if (targets <= 0) die("eval: %s: every target of the %lld batches is padding", bt->file->path, (long long)n);
    *targets_out = targets;
    *batches_out = n;
    return sum / targets;
}

int cmd_eval(int argc, char **argv) {
    const char *dir = NULL, *data = NULL, *init = NULL, *backend = "cuda";
    int64_t max_batches = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && i + 1 >= argc) die("eval: %s needs a value", a);
        if (!strcmp(a, "--data")) data = argv[++i];
        else if (!strcmp(a, "--init")) init = argv[++i];
        else if (!strcmp(a, "--backend")) backend = argv[++i];
        else if (!strcmp(a, "--batches")) max_batches = option_int("eval", a, argv[++i], 1);
        else if (a[0] == '-') {
            static const char *const known[] = {"--data", "--init", "--backend", "--batches", NULL};
            die_unknown_option("eval", a, known);
        } else dir = a;
    }
    if (!dir || !data)
        die("eval: usage: mmc eval RUN_DIR --data FILE, or mmc eval PLAN_DIR --init RUN_DIR|W.safetensors --data FILE "
            "[--backend ref|cuda] [--batches N]");
    /* a run folder: its graph compiled forward-only at its batch and the data's seq */
    char *plan_file = path_join(dir, "plan"), *cfg = path_join(dir, "config.json"), *tmp_plan = NULL;
    if (access(plan_file, R_OK) != 0 && access(cfg, R_OK) == 0) {
        TokenFile *f = tokens_open(data, 0);
        char seq[32]; /* a file of rows says its seq; a stream of tokens takes the run's */
        char *trained = f->row_length ? NULL : run_setting(dir, "seq");
        snprintf(seq, sizeof seq, "%s", trained ? trained : "");
        if (f->row_length) snprintf(seq, sizeof seq, "%u", f->row_length - 1);
        free(trained);
        tokens_close(f);
        if (!seq[0]) die("eval: %s names no seq and %s has no rows: give a plan and --init", dir, data);
        const Define settings[] = {{"seq", seq}, {"accumulation", "1"}};
        tmp_plan = plan_from_run("eval", dir, NULL, NULL, settings, 2, 1);
        if (!init) init = dir;
        dir = tmp_plan;
    }
    free(plan_file), free(cfg);
    if (!init) die("eval: %s is a plan: give the weights with --init RUN_DIR|W.safetensors", dir);
    Plan *pl = plan_load(dir);
    Backend *b = backend_open(pl, backend, "eval");
    init_consts(b);
    struct stat st;
    char *weights = stat(init, &st) == 0 && S_ISDIR(st.st_mode) ? path_join(init, "model.safetensors") : xstrdup(init);
    checkpoint_load_weights(b, weights);
    MmcStepState state = init_state(pl, 1);
    b->write(b, BUF_STATE, 0, &state, sizeof state);
    Batcher *batches = train_batches(pl, data, 0);
    double targets;
    int64_t n;
    double mean = eval_batches(b, batches, max_batches, &targets, &n);
    printf("eval: %s, %lld batches of %lld rows, %.0f targets: loss %.9g, perplexity %.6g\n", data, (long long)n,
           (long long)batches->batch, targets, mean, exp(mean));
    free(weights);
    batcher_close(batches);
    b->destroy(b);
    if (tmp_plan) plan_remove_temp(tmp_plan);
    free(tmp_plan);
    return 0;
}
