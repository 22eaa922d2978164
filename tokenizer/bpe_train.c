/* bpe_train: see bpe_train.h. The merge loop follows Hugging Face's BpeTrainer::do_train step for
 * step, lazy heap included: an entry carries the words where its pair was last seen to
 * grow; a popped entry whose count is stale is pushed back with the current count; the
 * merged pair's own count is left as it was (so a leftover entry for it may merge it again
 * later in the words it lists, adding the same merge twice, and Hugging Face then keeps
 * the later rank). Reproducing that is what makes the two vocabularies identical. */
#include "bpe_train.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "byte_level.h"
#include "pretokenize.h"
#include "util.h"

/* ---- word counts */

static void word_counts_add(WordCounts *wc, const void *w, size_t n, uint64_t count) {
    bool added;
    uint32_t *at = bytemap_put(&wc->index, w, n, bytes_hash(w, n), &added);
    if (added) {
        if (wc->n == UINT32_MAX) die("train: more than 4 billion distinct words");
        if (wc->n == wc->cap) {
            wc->cap = wc->cap ? 2 * wc->cap : 1024;
            wc->counts = xrealloc(wc->counts, wc->cap * sizeof *wc->counts);
        }
        *at = (uint32_t)wc->n;
        wc->counts[wc->n++] = 0;
    }
    wc->counts[*at] += count;
}

void word_counts_add_text(WordCounts *wc, const char *text, size_t len) {
    const uint8_t *u = (const uint8_t *)text;
    for (size_t i = 0; i < len;) {
        size_t end = pretoken_end(u, len, i);
        word_counts_add(wc, u + i, end - i, 1);
        i = end;
    }
}

void word_counts_merge(WordCounts *into, const WordCounts *from) {
    for (size_t i = 0; i < from->index.cap; i++) {
        const ByteMapSlot *s = &from->index.slots[i];
        if (s->hash) word_counts_add(into, bytemap_key(&from->index, s), s->len, from->counts[s->value]);
    }
}

void word_counts_free(WordCounts *wc) {
    bytemap_free(&wc->index);
    free(wc->counts);
    *wc = (WordCounts){0};
}

/* ---- pair -> value maps */

typedef struct PairMap {
    struct PairSlot {
        uint64_t pair; /* left << 32 | right; UINT64_MAX: empty */
        int64_t value;
    } *slots;
    size_t cap, n;
} PairMap;

static int64_t *pair_value(PairMap *m, uint64_t pair) { /* inserted as 0 if absent */
    if (2 * (m->n + 1) > m->cap) {
        PairMap big = {xmalloc((m->cap ? 2 * m->cap : 4096) * sizeof *m->slots), m->cap ? 2 * m->cap : 4096, m->n};
        memset(big.slots, 0xFF, big.cap * sizeof *big.slots);
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].pair != UINT64_MAX) {
                size_t j = (size_t)(m->slots[i].pair * 0x9E3779B97F4A7C15ULL >> 20) & (big.cap - 1);
                while (big.slots[j].pair != UINT64_MAX) j = (j + 1) & (big.cap - 1);
                big.slots[j] = m->slots[i];
            }
        free(m->slots);
        *m = big;
    }
    size_t j = (size_t)(pair * 0x9E3779B97F4A7C15ULL >> 20) & (m->cap - 1);
    while (m->slots[j].pair != pair && m->slots[j].pair != UINT64_MAX) j = (j + 1) & (m->cap - 1);
    if (m->slots[j].pair == UINT64_MAX) {
        m->slots[j] = (struct PairSlot){pair, 0};
        m->n++;
    }
    return &m->slots[j].value;
}

static void pair_map_clear(PairMap *m) {
    if (m->cap) memset(m->slots, 0xFF, m->cap * sizeof *m->slots);
    m->n = 0;
}

/* ---- where pairs grew: pair -> the words, in increasing order */

typedef struct WordList {
    uint32_t *words;
    uint32_t n, cap;
} WordList;

typedef struct Where {
    PairMap index; /* pair -> position in pairs/lists */
    uint64_t *pairs;
    WordList *lists;
    size_t n, cap;
} Where;

