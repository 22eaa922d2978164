/* tokenizer: Hugging Face tokenizer.json files of byte-level BPE (GPT-2 and MiniMind style),
 * read with jansson and encoded to exactly the ids Hugging Face's `tokenizers` gives:
 *   text -> split out added/special tokens -> GPT-2 pre-tokenizer -> bytes -> BPE merges by rank.
 * Decoding maps ids back to bytes and reads them as UTF-8 (invalid bytes become U+FFFD).
 * A Tokenizer is read-only after loading; each encoding thread brings its own EncodeState
 * (scratch buffers and a cache of words already encoded). */
#ifndef MMC_TOKENIZER_H
#define MMC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct Tokenizer Tokenizer;
typedef struct EncodeState EncodeState;

typedef struct IdVec {
    uint32_t *ids;
    size_t n, cap;
} IdVec;

static inline void idvec_push(IdVec *v, uint32_t id) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 256;
        v->ids = xrealloc(v->ids, v->cap * sizeof *v->ids);
    }
    v->ids[v->n++] = id;
}

/* Dies naming `name` (a path) and what is wrong or unsupported. */
Tokenizer *tokenizer_load(const char *path);
Tokenizer *tokenizer_parse(const char *json, size_t len, const char *name);
void tokenizer_free(Tokenizer *t);

uint32_t tokenizer_vocab_size(const Tokenizer *t); /* largest id + 1 */
/* Id of an added token or vocabulary entry spelled exactly `content`; -1 if there is none. */
int64_t tokenizer_token_id(const Tokenizer *t, const char *content);
/* The token's text as tokenizer.json spells it, or NULL for an id that has none. */
const char *tokenizer_token_text(const Tokenizer *t, uint32_t id);

EncodeState *encode_state_new(const Tokenizer *t);
void encode_state_free(EncodeState *s);
/* Appends the ids of text[0..len) to out. Text that is not valid UTF-8 is first repaired
 * the way Python's bytes.decode("utf-8", "replace") does. */
void tokenizer_encode(EncodeState *s, const char *text, size_t len, IdVec *out);
/* Appends the pre-tokens of text (the pieces BPE sees, spelled as in tokenizer.json)
 * separated by spaces, with added tokens shown as themselves: for checking the
 * pre-tokenizer against Hugging Face's. */
void tokenizer_pretokens(EncodeState *s, const char *text, size_t len, StrBuf *out);
/* Appends the text of ids to out, as valid UTF-8; ids without a token are left out, and so
 * are special tokens if skip_special. */
void tokenizer_decode(const Tokenizer *t, const uint32_t *ids, size_t n, bool skip_special, StrBuf *out);

#endif
