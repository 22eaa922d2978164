/* train_dist: mmc train as one process of a data-parallel job (one process per GPU, started
 * by torchrun, mpirun or by hand: dist_env.h). Rank 0 makes NCCL's unique id and hands it
 * over the TCP rendezvous (dist_bootstrap.h); every rank then joins one communicator on the
 * GPU of its local rank. At the start of each update phase, inside its captured graph, the
 * f32 gradients are averaged over the ranks (ncclAvg), so grad_norm, the inf check, the
 * clip, the scaler and AdamW see the same gradients on every rank and make the same
 * decisions; each rank's loss is the mean over its own slice of the global batch (DDP's
 * semantics). Rank 0 alone writes the run folder and the log.
 *
 * MMC_NCCL_WORLD1=1 runs a world of one through the same path (a communicator of one rank),
 * so a single GPU tests the all-reduce inside the captured step. */
#ifndef MMC_TRAIN_DIST_H
#define MMC_TRAIN_DIST_H

#include <signal.h>

#include "backend.h"
#include "dist_env.h"

typedef struct TrainDist TrainDist;

/* NULL for a world of one (the ordinary run); else the communicator, joined, and the ranks
 * watched (dist_watch.h: a rank that dies stops the job; `stopping` is this rank's flag of
 * a stop on a signal). Dies with the reason where the job cannot start: another backend
 * than cuda, no NCCL, the rendezvous. */
TrainDist *train_dist_start(const char *backend, const volatile sig_atomic_t *stopping);
const DistEnv *train_dist_env(const TrainDist *d);
/* the gradients of b's update phase averaged over the ranks from now on */
void train_dist_attach(TrainDist *d, Backend *b);
/* completed: this rank ran to where every rank stops (the run's end, --stop-after) and says
 * bye to the others; else it stops on its own, and the others stop when it is gone */
void train_dist_end(TrainDist *d, int completed);

#endif
