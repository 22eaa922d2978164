/* train_dist: see train_dist.h. */
#include "train_dist.h"

#include <stdlib.h>
#include <string.h>

#include "dist_bootstrap.h"
#include "dist_watch.h"
#include "nccl_loader.h"
#include "util.h"

/* how long the ranks wait for each other at the start: torchrun's default rendezvous timeout
 * is 900 s; a job on one host is up in seconds, so a minute says soon what is missing */
#define DIST_BOOTSTRAP_SECONDS 60.0

struct TrainDist {
    DistEnv env;
    const NcclApi *nccl;
    NcclComm comm;
};

static void nccl_check(const TrainDist *d, NcclResult r, const char *what) {
    if (r != NCCL_RESULT_SUCCESS)
        die("train: rank %d of %d: NCCL %s: %s", d->env.rank, d->env.world, what, d->nccl->GetErrorString(r));
}

TrainDist *train_dist_start(const char *backend, const volatile sig_atomic_t *stopping) {
    DistEnv env = dist_env_read();
    if (env.error[0]) die("train: %s", env.error);
    const char *force = getenv("MMC_NCCL_WORLD1");
    if (env.world == 1 && !(force && *force && strcmp(force, "0"))) return NULL;
    if (strcmp(backend, "cuda"))
        die("train: rank %d of %d (from %s): several processes train on GPUs, with --backend cuda", env.rank, env.world,
            dist_source_name(env.source));
    char *why = NULL;
    const NcclApi *nccl = nccl_load(&why);
    if (!nccl)
        die("train: rank %d of %d: data parallelism needs NCCL, which cannot be loaded here: %s", env.rank, env.world, why);
    TrainDist *d = xcalloc(1, sizeof *d);
    d->env = env;
    d->nccl = nccl;
    cuda_select_device(env.local_rank);
    NcclUniqueId id;
    memset(&id, 0, sizeof id);
    if (env.rank == 0) nccl_check(d, nccl->GetUniqueId(&id), "unique id");
    DistLinks links;
    if (dist_bootstrap_links(&env, &id, sizeof id, DIST_BOOTSTRAP_SECONDS, &links, &why) != 0) die("train: %s", why);
    dist_watch_start(&links, stopping); /* from here a rank that dies stops the job */
    nccl_check(d, nccl->CommInitRank(&d->comm, env.world, id, env.rank), "communicator");
    return d;
}

const DistEnv *train_dist_env(const TrainDist *d) { return &d->env; }

/* the update phase's first step, on its stream: the f32 gradients averaged in place */
static void average_gradients(void *ctx, void *stream, void *grads, int64_t bytes) {
    TrainDist *d = ctx;
    nccl_check(d, d->nccl->AllReduce(grads, grads, (size_t)bytes / sizeof(float), NCCL_DT_FLOAT32, NCCL_OP_AVG, d->comm, stream),
               "all-reduce of the gradients");
}

void train_dist_attach(TrainDist *d, Backend *b) {
    if (b->pl->g->policy.master != DT_F32)
        die("train: %s keeps %s master weights; data parallelism averages f32 gradients", b->pl->path,
            dtype_name(b->pl->g->policy.master));
    b->before_update = average_gradients;
    b->before_update_ctx = d;
}

void train_dist_end(TrainDist *d, int completed) {
    if (!d) return;
    if (completed) { /* every rank ran every update: the links may close */
        dist_watch_end();
        d->nccl->CommDestroy(d->comm);
    } else {
        d->nccl->CommAbort(d->comm); /* the others may be inside a collective this rank will not join */
    }
    free(d);
}
