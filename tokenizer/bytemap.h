/* bytemap: an open-addressing hash map from byte strings to u32, used for the vocabulary,
 * the per-thread cache of encoded words and the trainer's word counts. Keys are copied into
 * one arena; callers hash once with bytes_hash and pass the hash along. */
#ifndef MMC_BYTEMAP_H
#define MMC_BYTEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ByteMapSlot {
    uint64_t hash; /* 0: empty (bytes_hash never returns 0) */
    uint64_t key;  /* offset of the key in the arena */
    uint32_t len;
    uint32_t value;
} ByteMapSlot;

typedef struct ByteMap {
    ByteMapSlot *slots;
    size_t cap, count; /* cap is a power of two, at most half full */
    char *keys;
    size_t keys_len, keys_cap;
} ByteMap;

uint64_t bytes_hash(const void *p, size_t n);
uint32_t *bytemap_get(const ByteMap *m, const void *key, size_t n, uint64_t hash); /* NULL if absent */
/* The value slot of key, inserted with value 0 (and *added set) if absent. */
uint32_t *bytemap_put(ByteMap *m, const void *key, size_t n, uint64_t hash, bool *added);
static inline const char *bytemap_key(const ByteMap *m, const ByteMapSlot *s) { return m->keys + s->key; }
void bytemap_clear(ByteMap *m);
void bytemap_free(ByteMap *m);

#endif
