/* train: the training loop, the same for both backends. Each optimizer update runs the
 * plan's micro phase once per accumulation step (a batch written to the io buffer first),
 * then the update phase; every scalar of the step lives in the step state on the backend,
 * and the host reads it only to log. */
#ifndef MMC_TRAIN_H
#define MMC_TRAIN_H

#include <stdint.h>

#include "model.h"

/* what a finished run measured, for `mmc compare` */
typedef struct TrainResult {
    int64_t updates;      /* run in this call */
    double seconds;       /* of training, evaluations left out */
    double tokens;        /* tokens trained on in this call */
    int64_t device_bytes; /* device memory the backend took; -1 where it has no device (ref) */
} TrainResult;

typedef struct TrainOptions {
    const char *plan_dir;
    const char *plan_name; /* what the log calls the plan (plan_dir unless it was made again), or NULL */
    const char *data;
    const char *backend;  /* "ref" or "cuda" */
    const char *out;      /* folder for metrics.jsonl and checkpoints, or NULL */
    const char *resume;   /* a run folder to continue from, or NULL */
    const char *init;     /* safetensors with MiniMind's names to start from, or NULL */
    int64_t steps;        /* optimizer updates in the whole run */
    int64_t batch;        /* must match the plan's batch when given */
    uint64_t seed;        /* initial weights */
    uint64_t shuffle;     /* 0: file order */
    int log_interval;
    int save_interval;    /* updates between checkpoints (with --out; 1000 unless told); 0: only at the end */
    int64_t inject_inf;   /* >0: an inf in the gradients of this update (tests the scaler) */
    int find_overflow;    /* at the first update that overflows, name the op (find_overflow.h) */
    int no_fallback;      /* the plan's fallback (plan_set.h) never fires */
    int64_t stop_after;   /* >0: stop (with a checkpoint) after this update, as if interrupted */
    int quiet;
    int force;            /* --out may replace a run already there */
    const char *tokenizer; /* the tokenizer.json the data was made with, to keep in the run folder */
    const char *val;       /* a token file to evaluate on, forward only, or NULL */
    int64_t eval_interval; /* updates between evaluations on val (200 unless told); the last one always */
    int64_t val_batches;   /* batches of val an evaluation takes: 0, all */
    TrainResult *result;   /* filled at the end when given */
} TrainOptions;

int train_run(const TrainOptions *o);
/* One writer per run folder: DIR (made if need be) locked by DIR/.lock, which holds the pid
 * of the holder; the kernel releases the lock however the process ends. Dies naming the pid
 * of the process that holds it. Returns the descriptor that keeps it. */
int run_folder_lock(const char *dir, const char *cmd);

struct Backend;
struct Plan;
double read_loss(struct Backend *b); /* the loss of the last micro-step, from where the plan stores it */
/* the plan's input of the role (model.h); dies naming the plan and the role if none has it */
const struct Node *train_role(const struct Plan *pl, Role r);
/* the backend a command's --backend names (ref, cuda, or auto: cuda where a GPU can be used, else ref);
 * dies with the reason cuda cannot start */
struct Backend *backend_open(struct Plan *pl, const char *name, const char *cmd);
/* the vocabulary the plan declares (the graph file's model{}); dies naming the plan if none */
uint32_t train_vocab(const struct Plan *pl);
/* the token file's batches for the plan's tokens input; dies if the file does not fit the
 * model (its vocabulary, its seq, its pad id) */
struct Batcher *train_batches(const struct Plan *pl, const char *path, uint64_t shuffle);
struct Batcher;
/* The mean loss, each batch weighed by the targets it counts, over the batches of `bt` from
 * its position: all of the file's, or the first max_batches (> 0). The plan is best a
 * forward-only one; its state must be initialized. (runtime/eval_cli.c) */
double eval_batches(struct Backend *b, struct Batcher *bt, int64_t max_batches, double *targets, int64_t *batches);
/* writes the first batch of a token file to the io buffer */
void train_load_batch(struct Backend *b, const char *data);

#endif
