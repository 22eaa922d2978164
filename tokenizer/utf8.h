/* utf8: decoding with the replacement rule shared by Python's errors="replace" and Rust's
 * String::from_utf8_lossy (each maximal invalid subpart becomes one U+FFFD), so text that is
 * not valid UTF-8 is read exactly as Hugging Face's tokenizers would be handed it. */
#ifndef MMC_UTF8_H
#define MMC_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Length (1..4) of the valid sequence at s, storing its code point; 0 if s starts an invalid
 * sequence. n > 0. */
size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/* Bytes an invalid sequence at s spans (its maximal subpart, at least 1). */
size_t utf8_invalid_length(const uint8_t *s, size_t n);
size_t utf8_put(uint32_t cp, char out[4]);
bool utf8_valid(const uint8_t *s, size_t n);
/* Appends s to b with every invalid subpart replaced by U+FFFD. */
void utf8_append_lossy(StrBuf *b, const uint8_t *s, size_t n);

#endif
