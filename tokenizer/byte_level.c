/* byte_level: see byte_level.h. */
#include "byte_level.h"

#include "utf8.h"

static bool printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t byte_level_char(uint8_t byte) {
    if (printable(byte)) return byte;
    uint32_t moved = 0; /* how many non-printable bytes come before this one */
    for (unsigned b = 0; b < byte; b++) moved += !printable(b);
    return 256 + moved;
}

int byte_level_byte(uint32_t cp) {
    if (cp < 256) return printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t moved = 0;
    for (unsigned b = 0; b < 256; b++)
        if (!printable(b) && moved++ == cp - 256) return (int)b;
    return -1;
}

void byte_level_spell(StrBuf *b, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char u[4];
        sb_appendn(b, u, utf8_put(byte_level_char(s[i]), u));
    }
}

bool byte_level_unspell(StrBuf *b, const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_decode(u + i, n - i, &cp);
        int byte = k ? byte_level_byte(cp) : -1;
        if (byte < 0) return false;
        char c = (char)byte;
        sb_appendn(b, &c, 1);
        i += k;
    }
    return true;
}
