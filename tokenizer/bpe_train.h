/* bpe_train: learns a byte-level BPE the way Hugging Face's BpeTrainer does (same vocabulary,
 * same merges, same ids), so a tokenizer.json trained by mmc and one trained by
 * `tokenizers` on the same corpus with the same settings are the same file in content:
 *   1. count the words: each document through the GPT-2 pre-tokenizer (special tokens in
 *      the text are not split out, as in Hugging Face's trainer);
 *   2. vocabulary: the special tokens, then the 256 byte characters sorted by code point;
 *   3. repeatedly merge the most frequent adjacent pair (ties: the smallest pair of ids)
 *      until the vocabulary has the requested size or no pair is left. */
#ifndef MMC_BPE_TRAIN_H
#define MMC_BPE_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bytemap.h"

typedef struct WordCounts {
    ByteMap index;    /* word bytes -> index into counts */
    uint64_t *counts;
    size_t n, cap;
} WordCounts;

/* Adds the pre-tokens of one document (valid UTF-8, as jsonl_next gives it). */
void word_counts_add_text(WordCounts *wc, const char *text, size_t len);
/* Adds every word of `from` into `into`. */
void word_counts_merge(WordCounts *into, const WordCounts *from);
void word_counts_free(WordCounts *wc);

typedef struct BpeTrainOptions {
    uint32_t vocab_size;
    uint64_t min_frequency;   /* a pair seen fewer times is never merged (0: no limit) */
    const char **special;     /* added first, in this order: ids 0, 1, ... */
    int n_special;
    bool quiet;
} BpeTrainOptions;

typedef struct BpeTrainResult {
    char *json;               /* the tokenizer.json text */
    uint32_t vocab_size, n_merges;
    size_t n_words;
} BpeTrainResult;

BpeTrainResult bpe_train(const WordCounts *wc, const BpeTrainOptions *opt);

/* `mmc tokenizer train` (bpe_train_cli.c). */
int tokenizer_train_cmd(int argc, char **argv);

#endif
