/* data: see data.h. */
#include "data.h"

#include <stdlib.h>

#include "rng.h"
#include "util.h"

Batcher *batcher_open(const char *path, int64_t batch, int64_t seq, uint32_t model_vocab, uint64_t shuffle) {
    Batcher *b = xcalloc(1, sizeof *b);
    b->file = tokens_open(path, model_vocab);
    b->batch = batch, b->seq = seq, b->shuffle = shuffle;
    if (b->file->row_length && b->file->row_length != (uint32_t)(seq + 1))
        die("%s: rows of %u tokens (seq %u) but the plan was compiled for seq %lld: make the data with --seq %lld "
            "or compile with -D seq=%u",
            path, b->file->row_length, b->file->row_length - 1, (long long)seq, (long long)seq, b->file->row_length - 1);
    b->rows = (int64_t)(b->file->count / (uint64_t)(seq + 1));
    if (b->rows < 1) die("%s: %llu tokens make no row of %lld", path, (unsigned long long)b->file->count, (long long)(seq + 1));
    b->perm_epoch = -1;
    return b;
}

static int64_t row_at(Batcher *b, int64_t position) {
    int64_t epoch = position / b->rows, r = position % b->rows;
    if (!b->shuffle) return r;
    if (epoch != b->perm_epoch) { /* Fisher-Yates with a stream that depends on seed and epoch */
        if (!b->perm) b->perm = xmalloc((size_t)b->rows * sizeof *b->perm);
        for (int64_t i = 0; i < b->rows; i++) b->perm[i] = i;
        uint64_t s = b->shuffle * 0x9e3779b97f4a7c15ull + (uint64_t)epoch;
        for (int64_t i = b->rows - 1; i > 0; i--) {
            int64_t j = (int64_t)(rng_next(&s) % (uint64_t)(i + 1));
            int64_t t = b->perm[i];
            b->perm[i] = b->perm[j];
            b->perm[j] = t;
        }
        b->perm_epoch = epoch;
    }
    return b->perm[r];
}

void batcher_next(Batcher *b, int32_t *ids, int32_t *labels) {
    for (int64_t i = 0; i < b->batch; i++) {
        const uint16_t *row = b->file->ids + row_at(b, b->position++) * (b->seq + 1);
        for (int64_t t = 0; t < b->seq; t++) {
            ids[i * b->seq + t] = row[t];
            labels[i * b->seq + t] = row[t + 1];
        }
    }
}

void batcher_close(Batcher *b) {
    tokens_close(b->file);
    free(b->perm);
    free(b);
}
