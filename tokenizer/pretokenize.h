/* pretokenize: the GPT-2 pre-tokenizer that byte-level BPE applies before merging,
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * written out as a hand matcher with the same leftmost-first, greedy, backtracking result.
 * Letters, numbers and white space come from utf8proc's Unicode tables: \p{L} is category
 * L*, \p{N} is N*, \s is the White_Space property (category Z* plus TAB..CR and U+0085),
 * which is what Oniguruma, the regex engine of Hugging Face's tokenizers, uses. */
#ifndef MMC_PRETOKENIZE_H
#define MMC_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

enum { CLASS_OTHER, CLASS_LETTER, CLASS_NUMBER, CLASS_SPACE };

void pretokenize_init(void); /* builds the class table; call once before any thread starts */
int char_class(uint32_t cp);
/* End of the pre-token that starts at s[i]; s[0..n) must be valid UTF-8 and i < n. */
size_t pretoken_end(const uint8_t *s, size_t n, size_t i);
/* Bytes of white space at the start of s[0..n) / at the end of s[0..n) (valid UTF-8). */
size_t leading_space(const uint8_t *s, size_t n);
size_t trailing_space(const uint8_t *s, size_t n);

#endif
