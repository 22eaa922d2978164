/* tokens: see tokens.h. Also `mmc tokens FILE`. */
#include "tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "filemap.h"
#include "util.h"

static const char magic[8] = {'m', 'm', 'c', 't', 'o', 'k', 'e', 'n'};

static uint32_t get_u32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get_u64(const unsigned char *p) { return get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }
static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

/* a refusal of the file being opened: it is closed first, so that a caller that catches die()
 * (the tests) keeps no mapping */
static MMC_NORETURN MMC_PRINTF(2, 3) void refuse(TokenFile *f, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tokens_close(f);
    die("%s", msg);
}

TokenFile *tokens_open(const char *path, uint32_t model_vocab) {
    FileMap map = filemap_open(path, "token file");
    TokenFile *f = xcalloc(1, sizeof *f);
    f->path = xstrdup(path);
    f->map = map;
    size_t bytes = map.bytes;
    if (bytes < TOKENS_HEADER_BYTES) refuse(f, "%s: not a token file (%zu bytes, the header alone is 64)", path, bytes);
    const unsigned char *h = map.p;
    if (memcmp(h, magic, 8) != 0)
        refuse(f, "%s: byte 0: bad magic (not an mmc token file; see README, \"Token files\")", path);
    uint32_t version = get_u32(h + 8);
    if (version != TOKENS_VERSION)
        refuse(f, "%s: byte 8: format version %u, this mmc reads %d", path, version, TOKENS_VERSION);
    f->vocab = get_u32(h + 12);
    f->count = get_u64(h + 16);
    f->row_length = get_u32(h + 24);
    f->pad_id = get_u32(h + 28);
    int known = 0;
    for (int i = 0; i < 32; i++) known |= h[32 + i];
    for (int i = 0; i < 32 && known; i++) snprintf(f->tokenizer_sha256 + 2 * i, 3, "%02x", h[32 + i]);
    f->ids = (const uint16_t *)(h + TOKENS_HEADER_BYTES);
    if (f->vocab == 0 || f->vocab > 65536) refuse(f, "%s: byte 12: vocab size %u (1..65536)", path, f->vocab);
    if (f->count != (bytes - TOKENS_HEADER_BYTES) / 2 || (bytes - TOKENS_HEADER_BYTES) % 2)
        refuse(f, "%s: byte 16: header says %llu tokens but the file holds %zu bytes of tokens", path,
               (unsigned long long)f->count, bytes - TOKENS_HEADER_BYTES);
    if (f->row_length == 1) refuse(f, "%s: byte 24: rows of 1 token have no target (a row is seq + 1 tokens)", path);
    if (f->row_length && f->count % f->row_length)
        refuse(f, "%s: byte 24: %llu tokens are not whole rows of %u", path, (unsigned long long)f->count, f->row_length);
    /* the pad id is the target the loss leaves out: an id no token of the file can be is a
     * header that was not written for these tokens */
    if (f->pad_id >= f->vocab) refuse(f, "%s: byte 28: pad id %u is not below the vocab size %u", path, f->pad_id, f->vocab);
    uint32_t limit = model_vocab && model_vocab < f->vocab ? model_vocab : f->vocab;
    for (uint64_t i = 0; i < f->count; i++)
        if (f->ids[i] >= limit)
            refuse(f, "%s: byte %llu: token id %u is >= %s %u", path, (unsigned long long)(TOKENS_HEADER_BYTES + 2 * i),
                   f->ids[i], limit == f->vocab ? "the file's vocab size" : "the model's vocab size", limit);
    return f;
}

void tokens_close(TokenFile *f) {
    if (!f) return;
    filemap_close(&f->map);
    free(f->path);
    free(f);
}

struct TokenWriter {
    char *path, *tmp;
    FILE *f;
    uint32_t vocab, row_length, pad_id;
    uint64_t count;
    unsigned char tokenizer_sha[32];
};

