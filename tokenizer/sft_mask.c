/* sft_mask: see sft_mask.h. MiniMind's loop, with max_length = len(input_ids) = n:
 *
 *   while i < n:
 *       if ids[i:i+len(bos)] == bos:
 *           start = i + len(bos); end = start
 *           while end < n and ids[end:end+len(eos)] != eos: end += 1
 *           for j in range(start + 1, min(end + len(eos) + 1, n)): mask[j] = 1
 *           i = end + len(eos) if end < n else n
 *       else: i += 1
 *
 * Its quirks, kept on purpose: the token right after "assistant" (the "\n" of the turn's
 * header, or whatever the first pre-token of the reply merged into) never counts; the
 * token after <|im_end|> (the "\n" ending the turn) does; and a reply with no <|im_end|>
 * (one cut off by --seq, or the empty reply MiniMind2's template opens after a trailing
 * user turn) counts to the end of the row, padding included. */
#include "sft_mask.h"

#include <stdbool.h>
#include <string.h>

/* ids[at:at+k] == want[0:k], as Python's slice compare (a slice past the end is shorter) */
static bool matches(const uint16_t *ids, size_t n, size_t at, const uint16_t *want, size_t k) {
    return at + k <= n && memcmp(ids + at, want, k * sizeof *want) == 0;
}

void sft_loss_mask(const uint16_t *ids, size_t n, const uint16_t *bos, size_t n_bos, const uint16_t *eos, size_t n_eos,
                   uint8_t *mask) {
    memset(mask, 0, n);
    size_t i = 0;
    while (i < n) {
        if (!matches(ids, n, i, bos, n_bos)) {
            i++;
            continue;
        }
        size_t start = i + n_bos, end = start;
        while (end < n && !matches(ids, n, end, eos, n_eos)) end++;
        size_t stop = end + n_eos + 1 < n ? end + n_eos + 1 : n;
        for (size_t j = start + 1; j < stop; j++) mask[j] = 1;
        i = end < n ? end + n_eos : n;
    }
}
