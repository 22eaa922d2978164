/* encode: the path from text to ids, in Hugging Face's order:
 *   1. repair invalid UTF-8 (each maximal invalid subpart -> U+FFFD),
 *   2. split out added tokens: first those matched on raw text, then the "normalized"
 *      ones in what is left (with no normalizer the two passes differ only in order),
 *   3. in each remaining piece: the space add_prefix_space puts in front, then the GPT-2
 *      pre-tokenizer, then BPE on each pre-token's bytes.
 * And back: ids -> bytes -> UTF-8 text. */
#include <stdlib.h>
#include <string.h>

#include "byte_level.h"
#include "pretokenize.h"
#include "tokenizer_internal.h"
#include "utf8.h"

EncodeState *encode_state_new(const Tokenizer *t) {
    EncodeState *s = xcalloc(1, sizeof *s);
    s->t = t;
    return s;
}

void encode_state_free(EncodeState *s) {
    if (!s) return;
    sb_free(&s->repaired);
    sb_free(&s->segment);
    free(s->symbols);
    free(s->heap);
    bytemap_free(&s->cache);
    free(s->cache_ids.ids);
    free(s);
}

/* Where encoded pieces go: ids, or (for checking the pre-tokenizer) their spelling. */
typedef struct Sink {
    IdVec *ids;
    StrBuf *spelled;
} Sink;

static void emit_word(EncodeState *s, const uint8_t *w, size_t n, Sink *out) {
    if (out->ids) {
        bpe_encode_word(s, w, n, out->ids);
        return;
    }
    if (out->spelled->len) sb_appendn(out->spelled, " ", 1);
    byte_level_spell(out->spelled, w, n);
}

static void emit_added(EncodeState *s, uint32_t id, Sink *out) {
    if (out->ids) {
        idvec_push(out->ids, id);
        return;
    }
    const TokenPiece *p = &s->t->pieces[id];
    if (out->spelled->len) sb_appendn(out->spelled, " ", 1);
    sb_appendn(out->spelled, p->text, p->text_len);
}

static void encode_piece(EncodeState *s, const char *text, size_t n, Sink *out) {
    const Tokenizer *t = s->t;
    if (t->add_prefix_space && text[0] != ' ') {
        s->segment.len = 0;
        sb_appendn(&s->segment, " ", 1);
        sb_appendn(&s->segment, text, n);
        text = s->segment.s, n = s->segment.len;
    }
    const uint8_t *u = (const uint8_t *)text;
    if (!t->use_regex) {
        emit_word(s, u, n, out);
        return;
    }
    for (size_t i = 0; i < n;) {
        size_t end = pretoken_end(u, n, i);
        emit_word(s, u + i, end - i, out);
        i = end;
    }
}

/* The leftmost match at or after pos, the longest of those starting there. */
static bool find_added(const AddedSet *as, const char *text, size_t n, size_t pos, size_t *at, const AddedPattern **match) {
    for (size_t i = pos; i < n; i++) {
        uint8_t b = (uint8_t)text[i];
        for (int k = as->first[b]; k < as->first[b + 1]; k++) {
            const AddedPattern *p = &as->patterns[k];
            if (p->len <= n - i && memcmp(text + i, p->content, p->len) == 0) {
                *at = i, *match = p;
                return true;
            }
        }
    }
    return false;
}

/* Hugging Face's AddedVocabulary::find_matches with pass `set`, the rest to the next pass. */
static void split_added(EncodeState *s, int set, const char *text, size_t n, Sink *out) {
    if (!n) return;
    if (set == 2) {
        encode_piece(s, text, n, out);
        return;
    }
    const AddedSet *as = &s->t->added[set];
    size_t done = 0, pos = 0, at;
    const AddedPattern *m;
    while (as->n && pos < n && find_added(as, text, n, pos, &at, &m)) {
        const TokenPiece *p = &s->t->pieces[m->id];
        size_t start = at, stop = at + m->len;
        if (p->lstrip) {
            start -= trailing_space((const uint8_t *)text, start);
            if (start < done) start = done; /* spaces an earlier match already took */
        }
        if (p->rstrip) stop += leading_space((const uint8_t *)text + stop, n - stop);
        if (done < start) split_added(s, set + 1, text + done, start - done, out);
        emit_added(s, m->id, out);
        done = stop;
        pos = at + m->len;
    }
    if (done < n) split_added(s, set + 1, text + done, n - done, out);
}

static void encode_text(EncodeState *s, const char *text, size_t len, Sink *out) {
    if (!utf8_valid((const uint8_t *)text, len)) {
        s->repaired.len = 0;
        utf8_append_lossy(&s->repaired, (const uint8_t *)text, len);
        text = s->repaired.s, len = s->repaired.len;
    }
    split_added(s, 0, text, len, out);
}

void tokenizer_encode(EncodeState *s, const char *text, size_t len, IdVec *out) {
    Sink sink = {out, NULL};
    encode_text(s, text, len, &sink);
}

void tokenizer_pretokens(EncodeState *s, const char *text, size_t len, StrBuf *out) {
    Sink sink = {NULL, out};
    encode_text(s, text, len, &sink);
}

void tokenizer_decode(const Tokenizer *t, const uint32_t *ids, size_t n, bool skip_special, StrBuf *out) {
    StrBuf bytes = {0};
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= t->n_ids || !t->pieces[ids[i]].text) continue;
        const TokenPiece *p = &t->pieces[ids[i]];
        if (skip_special && p->special) continue;
        if (t->decoder == DECODER_NONE && kept) sb_appendn(&bytes, " ", 1); /* Hugging Face joins with spaces */
        if (p->len) sb_appendn(&bytes, p->bytes, p->len);
        kept++;
    }
    if (bytes.len) utf8_append_lossy(out, (const uint8_t *)bytes.s, bytes.len);
    sb_free(&bytes);
}
