/* tokens: mmc's token files. Layout (little-endian), 64-byte header then the tokens:
 *   0  char[8]  magic "mmctoken"
 *   8  u32      format version (1)
 *  12  u32      vocab size: every token id is below it
 *  16  u64      token count
 *  24  u32      row length: tokens per training row (seq + 1: inputs are its first seq tokens,
 *               targets its last seq), or 0 for a plain stream cut into rows by the reader
 *  28  u32      pad id: targets equal to it are left out of the loss
 *  32  u8[32]   SHA-256 of the tokenizer.json that made the file, or zero when unknown
 *  64  u16[count] the token ids
 * Readers map the file and check every id once, so a bad id is reported with its byte
 * offset before any training starts. Writers stream to a temp file that is fsynced and
 * renamed into place when complete. */
#ifndef MMC_TOKENS_H
#define MMC_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "filemap.h"

enum { TOKENS_HEADER_BYTES = 64, TOKENS_VERSION = 1 };

typedef struct TokenFile {
    char *path;
    uint32_t vocab, row_length, pad_id;
    uint64_t count;
    const uint16_t *ids;
    char tokenizer_sha256[65]; /* hex, "" when the file does not say */
    FileMap map;
} TokenFile;

/* Dies with file, byte offset and id if an id is >= the file's vocab or >= model_vocab
 * (0: no model limit), or if the header is malformed (a pad id at or above the vocab size
 * too), or if the path is not a regular file (a FIFO would block for ever). */
TokenFile *tokens_open(const char *path, uint32_t model_vocab);
void tokens_close(TokenFile *f);
/* SHA-256 of the whole file, header included (what a run records of its data) */
void tokens_sha256(const TokenFile *f, char out[65]);

typedef struct TokenWriter TokenWriter;
/* tokenizer_sha256: the hex SHA-256 of the tokenizer.json the ids come from, or NULL */
TokenWriter *tokens_create(const char *path, uint32_t vocab, uint32_t row_length, uint32_t pad_id,
                           const char *tokenizer_sha256);
void tokens_append(TokenWriter *w, const uint16_t *ids, size_t n);
uint64_t tokens_written(const TokenWriter *w);
void tokens_finish(TokenWriter *w); /* header, fsync, rename; frees w */
void tokens_abort(TokenWriter *w);  /* removes the temp file; frees w */

#endif