TokenWriter *tokens_create(const char *path, uint32_t vocab, uint32_t row_length, uint32_t pad_id,
                           const char *tokenizer_sha256) {
    TokenWriter *w = xcalloc(1, sizeof *w);
    for (int i = 0; tokenizer_sha256 && i < 32; i++) {
        unsigned v = 0;
        if (sscanf(tokenizer_sha256 + 2 * i, "%2x", &v) != 1) die("internal error: bad tokenizer hash %s", tokenizer_sha256);
        w->tokenizer_sha[i] = (unsigned char)v;
    }
    w->path = xstrdup(path);
    w->tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    w->f = fopen(w->tmp, "wb");
    if (!w->f) die("%s: cannot create: %s", w->tmp, strerror(errno));
    temp_file_begin(w->tmp);
    w->vocab = vocab, w->row_length = row_length, w->pad_id = pad_id;
    unsigned char zero[TOKENS_HEADER_BYTES] = {0};
    if (fwrite(zero, 1, sizeof zero, w->f) != sizeof zero) die("%s: write failed", w->tmp);
    return w;
}

void tokens_append(TokenWriter *w, const uint16_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= w->vocab) die("%s: token id %u is >= the vocab size %u", w->path, ids[i], w->vocab);
    unsigned char buf[8192];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; i < n && k + 2 <= sizeof buf; i++, k += 2) buf[k] = (unsigned char)ids[i], buf[k + 1] = (unsigned char)(ids[i] >> 8);
        if (fwrite(buf, 1, k, w->f) != k) die("%s: write failed: %s", w->tmp, strerror(errno));
    }
    w->count += n;
}

uint64_t tokens_written(const TokenWriter *w) { return w->count; }

void tokens_finish(TokenWriter *w) {
    unsigned char h[TOKENS_HEADER_BYTES] = {0};
    memcpy(h, magic, 8);
    put_u32(h + 8, TOKENS_VERSION);
    put_u32(h + 12, w->vocab);
    put_u64(h + 16, w->count);
    put_u32(h + 24, w->row_length);
    put_u32(h + 28, w->pad_id);
    memcpy(h + 32, w->tokenizer_sha, 32);
    if (w->row_length && w->count % w->row_length) die("%s: %llu tokens are not whole rows of %u", w->path,
                                                       (unsigned long long)w->count, w->row_length);
    if (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(h, 1, sizeof h, w->f) != sizeof h || fflush(w->f) != 0 ||
        fsync(fileno(w->f)) != 0)
        die("%s: write failed: %s", w->tmp, strerror(errno));
    fclose(w->f);
    if (rename(w->tmp, w->path) != 0) die("%s: cannot rename to %s: %s", w->tmp, w->path, strerror(errno));
    temp_file_end(w->tmp);
    char *dir = path_dirname(w->path);
    int dfd = open(dir, O_RDONLY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
    free(w->path), free(w->tmp), free(w);
}

void tokens_abort(TokenWriter *w) {
    fclose(w->f);
    unlink(w->tmp);
    temp_file_end(w->tmp);
    free(w->path), free(w->tmp), free(w);
}

int cmd_tokens(int argc, char **argv) {
    if (argc != 2) die("tokens: usage: mmc tokens FILE");
    TokenFile *f = tokens_open(argv[1], 0);
    printf("%s: %llu tokens, vocab %u, pad id %u, ", f->path, (unsigned long long)f->count, f->vocab, f->pad_id);
    if (f->row_length)
        printf("%llu rows of %u (seq %u)\n", (unsigned long long)(f->count / f->row_length), f->row_length, f->row_length - 1);
    else printf("a plain stream (rows cut by the reader)\n");
    if (f->tokenizer_sha256[0]) printf("made with the tokenizer of sha256 %s\n", f->tokenizer_sha256);
    tokens_close(f);
    return 0;
}

void tokens_sha256(const TokenFile *f, char out[65]) {
    Sha256 h;
    sha256_init(&h);
    sha256_update(&h, f->map.p, f->map.bytes);
    sha256_hex(&h, out);
}
