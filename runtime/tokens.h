/* tokens: mmc's token files. Little-endian throughout. Version 1, a 64-byte header then the
 * tokens:
 *   0  char[8]  magic "mmctoken"
 *   8  u32      format version (1)
 *  12  u32      vocab size: every token id is below it
 *  16  u64      token count
 *  24  u32      row length: tokens per training row (seq + 1: inputs are its first seq tokens,
 *               targets its last seq), or 0 for a plain stream cut into rows by the reader
 *  28  u32      pad id: targets equal to it are left out of the loss
 *  32  u8[32]   SHA-256 of the tokenizer.json that made the file, or zero when unknown
 *  64  u16[count] the token ids
 * Version 2 (what `mmc data --sft` writes), a 128-byte header that adds a loss-mask plane:
 *   0..63       as version 1, with version 2 at byte 8
 *  64  u32      flags: bit 0 = the file has a loss-mask plane; every other bit must be 0
 *  68  u32      reserved, 0
 *  72  u64      byte offset of the mask plane (0 without one)
 *  80  u8[48]   reserved, 0
 * 128  u16[count] the token ids
 *  M   u8[(count + 7) / 8] the mask plane, at M = the end of the ids rounded up to a multiple
 *      of 8 (the bytes in between zero), and the file ends with it. One bit per token,
 *      LSB first: token i is bit i % 8 of byte i / 8; bits past the last token are 0. A bit
 *      is 1 when that token counts as a target in the loss. Target k of row r is token
 *      r * row_length + k + 1, so a target's bit is its own token's (MiniMind's
 *      loss_mask[1:]); the bit of a row's first token is never a target's and is kept only
 *      so that the plane is a plain per-token array. The pad id still names the padding.
 * Readers map the file and check every id once, so a bad id is reported with its byte
 * offset before any training starts. Writers stream to a temp file that is fsynced and
 * renamed into place when complete (a masked writer keeps the mask bits in a second temp
 * file until then, so memory stays bounded). */
#ifndef MMC_TOKENS_H
#define MMC_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filemap.h"

enum {
    TOKENS_HEADER_BYTES = 64, TOKENS_VERSION = 1,     /* no mask */
    TOKENS_HEADER_BYTES_V2 = 128, TOKENS_VERSION_V2 = 2,
    TOKENS_FLAG_MASK = 1,                             /* v2 flags: a loss-mask plane */
};

typedef struct TokenFile {
    char *path;
    uint32_t version, vocab, row_length, pad_id;
    uint64_t count;
    const uint16_t *ids;
    const uint8_t *mask;       /* the loss-mask plane (see above), NULL when the file has none */
    char tokenizer_sha256[65]; /* hex, "" when the file does not say */
    FileMap map;
} TokenFile;

/* Dies with file, byte offset and id if an id is >= the file's vocab or >= model_vocab
 * (0: no model limit), or if the header is malformed (a pad id at or above the vocab size
 * too; unknown flags, a mask plane that is not where or as long as the layout says), or if
 * the path is not a regular file (a FIFO would block for ever). */
TokenFile *tokens_open(const char *path, uint32_t model_vocab);
void tokens_close(TokenFile *f);
/* SHA-256 of the whole file, header included (what a run records of its data) */
void tokens_sha256(const TokenFile *f, char out[65]);

/* whether token i counts as a target in the loss: its mask bit, or true without a mask */
static inline bool tokens_counts(const TokenFile *f, uint64_t i) {
    return !f->mask || (f->mask[i >> 3] >> (i & 7) & 1);
}

typedef struct TokenWriter TokenWriter;
/* A version 1 file. tokenizer_sha256: the hex SHA-256 of the tokenizer.json the ids come
 * from, or NULL */
TokenWriter *tokens_create(const char *path, uint32_t vocab, uint32_t row_length, uint32_t pad_id,
                           const char *tokenizer_sha256);
/* A version 2 file with a loss-mask plane: append with tokens_append_masked only. */
TokenWriter *tokens_create_masked(const char *path, uint32_t vocab, uint32_t row_length, uint32_t pad_id,
                                  const char *tokenizer_sha256);
void tokens_append(TokenWriter *w, const uint16_t *ids, size_t n);
/* mask[i]: 1 when ids[i] counts as a target, 0 when not (any other value counts as 1) */
void tokens_append_masked(TokenWriter *w, const uint16_t *ids, const uint8_t *mask, size_t n);
uint64_t tokens_written(const TokenWriter *w);
void tokens_finish(TokenWriter *w); /* header (and mask plane), fsync, rename; frees w */
void tokens_abort(TokenWriter *w);  /* removes the temp files; frees w */

#endif
