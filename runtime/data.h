/* data: training batches from a token file. Row r holds tokens [r(T+1), (r+1)(T+1)): its
 * first T tokens are the inputs, its last T the targets. Rows come in file order, wrapping
 * at the end, or with a seed in a new deterministic permutation each epoch. The position
 * (rows consumed) is part of the resume state.
 *
 * Data parallel: in a world of W ranks (batcher_set_rank), `batch` is the per-rank batch B
 * and each update reads a global batch of B*W rows, the rows a world of 1 at batch B*W reads
 * at that position; rank r takes its rows [r*B, (r+1)*B), in the order the file (or the
 * shuffle) gives them. So the union of the ranks' batches of an update is the world-of-1
 * batch, and the position advances by the global batch B*W on every rank: it counts rows
 * consumed by the whole job, the same on every rank and for any W, so a run resumed on
 * another number of GPUs (keeping B*W) goes on from the same row. A world of 1 (the
 * default) is the batcher as it always was. */
#ifndef MMC_DATA_H
#define MMC_DATA_H

#include <stdint.h>

#include "tokens.h"

#define BATCHER_PAD_ID INT64_MIN

typedef struct Batcher {
    TokenFile *file;
    int64_t batch, seq, rows;
    int64_t position;    /* rows consumed so far, over all epochs */
    uint64_t shuffle;    /* 0: file order; else the seed of the per-epoch permutation */
    int64_t *perm;       /* permutation of the current epoch, when shuffling */
    int64_t perm_epoch;
    int64_t ignore;      /* the target id the loss leaves out: what a masked target becomes */
    int rank, world;     /* this process's slice of each global batch of batch * world rows (0 and 1 alone) */
} Batcher;

/* dies naming the file if its rows are not of seq + 1 tokens, or if no target of any row
 * counts (the loss would be a mean over nothing). ignore: the target id the graph's loss
 * leaves out (its cross_entropy's ignore), or BATCHER_PAD_ID for the file's pad id. Each
 * target that does not count becomes that id: padding in a file without a loss mask, what
 * the mask leaves out in a file with one. */
Batcher *batcher_open(const char *path, int64_t batch, int64_t seq, uint32_t model_vocab, uint64_t shuffle,
                      int64_t ignore);
/* Makes b the batcher of rank `rank` in a world of `world` (1 to DIST_MAX_WORLD, 4096): see
 * above. The position stays the job's, so it may be called at any update boundary, before a
 * resume's position is set or after. Dies naming the values if rank is not below world. */
void batcher_set_rank(Batcher *b, int rank, int world);
/* fills ids and labels [batch, seq] with this rank's rows of the global batch at the
 * position, and advances the position by the global batch (batch * world rows) */
void batcher_next(Batcher *b, int32_t *ids, int32_t *labels);
void batcher_close(Batcher *b);

#endif
