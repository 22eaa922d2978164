/* data: see data.h. */
#include "data.h"

#include <stdio.h>
#include <stdlib.h>

#include "dist_env.h"
#include "rng.h"
#include "util.h"

/* Whether token i of the file, as a target, counts in the loss: a file with a loss-mask plane
 * says so token by token (MiniMind's SFT mask); a file without one counts every target that
 * is not padding (MiniMind's pretraining mask). */
static bool target_counts(const TokenFile *f, uint64_t i) {
    return f->mask ? tokens_counts(f, i) : f->ids[i] != f->pad_id;
}

/* the index of the first row with a target that counts, or -1: a file without one has
 * nothing to learn from, and its loss, a mean over no targets, would be nan */
static int64_t first_target(const Batcher *b) {
    for (int64_t r = 0; r < b->rows; r++) {
        const uint64_t row = (uint64_t)(r * (b->seq + 1));
        for (int64_t t = 1; t <= b->seq; t++)
            if (target_counts(b->file, row + (uint64_t)t)) return r;
    }
    return -1;
}

/* Targets the mask counts but the loss would leave out anyway, being the ignored id: the
 * loss sees a masked target as that id, so it cannot tell the two apart. */
static uint64_t counted_ignored(const Batcher *b) {
    uint64_t n = 0;
    if (!b->file->mask) return 0;
    for (int64_t r = 0; r < b->rows; r++)
        for (int64_t t = 1; t <= b->seq; t++) {
            uint64_t i = (uint64_t)(r * (b->seq + 1) + t);
            n += tokens_counts(b->file, i) && (int64_t)b->file->ids[i] == b->ignore;
        }
    return n;
}

Batcher *batcher_open(const char *path, int64_t batch, int64_t seq, uint32_t model_vocab, uint64_t shuffle,
                      int64_t ignore) {
    Batcher *b = xcalloc(1, sizeof *b);
    b->file = tokens_open(path, model_vocab);
    b->batch = batch, b->seq = seq, b->shuffle = shuffle;
    b->ignore = ignore == BATCHER_PAD_ID ? b->file->pad_id : ignore;
    const TokenFile *f = b->file;
    char msg[1024] = "";
    b->rows = (int64_t)(f->count / (uint64_t)(seq + 1));
    if (f->row_length && f->row_length != (uint32_t)(seq + 1))
        snprintf(msg, sizeof msg,
                 "%s: rows of %u tokens (seq %u) but the plan was compiled for seq %lld: make the data with --seq %lld "
                 "or compile with -D seq=%u",
                 path, f->row_length, f->row_length - 1, (long long)seq, (long long)seq, f->row_length - 1);
    else if (b->rows < 1)
        snprintf(msg, sizeof msg, "%s: %llu tokens make no row of %lld", path, (unsigned long long)f->count,
                 (long long)(seq + 1));
    else if (first_target(b) < 0 && f->mask)
        snprintf(msg, sizeof msg, "%s: its loss mask leaves out every target of its %lld rows: there is nothing to learn from",
                 path, (long long)b->rows);
    else if (first_target(b) < 0)
        snprintf(msg, sizeof msg,
                 "%s: every target of its %lld rows is the pad id %u, which the loss leaves out: there is nothing to "
                 "learn from",
                 path, (long long)b->rows, f->pad_id);
    if (msg[0]) {
        batcher_close(b);
        die("%s", msg);
    }
    uint64_t lost = counted_ignored(b);
    if (lost)
        fprintf(stderr,
                "mmc: warning: %s: %llu targets its mask counts are the id %lld, which the loss ignores: they are left "
                "out\n",
                path, (unsigned long long)lost, (long long)b->ignore);
    b->perm_epoch = -1;
    b->rank = 0, b->world = 1;
    return b;
}

void batcher_set_rank(Batcher *b, int rank, int world) {
    if (world < 1 || world > DIST_MAX_WORLD || rank < 0 || rank >= world)
        die("%s: rank %d of a world of %d: the world is from 1 to %d ranks and the rank from 0 to world - 1",
            b->file->path, rank, world, DIST_MAX_WORLD);
    b->rank = rank, b->world = world;
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
    /* this rank's rows of the global batch that starts at the position */
    const int64_t first_row = b->position + (int64_t)b->rank * b->batch;
    for (int64_t i = 0; i < b->batch; i++) {
        const uint16_t *row = b->file->ids + row_at(b, first_row + i) * (b->seq + 1);
        const uint64_t first = (uint64_t)(row - b->file->ids);
        for (int64_t t = 0; t < b->seq; t++) {
            ids[i * b->seq + t] = row[t];
            /* a target that does not count becomes the id the loss ignores */
            labels[i * b->seq + t] = target_counts(b->file, first + (uint64_t)t + 1) ? row[t + 1] : (int32_t)b->ignore;
        }
    }
    b->position += b->batch * b->world; /* the whole job's rows, the same on every rank */
}

void batcher_close(Batcher *b) {
    tokens_close(b->file);
    free(b->perm);
    free(b);
}