static void where_add(Where *w, uint64_t pair, uint32_t word) {
    int64_t *at = pair_value(&w->index, pair);
    if (*at == 0) { /* stored as position + 1 */
        if (w->n == w->cap) {
            w->cap = w->cap ? 2 * w->cap : 1024;
            w->pairs = xrealloc(w->pairs, w->cap * sizeof *w->pairs);
            w->lists = xrealloc(w->lists, w->cap * sizeof *w->lists);
        }
        w->pairs[w->n] = pair;
        w->lists[w->n] = (WordList){0};
        *at = (int64_t)++w->n;
    }
    WordList *l = &w->lists[*at - 1];
    if (l->n && l->words[l->n - 1] == word) return;
    vec_push(l->words, l->n, l->cap, word);
}

/* ---- the heap: the largest count first, then the smallest pair */

typedef struct Entry {
    uint64_t count, pair, seq; /* seq: push order, a fixed order for equal entries */
    WordList pos;
} Entry;

typedef struct Heap {
    Entry *e;
    size_t n, cap;
    uint64_t pushes;
} Heap;

static bool above(const Entry *a, const Entry *b) {
    if (a->count != b->count) return a->count > b->count;
    if (a->pair != b->pair) return a->pair < b->pair;
    return a->seq < b->seq;
}

static void heap_push(Heap *h, Entry e) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->e = xrealloc(h->e, h->cap * sizeof *h->e);
    }
    e.seq = h->pushes++;
    size_t i = h->n++;
    while (i > 0 && above(&e, &h->e[(i - 1) / 2])) {
        h->e[i] = h->e[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->e[i] = e;
}

static Entry heap_pop(Heap *h) {
    Entry top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && above(&h->e[c + 1], &h->e[c])) c++;
        if (!above(&h->e[c], &last)) break;
        h->e[i] = h->e[c];
        i = c;
    }
    h->e[i] = last;
    return top;
}

/* ---- the trainer */

typedef struct Vocab {
    ByteMap ids;   /* spelling -> id */
    char **text;   /* id -> spelling */
    uint32_t *len;
    size_t n, cap;
} Vocab;

static uint32_t vocab_add(Vocab *v, const char *s, size_t n) {
    bool added;
    uint32_t *id = bytemap_put(&v->ids, s, n, bytes_hash(s, n), &added);
    if (!added) return *id;
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        v->text = xrealloc(v->text, v->cap * sizeof *v->text);
        v->len = xrealloc(v->len, v->cap * sizeof *v->len);
    }
    v->text[v->n] = xstrndup(s, n);
    v->len[v->n] = (uint32_t)n;
    return *id = (uint32_t)v->n++;
}

typedef struct Words {
    uint32_t *sym;    /* all words' symbols, back to back */
    size_t *start;    /* (n) */
    uint32_t *len;    /* (n) current symbol count, shrinking as merges apply */
    uint64_t *count;  /* (n) */
    size_t n;
} Words;

typedef struct Changes {
    PairMap *counts;
    Where *grew;
} Changes;

static void change(Changes *c, uint32_t left, uint32_t right, int delta, uint64_t count, uint32_t word) {
    uint64_t pair = (uint64_t)left << 32 | right;
    *pair_value(c->counts, pair) += delta * (int64_t)count;
    if (delta > 0) where_add(c->grew, pair, word);
}

/* Hugging Face's Word::merge: left to right, the pair's occurrences that do not overlap. */
static void merge_word(Words *w, uint32_t word, uint32_t a, uint32_t b, uint32_t merged, Changes *c) {
    uint32_t *s = w->sym + w->start[word], n = w->len[word], out = 0;
    uint64_t count = w->count[word];
    for (uint32_t i = 0; i < n;) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            if (out > 0) {
                change(c, s[out - 1], a, -1, count, word);
                change(c, s[out - 1], merged, +1, count, word);
            }
            if (i + 2 < n) {
                change(c, b, s[i + 2], -1, count, word);
                change(c, merged, s[i + 2], +1, count, word);
            }
            s[out++] = merged;
            i += 2;
        } else s[out++] = s[i++];
    }
    w->len[word] = out;
}

static int by_code_point(const void *x, const void *y) {
    uint32_t a = byte_level_char(*(const uint8_t *)x), b = byte_level_char(*(const uint8_t *)y);
    return (a > b) - (a < b);
}

static char *tokenizer_json(const Vocab *v, const uint64_t *merges, size_t n_merges, const BpeTrainOptions *opt,
                            uint32_t *written);

