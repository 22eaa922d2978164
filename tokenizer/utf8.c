/* utf8: see utf8.h. The ranges follow Unicode's table 3-7 (well-formed byte sequences). */
#include "utf8.h"

/* Second-byte bounds of a sequence led by each lead byte; the later bytes are always 80..BF. */
static bool lead_info(uint8_t b, size_t *len, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80, *hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) *len = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        *len = 3;
        if (b == 0xE0) *lo = 0xA0;
        if (b == 0xED) *hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        *len = 4;
        if (b == 0xF0) *lo = 0x90;
        if (b == 0xF4) *hi = 0x8F; /* nothing above U+10FFFF */
    } else return false;
    return true;
}

size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t len;
    uint8_t lo, hi;
    if (!lead_info(b, &len, &lo, &hi) || n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    uint32_t c = b & (0x7F >> len);
    for (size_t i = 1; i < len; i++) c = c << 6 | (s[i] & 0x3F);
    *cp = c;
    return len;
}

size_t utf8_invalid_length(const uint8_t *s, size_t n) {
    size_t len;
    uint8_t lo, hi;
    if (!lead_info(s[0], &len, &lo, &hi) || n < 2 || s[1] < lo || s[1] > hi) return 1;
    size_t k = 2;
    while (k < len && k < n && (s[k] & 0xC0) == 0x80) k++;
    return k;
}

size_t utf8_put(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3F)), out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool utf8_valid(const uint8_t *s, size_t n) {
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_decode(s + i, n - i, &cp);
        if (!k) return false;
        i += k;
    }
    return true;
}

void utf8_append_lossy(StrBuf *b, const uint8_t *s, size_t n) {
    uint32_t cp;
    size_t run = 0; /* start of the pending valid run */
    for (size_t i = 0; i < n;) {
        size_t k = s[i] < 0x80 ? 1 : utf8_decode(s + i, n - i, &cp);
        if (k) {
            i += k;
            continue;
        }
        sb_appendn(b, (const char *)s + run, i - run);
        sb_appendn(b, "\xEF\xBF\xBD", 3);
        i += utf8_invalid_length(s + i, n - i);
        run = i;
    }
    sb_appendn(b, (const char *)s + run, n - run);
}
