/* bpe: the merge loop of one pre-token, done the way Hugging Face's Word::merge_all does it
 * so that even odd tokenizer.json files give the same ids: a min-heap of candidate merges
 * ordered by (rank, position); an entry whose pair has changed since it was pushed is
 * skipped unless the pair now there makes the same new token. Words up to 256 bytes are
 * remembered per thread, since text repeats its words. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

enum { CACHE_WORD_MAX = 256, CACHE_IDS_MAX = 1 << 20, SCRATCH_KEEP = 1 << 16 };

/* ---- merge table */

static size_t slot_of(const MergeTable *t, uint64_t key) {
    size_t i = merge_home(key, t->cap);
    while (t->slots[i].key != key && t->slots[i].key != UINT64_MAX) i = (i + 1) & (t->cap - 1);
    return i;
}

void merges_put(MergeTable *t, uint32_t left, uint32_t right, Merge m) {
    if (2 * (t->count + 1) > t->cap) {
        MergeTable bigger = {xmalloc((t->cap ? 2 * t->cap : 1024) * sizeof *t->slots), t->cap ? 2 * t->cap : 1024, 0};
        memset(bigger.slots, 0xFF, bigger.cap * sizeof *bigger.slots);
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].key != UINT64_MAX) bigger.slots[slot_of(&bigger, t->slots[i].key)] = t->slots[i];
        bigger.count = t->count;
        free(t->slots);
        *t = bigger;
    }
    uint64_t key = (uint64_t)left << 32 | right;
    size_t i = slot_of(t, key);
    if (t->slots[i].key == UINT64_MAX) t->count++; /* a repeated pair keeps its last rank */
    t->slots[i].key = key;
    t->slots[i].m = m;
}

void merges_free(MergeTable *t) {
    free(t->slots);
    *t = (MergeTable){0};
}

/* ---- the heap of candidate merges */

static void heap_push(EncodeState *s, size_t *n, uint64_t key, uint32_t new_id) {
    if (*n == s->heap_cap) {
        s->heap_cap = s->heap_cap ? 2 * s->heap_cap : 64;
        s->heap = xrealloc(s->heap, s->heap_cap * sizeof *s->heap);
    }
    HeapEntry *h = s->heap;
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2].key > key) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = (HeapEntry){key, new_id};
}

static HeapEntry heap_pop(HeapEntry *h, size_t *n) {
    HeapEntry top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].key < h[c].key) c++;
        if (h[c].key >= last.key) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void push_pair(EncodeState *s, size_t *n, int32_t left) {
    const Symbol *sym = s->symbols;
    const Merge *m = merges_get(&s->t->merges, sym[left].id, sym[sym[left].next].id);
    if (m) heap_push(s, n, (uint64_t)m->rank << 32 | (uint32_t)left, m->new_id);
}

/* ---- one word */

static void add_symbol(Symbol *sym, int32_t *n, uint32_t id, uint32_t len) {
    sym[*n] = (Symbol){id, *n - 1, -1, len};
    if (*n > 0) sym[*n - 1].next = *n;
    (*n)++;
}

static void merge_word(EncodeState *s, const uint8_t *w, size_t n, IdVec *out) {
    const Tokenizer *t = s->t;
    size_t most = 2 * n + 1; /* byte_fallback may make two symbols of a byte */
    if (most > s->symbols_cap) {
        s->symbols_cap = most;
        s->symbols = xrealloc(s->symbols, s->symbols_cap * sizeof *s->symbols);
    }
    Symbol *sym = s->symbols;
    int32_t count = 0;
    uint32_t unk_len = 0; /* pending run of unknown bytes */
    for (size_t i = 0; i < n; i++) {
        uint8_t b = w[i];
        if (t->byte_id[b] >= 0) {
            if (unk_len) add_symbol(sym, &count, (uint32_t)t->unk_id, unk_len), unk_len = 0;
            add_symbol(sym, &count, (uint32_t)t->byte_id[b], 1);
        } else if (t->n_fallback[b]) { /* like Hugging Face, before any pending unknown */
            for (int k = 0; k < t->n_fallback[b]; k++) add_symbol(sym, &count, t->fallback_ids[b][k], 1);
        } else if (t->unk_id >= 0) {
            if (unk_len && !t->fuse_unk) add_symbol(sym, &count, (uint32_t)t->unk_id, unk_len), unk_len = 0;
            unk_len++;
        }
    }
    if (unk_len) add_symbol(sym, &count, (uint32_t)t->unk_id, unk_len);

    size_t queued = 0;
    for (int32_t i = 0; i + 1 < count; i++) push_pair(s, &queued, i);
    while (queued) {
        HeapEntry top = heap_pop(s->heap, &queued);
        int32_t pos = (int32_t)(uint32_t)top.key;
        if (sym[pos].len == 0 || sym[pos].next == -1) continue;
        int32_t right = sym[pos].next;
        const Merge *m = merges_get(&t->merges, sym[pos].id, sym[right].id);
        if (!m || m->new_id != top.new_id) continue; /* stale: the pair changed */
        sym[pos].id = top.new_id;
        sym[pos].len += sym[right].len;
        sym[pos].next = sym[right].next;
        sym[right].len = 0;
        if (sym[pos].next >= 0) sym[sym[pos].next].prev = pos;
        if (sym[pos].prev >= 0) push_pair(s, &queued, sym[pos].prev);
        if (sym[pos].next >= 0) push_pair(s, &queued, pos);
    }
    for (int32_t i = 0; i < count; i++)
        if (sym[i].len) idvec_push(out, sym[i].id);
    if (s->symbols_cap > SCRATCH_KEEP) { /* one huge word should not hold memory for the rest of the run */
        free(s->symbols), free(s->heap);
        s->symbols = NULL, s->heap = NULL, s->symbols_cap = s->heap_cap = 0;
    }
}

void bpe_encode_word(EncodeState *s, const uint8_t *w, size_t n, IdVec *out) {
    const Tokenizer *t = s->t;
    if (t->ignore_merges) {
        uint32_t *id = bytemap_get(&t->vocab_bytes, w, n, bytes_hash(w, n));
        if (id) {
            idvec_push(out, *id);
            return;
        }
    }
    if (n == 1 && t->byte_id[w[0]] >= 0) {
        idvec_push(out, (uint32_t)t->byte_id[w[0]]);
        return;
    }
    if (n > CACHE_WORD_MAX) {
        merge_word(s, w, n, out);
        return;
    }
    uint64_t h = bytes_hash(w, n);
    uint32_t *at = bytemap_get(&s->cache, w, n, h);
    if (at) {
        const uint32_t *cached = s->cache_ids.ids + *at;
        for (uint32_t i = 1; i <= cached[0]; i++) idvec_push(out, cached[i]);
        return;
    }
    size_t first = out->n;
    merge_word(s, w, n, out);
    if (s->cache_ids.n > CACHE_IDS_MAX) { /* forget everything rather than track ages */
        bytemap_clear(&s->cache);
        s->cache_ids.n = 0;
    }
    *bytemap_put(&s->cache, w, n, h, NULL) = (uint32_t)s->cache_ids.n;
    idvec_push(&s->cache_ids, (uint32_t)(out->n - first));
    for (size_t i = first; i < out->n; i++) idvec_push(&s->cache_ids, out->ids[i]);
}
