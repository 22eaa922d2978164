/* byte_level: GPT-2's byte-to-unicode table. Byte-level BPE works on bytes, but tokenizer.json
 * spells every token with one printable character per byte: bytes that are printable Latin-1
 * stand for themselves and the other 68 are moved to U+0100..U+0143 in byte order
 * (so a space is "Ġ", a newline "Ċ"). */
#ifndef MMC_BYTE_LEVEL_H
#define MMC_BYTE_LEVEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

uint32_t byte_level_char(uint8_t byte);
/* The byte a character stands for, or -1 if it is not one of the 256. */
int byte_level_byte(uint32_t cp);
/* Appends the spelling of bytes s[0..n) to b. */
void byte_level_spell(StrBuf *b, const uint8_t *s, size_t n);
/* Appends the bytes a spelling stands for; false (b partly written) if some character of
 * the UTF-8 text s is not one of the 256. */
bool byte_level_unspell(StrBuf *b, const char *s, size_t n);

#endif
