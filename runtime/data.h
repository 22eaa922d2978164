/* data: training batches from a token file. Row r holds tokens [r(T+1), (r+1)(T+1)): its
 * first T tokens are the inputs, its last T the targets. Rows come in file order, wrapping
 * at the end, or with a seed in a new deterministic permutation each epoch. The position
 * (rows consumed) is part of the resume state. */
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
} Batcher;

/* dies naming the file if its rows are not of seq + 1 tokens, or if no target of any row
 * counts (the loss would be a mean over nothing). ignore: the target id the graph's loss
 * leaves out (its cross_entropy's ignore), or BATCHER_PAD_ID for the file's pad id. Each
 * target that does not count becomes that id: padding in a file without a loss mask, what
 * the mask leaves out in a file with one. */
Batcher *batcher_open(const char *path, int64_t batch, int64_t seq, uint32_t model_vocab, uint64_t shuffle,
                      int64_t ignore);
/* fills ids and labels [batch, seq] and advances the position */
void batcher_next(Batcher *b, int32_t *ids, int32_t *labels);
void batcher_close(Batcher *b);

#endif
