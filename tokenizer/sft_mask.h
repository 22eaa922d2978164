/* sft_mask: MiniMind's SFT loss mask (SFTDataset._generate_loss_mask in dataset/lm_dataset.py),
 * quirks included, so that a row mmc makes trains on exactly the tokens MiniMind's does. */
#ifndef MMC_SFT_MASK_H
#define MMC_SFT_MASK_H

#include <stddef.h>
#include <stdint.h>

/* mask[j] = 1 for every token j of ids[0..n) that MiniMind counts, else 0. bos: the ids of
 * "<|im_start|>assistant", eos: those of "<|im_end|>" (both nonempty). n plays MiniMind's
 * max_length: the padded row, or with --pack one whole conversation. */
void sft_loss_mask(const uint16_t *ids, size_t n, const uint16_t *bos, size_t n_bos, const uint16_t *eos, size_t n_eos,
                   uint8_t *mask);

#endif
