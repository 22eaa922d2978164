/* bytemap: see bytemap.h. Linear probing; the stored 64-bit hash makes misses cheap. */
#include "bytemap.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static uint64_t mix(uint64_t h) { /* murmur3's finalizer */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

uint64_t bytes_hash(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0x100000001B3ULL);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x87c37b91114253d5ULL;
        h = h << 31 | h >> 33;
        s += 8, n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = mix(h ^ w);
    return h ? h : 1;
}

static ByteMapSlot *find(const ByteMap *m, const void *key, size_t n, uint64_t hash) {
    size_t mask = m->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        ByteMapSlot *s = &m->slots[i];
        if (!s->hash || (s->hash == hash && s->len == n && memcmp(m->keys + s->key, key, n) == 0)) return s;
    }
}

uint32_t *bytemap_get(const ByteMap *m, const void *key, size_t n, uint64_t hash) {
    if (!m->cap) return NULL;
    ByteMapSlot *s = find(m, key, n, hash);
    return s->hash ? &s->value : NULL;
}

static void grow(ByteMap *m) {
    ByteMapSlot *old = m->slots;
    size_t old_cap = m->cap;
    m->cap = old_cap ? 2 * old_cap : 64;
    m->slots = xcalloc(m->cap, sizeof *m->slots);
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].hash) {
            size_t mask = m->cap - 1, j = old[i].hash & mask;
            while (m->slots[j].hash) j = (j + 1) & mask;
            m->slots[j] = old[i];
        }
    free(old);
}

uint32_t *bytemap_put(ByteMap *m, const void *key, size_t n, uint64_t hash, bool *added) {
    if (2 * (m->count + 1) > m->cap) grow(m);
    ByteMapSlot *s = find(m, key, n, hash);
    if (added) *added = !s->hash;
    if (s->hash) return &s->value;
    if (n > UINT32_MAX) die("bytemap: a %zu-byte key is too long", n);
    if (m->keys_len + n > m->keys_cap) {
        m->keys_cap = m->keys_cap ? 2 * m->keys_cap : 4096;
        if (m->keys_cap < m->keys_len + n) m->keys_cap = m->keys_len + n;
        m->keys = xrealloc(m->keys, m->keys_cap);
    }
    if (n) memcpy(m->keys + m->keys_len, key, n);
    *s = (ByteMapSlot){hash, m->keys_len, (uint32_t)n, 0};
    m->keys_len += n;
    m->count++;
    return &s->value;
}

void bytemap_clear(ByteMap *m) {
    if (m->cap) memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->count = 0;
    m->keys_len = 0;
}

void bytemap_free(ByteMap *m) {
    free(m->slots);
    free(m->keys);
    *m = (ByteMap){0};
}