/* Words in byte order, so training never depends on which thread counted what. */
static const ByteMap *sort_map;
static int by_bytes(const void *x, const void *y) {
    const ByteMapSlot *a = *(const ByteMapSlot *const *)x, *b = *(const ByteMapSlot *const *)y;
    int c = memcmp(bytemap_key(sort_map, a), bytemap_key(sort_map, b), a->len < b->len ? a->len : b->len);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

BpeTrainResult bpe_train(const WordCounts *wc, const BpeTrainOptions *opt) {
    Vocab v = {0};
    for (int i = 0; i < opt->n_special; i++) vocab_add(&v, opt->special[i], strlen(opt->special[i]));
    uint8_t bytes[256];
    for (int b = 0; b < 256; b++) bytes[b] = (uint8_t)b;
    qsort(bytes, 256, 1, by_code_point);
    uint32_t byte_sym[256];
    for (int i = 0; i < 256; i++) {
        StrBuf s = {0};
        byte_level_spell(&s, &bytes[i], 1);
        byte_sym[bytes[i]] = vocab_add(&v, s.s, s.len);
        sb_free(&s);
    }

    Words w = {0};
    w.n = wc->n;
    w.sym = xmalloc((wc->index.keys_len + 1) * sizeof *w.sym);
    w.start = xcalloc(w.n + 1, sizeof *w.start);
    w.len = xcalloc(w.n + 1, sizeof *w.len);
    w.count = xcalloc(w.n + 1, sizeof *w.count);
    const ByteMapSlot **order = xcalloc(w.n + 1, sizeof *order);
    for (size_t i = 0, k = 0; i < wc->index.cap; i++)
        if (wc->index.slots[i].hash) order[k++] = &wc->index.slots[i];
    sort_map = &wc->index;
    qsort(order, w.n, sizeof *order, by_bytes);
    size_t at = 0;
    for (size_t i = 0; i < w.n; i++) {
        const uint8_t *key = (const uint8_t *)bytemap_key(&wc->index, order[i]);
        w.start[i] = at;
        w.len[i] = order[i]->len;
        w.count[i] = wc->counts[order[i]->value];
        for (uint32_t k = 0; k < order[i]->len; k++) w.sym[at++] = byte_sym[key[k]];
    }
    free(order);

    PairMap counts = {0};
    Where grew = {0};
    Changes ch = {&counts, &grew};
    for (uint32_t i = 0; i < w.n; i++) {
        const uint32_t *s = w.sym + w.start[i];
        for (uint32_t k = 0; k + 1 < w.len[i]; k++) {
            uint64_t pair = (uint64_t)s[k] << 32 | s[k + 1];
            *pair_value(&counts, pair) += (int64_t)w.count[i];
            where_add(&grew, pair, i);
        }
    }
    Heap heap = {0};
    uint64_t *merges = NULL; /* the pairs merged, in order */
    size_t n_merges = 0, cap_merges = 0;
    for (;;) {
        for (size_t i = 0; i < grew.n; i++) {
            int64_t count = *pair_value(&counts, grew.pairs[i]);
            if (count > 0) heap_push(&heap, (Entry){(uint64_t)count, grew.pairs[i], 0, grew.lists[i]});
            else free(grew.lists[i].words);
        }
        grew.n = 0;
        pair_map_clear(&grew.index);

        Entry top;
        for (;;) { /* the largest current count; stale entries go back with theirs */
            if (v.n >= opt->vocab_size || !heap.n) goto done;
            top = heap_pop(&heap);
            int64_t now = *pair_value(&counts, top.pair);
            if ((int64_t)top.count == now) break;
            top.count = now < 0 ? 0 : (uint64_t)now;
            heap_push(&heap, top);
        }
        if (top.count < 1 || opt->min_frequency > top.count) {
            free(top.pos.words);
            break;
        }
        uint32_t a = (uint32_t)(top.pair >> 32), b = (uint32_t)top.pair;
        char *joined = xmalloc((size_t)v.len[a] + v.len[b] + 1);
        memcpy(joined, v.text[a], v.len[a]);
        memcpy(joined + v.len[a], v.text[b], v.len[b]);
        uint32_t merged = vocab_add(&v, joined, (size_t)v.len[a] + v.len[b]);
        free(joined);
        vec_push(merges, n_merges, cap_merges, top.pair);
        for (uint32_t i = 0; i < top.pos.n; i++) merge_word(&w, top.pos.words[i], a, b, merged, &ch);
        free(top.pos.words);
        if (!opt->quiet && isatty(2) && n_merges % 256 == 0)
            fprintf(stderr, "\rmmc tokenizer train: %zu merges, vocabulary %zu of %u   ", n_merges, v.n, opt->vocab_size);
    }
done:
    if (!opt->quiet && isatty(2)) fprintf(stderr, "\r%60s\r", "");
    for (size_t i = 0; i < heap.n; i++) free(heap.e[i].pos.words);
    for (size_t i = 0; i < grew.n; i++) free(grew.lists[i].words);
    BpeTrainResult r = {0};
    r.json = tokenizer_json(&v, merges, n_merges, opt, &r.n_merges);
    r.vocab_size = (uint32_t)v.n;
    r.n_words = w.n;
    free(heap.e), free(merges), free(w.sym), free(w.start), free(w.len), free(w.count);
    free(counts.slots), free(grew.index.slots), free(grew.pairs), free(grew.lists);
    for (size_t i = 0; i < v.n; i++) free(v.text[i]);
    free(v.text), free(v.len);
    bytemap_free(&v.ids);
    return r;
}

/* ---- tokenizer.json, laid out as Hugging Face writes it */

static json_t *byte_level(bool add_prefix_space) {
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("ByteLevel"));
    json_object_set_new(o, "add_prefix_space", json_boolean(add_prefix_space));
    json_object_set_new(o, "trim_offsets", json_true());
    json_object_set_new(o, "use_regex", json_true());
    return o;
}

