/* tokenizer_internal: the loaded tokenizer, shared by loading (tokenizer_load.c), BPE
 * (bpe.c) and the encode/decode pipeline (encode.c). Everything here is read-only once
 * tokenizer_parse returns. */
#ifndef MMC_TOKENIZER_INTERNAL_H
#define MMC_TOKENIZER_INTERNAL_H

#include "bytemap.h"
#include "tokenizer.h"

enum { MAX_IDS = 1 << 24 }; /* ids mmc accepts (token files hold 16-bit ids anyway) */

typedef struct Merge {
    uint32_t rank, new_id;
} Merge;

/* (left id, right id) -> merge, open addressing keyed by left << 32 | right. */
typedef struct MergeTable {
    struct MergeSlot {
        uint64_t key; /* UINT64_MAX: empty */
        Merge m;
    } *slots;
    size_t cap, count;
} MergeTable;

static inline size_t merge_home(uint64_t key, size_t cap) { return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (cap - 1); }
void merges_put(MergeTable *t, uint32_t left, uint32_t right, Merge m);
static inline const Merge *merges_get(const MergeTable *t, uint32_t left, uint32_t right) {
    if (!t->cap) return NULL;
    uint64_t key = (uint64_t)left << 32 | right;
    for (size_t i = merge_home(key, t->cap);; i = (i + 1) & (t->cap - 1)) {
        if (t->slots[i].key == key) return &t->slots[i].m;
        if (t->slots[i].key == UINT64_MAX) return NULL;
    }
}
void merges_free(MergeTable *t);

typedef struct TokenPiece {
    char *text;         /* as tokenizer.json spells it; NULL: no token has this id */
    char *bytes;        /* what decoding yields for it */
    uint32_t text_len, len; /* of text, of bytes */
    bool special;       /* left out by decode --skip-special */
    bool lstrip, rstrip; /* added token that swallows the white space before/after it */
} TokenPiece;

typedef struct AddedPattern {
    const char *content;
    size_t len;
    uint32_t id;
} AddedPattern;

/* Added tokens that are matched in one pass, leftmost-longest like Aho-Corasick. */
typedef struct AddedSet {
    AddedPattern *patterns; /* sorted by first byte, then longest first */
    int n;
    int first[257]; /* patterns starting with byte b: [first[b], first[b + 1]) */
} AddedSet;

enum { DECODER_NONE, DECODER_BYTE_LEVEL };

struct Tokenizer {
    char *name;
    uint32_t n_ids;
    TokenPiece *pieces;     /* (n_ids) */
    ByteMap vocab;          /* token text -> id, over the model vocabulary and added tokens */
    ByteMap vocab_bytes;    /* byte string -> id, for ignore_merges */
    int64_t byte_id[256];   /* the symbol each byte starts as; -1: not in the vocabulary */
    uint32_t fallback_ids[256][2]; /* byte_fallback's <0xNN> ids for the byte's spelling */
    uint8_t n_fallback[256];       /* 0: byte_fallback has no ids for it */
    MergeTable merges;
    AddedSet added[2];      /* [0]: added tokens matched on raw text, [1]: "normalized" ones */
    int64_t unk_id;         /* -1: unknown bytes are dropped, as Hugging Face does */
    bool fuse_unk, ignore_merges, add_prefix_space, use_regex;
    int decoder;
};

typedef struct Symbol {
    uint32_t id;
    int32_t prev, next; /* neighbours still alive; -1 at the ends */
    uint32_t len;       /* 0: merged into its left neighbour */
} Symbol;

typedef struct HeapEntry {
    uint64_t key; /* rank << 32 | position: the heap pops the lowest rank, then the leftmost */
    uint32_t new_id;
} HeapEntry;

struct EncodeState {
    const Tokenizer *t;
    StrBuf repaired; /* the text after UTF-8 repair */
    StrBuf segment;  /* a segment with the space add_prefix_space puts in front */
    Symbol *symbols;
    HeapEntry *heap;
    size_t symbols_cap, heap_cap;
    ByteMap cache;   /* word -> offset in cache_ids of its id count, then its ids */
    IdVec cache_ids;
};

/* bpe.c: appends the ids of one pre-token (a byte string) to out. */
void bpe_encode_word(EncodeState *s, const uint8_t *word, size_t n, IdVec *out);

#endif
