/* pretokenize: see pretokenize.h. */
#include "pretokenize.h"

#include <pthread.h>
#include <utf8proc.h>


static uint8_t bmp_class[65536]; /* char_class of every code point below U+10000 */

int char_class(uint32_t cp) {
    if ((cp >= 9 && cp <= 13) || cp == 0x85) return CLASS_SPACE; /* White_Space outside Z* */
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: return CLASS_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO: return CLASS_NUMBER;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: return CLASS_SPACE;
    default: return CLASS_OTHER;
    }
}

static void build_table(void) {
    for (uint32_t cp = 0; cp < 65536; cp++) bmp_class[cp] = (uint8_t)char_class(cp);
}

void pretokenize_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_table);
}

/* Class and length of the character at s[i]; s is valid UTF-8, so no bounds checks. */
static inline size_t char_at(const uint8_t *s, size_t i, int *cls) {
    uint32_t b = s[i];
    if (b < 0x80) {
        *cls = bmp_class[b];
        return 1;
    }
    if (b < 0xE0) {
        *cls = bmp_class[(b & 0x1F) << 6 | (s[i + 1] & 0x3F)];
        return 2;
    }
    if (b < 0xF0) {
        *cls = bmp_class[(b & 0x0F) << 12 | (s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F)];
        return 3;
    }
    *cls = char_class((b & 0x07) << 18 | (s[i + 1] & 0x3Fu) << 12 | (s[i + 2] & 0x3Fu) << 6 | (s[i + 3] & 0x3Fu));
    return 4;
}

static size_t run_end(const uint8_t *s, size_t n, size_t j, int cls) {
    while (j < n) {
        int c;
        size_t k = char_at(s, j, &c);
        if (c != cls) break;
        j += k;
    }
    return j;
}

size_t pretoken_end(const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) { /* 's|'t|'re|'ve|'m|'ll|'d, tried first */
        uint8_t c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
        if (i + 2 < n && ((c == 'r' && s[i + 2] == 'e') || (c == 'v' && s[i + 2] == 'e') || (c == 'l' && s[i + 2] == 'l')))
            return i + 3;
    }
    int cls;
    size_t j = i + char_at(s, i, &cls);
    if (s[i] == ' ' && j < n) { /* " ?X+": a space joins the letters, digits or symbols after it */
        int next;
        size_t k = char_at(s, j, &next);
        if (next != CLASS_SPACE) return run_end(s, n, j + k, next);
    }
    if (cls != CLASS_SPACE) return run_end(s, n, j, cls);
    /* \s+(?!\S): the run of white space, less its last character when something follows,
     * so that character can lead the next word; a single one before a word is \s+ alone. */
    size_t last = i;
    while (j < n) {
        int c;
        size_t k = char_at(s, j, &c);
        if (c != CLASS_SPACE) break;
        last = j;
        j += k;
    }
    if (j == n) return n;
    return last > i ? last : j;
}

size_t leading_space(const uint8_t *s, size_t n) {
    size_t j = 0;
    while (j < n) {
        int c;
        size_t k = char_at(s, j, &c);
        if (c != CLASS_SPACE) break;
        j += k;
    }
    return j;
}

size_t trailing_space(const uint8_t *s, size_t n) {
    size_t j = n;
    while (j > 0) {
        size_t start = j - 1;
        while (start > 0 && (s[start] & 0xC0) == 0x80) start--;
        int c;
        char_at(s, start, &c);
        if (c != CLASS_SPACE) break;
        j = start;
    }
    return n - j;
}
