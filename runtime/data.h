/* data: training batches from a token file. Row r holds tokens [r(T+1), (r+1)(T+1)): its
 * first T tokens are the inputs, its last T the targets. Rows come in file order, wrapping
 * at the end, or with a seed in a new deterministic permutation each epoch. The position
 * (rows consumed) is part of the resume state. */
#ifndef MMC_DATA_H
#define MMC_DATA_H

#include <stdint.h>

#include "tokens.h"

typedef struct Batcher {
    TokenFile *file;
    int64_t batch, seq, rows;
    int64_t position;    /* rows consumed so far, over all epochs */
    uint64_t shuffle;    /* 0: file order; else the seed of the per-epoch permutation */
    int64_t *perm;       /* permutation of the current epoch, when shuffling */
    int64_t perm_epoch;
} Batcher;

/* dies naming the file if its rows are not of seq + 1 tokens, or if no target of any row is
 * other than the pad id (the loss would be a mean over nothing) */
Batcher *batcher_open(const char *path, int64_t batch, int64_t seq, uint32_t model_vocab, uint64_t shuffle);
/* fills ids and labels [batch, seq] and advances the position */
void batcher_next(Batcher *b, int32_t *ids, int32_t *labels);
void batcher_close(Batcher *b);

#endif