static char *tokenizer_json(const Vocab *v, const uint64_t *merges, size_t n_merges, const BpeTrainOptions *opt,
                            uint32_t *written) {
    json_t *root = json_object();
    json_object_set_new(root, "version", json_string("1.0"));
    json_object_set_new(root, "truncation", json_null());
    json_object_set_new(root, "padding", json_null());
    json_t *added = json_array();
    for (int i = 0; i < opt->n_special; i++) {
        size_t n = strlen(opt->special[i]);
        uint32_t id = *bytemap_get(&v->ids, opt->special[i], n, bytes_hash(opt->special[i], n));
        bool seen = false; /* a special listed twice is added once */
        for (int j = 0; j < i; j++) seen |= strcmp(opt->special[j], opt->special[i]) == 0;
        if (seen) continue;
        json_t *t = json_object();
        json_object_set_new(t, "id", json_integer(id));
        json_object_set_new(t, "content", json_stringn(opt->special[i], n));
        json_object_set_new(t, "single_word", json_false());
        json_object_set_new(t, "lstrip", json_false());
        json_object_set_new(t, "rstrip", json_false());
        json_object_set_new(t, "normalized", json_false());
        json_object_set_new(t, "special", json_true());
        json_array_append_new(added, t);
    }
    json_object_set_new(root, "added_tokens", added);
    json_object_set_new(root, "normalizer", json_null());
    json_object_set_new(root, "pre_tokenizer", byte_level(false));
    json_object_set_new(root, "post_processor", json_null());
    json_object_set_new(root, "decoder", byte_level(true));
    json_t *model = json_object();
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "dropout", json_null());
    json_object_set_new(model, "unk_token", json_null());
    json_object_set_new(model, "continuing_subword_prefix", json_null());
    json_object_set_new(model, "end_of_word_suffix", json_null());
    json_object_set_new(model, "fuse_unk", json_false());
    json_object_set_new(model, "byte_fallback", json_false());
    json_object_set_new(model, "ignore_merges", json_false());
    json_t *vocab = json_object();
    for (size_t id = 0; id < v->n; id++) json_object_setn_new(vocab, v->text[id], v->len[id], json_integer((json_int_t)id));
    json_object_set_new(model, "vocab", vocab);
    /* a pair merged twice keeps only its later rank, as in Hugging Face's merge map */
    PairMap last = {0};
    for (size_t i = 0; i < n_merges; i++) *pair_value(&last, merges[i]) = (int64_t)i;
    json_t *list = json_array();
    for (size_t i = 0; i < n_merges; i++) {
        if (*pair_value(&last, merges[i]) != (int64_t)i) continue;
        uint32_t a = (uint32_t)(merges[i] >> 32), b = (uint32_t)merges[i];
        StrBuf s = {0};
        sb_appendn(&s, v->text[a], v->len[a]);
        sb_appendn(&s, " ", 1);
        sb_appendn(&s, v->text[b], v->len[b]);
        json_array_append_new(list, json_stringn(s.s, s.len));
        sb_free(&s);
        (*written)++;
    }
    free(last.slots);
    json_object_set_new(model, "merges", list);
    json_object_set_new(root, "model", model);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) die("train: cannot write the tokenizer as JSON");
    char *out = xasprintf("%s\n", text);
    free(text);
    return out;
}
