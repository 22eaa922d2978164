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

/* the version 2 fields: flags, reserved bytes, and where the mask plane lies; sets f->mask */
static void open_v2(TokenFile *f, const unsigned char *h, size_t bytes) {
    const char *path = f->path;
    uint32_t flags = get_u32(h + 64);
    if (flags & ~(uint32_t)TOKENS_FLAG_MASK)
        refuse(f, "%s: byte 64: unknown flags 0x%x (this mmc knows bit 0, the loss mask; a newer mmc wrote the file?)", path,
               flags & ~(uint32_t)TOKENS_FLAG_MASK);
    if (get_u32(h + 68)) refuse(f, "%s: byte 68: reserved field is %u, not 0", path, get_u32(h + 68));
    for (int i = 80; i < TOKENS_HEADER_BYTES_V2; i++)
        if (h[i]) refuse(f, "%s: byte %d: reserved header byte is %u, not 0", path, i, h[i]);
    uint64_t mask_at = get_u64(h + 72), id_bytes = bytes - TOKENS_HEADER_BYTES_V2;
    if (!(flags & TOKENS_FLAG_MASK)) {
        if (mask_at) refuse(f, "%s: byte 72: a mask plane at byte %llu, but the flags (byte 64) say there is none", path,
                            (unsigned long long)mask_at);
        if (f->count != id_bytes / 2 || id_bytes % 2)
            refuse(f, "%s: byte 16: header says %llu tokens but the file holds %zu bytes of tokens", path,
                   (unsigned long long)f->count, (size_t)id_bytes);
        return;
    }
    /* ids, zero bytes up to a multiple of 8, then one bit a token, and nothing after it */
    if (f->count > id_bytes / 2)
        refuse(f, "%s: byte 16: header says %llu tokens but the file holds %zu bytes after the header", path,
               (unsigned long long)f->count, (size_t)id_bytes);
    uint64_t ids_end = TOKENS_HEADER_BYTES_V2 + 2 * f->count, want_at = (ids_end + 7) & ~(uint64_t)7;
    uint64_t mask_len = (f->count + 7) / 8;
    if (mask_at != want_at)
        refuse(f, "%s: byte 72: mask plane at byte %llu, but the %llu tokens end at byte %llu, so it starts at byte %llu", path,
               (unsigned long long)mask_at, (unsigned long long)f->count, (unsigned long long)ids_end,
               (unsigned long long)want_at);
    if (mask_at + mask_len != bytes)
        refuse(f, "%s: byte %llu: the mask plane of %llu tokens is %llu bytes, but the file %s byte %zu", path,
               (unsigned long long)mask_at, (unsigned long long)f->count, (unsigned long long)mask_len,
               mask_at + mask_len > bytes ? "is truncated: it ends at" : "goes on to", bytes);
    for (uint64_t i = ids_end; i < mask_at; i++)
        if (h[i]) refuse(f, "%s: byte %llu: the padding before the mask plane is not zero", path, (unsigned long long)i);
    f->mask = h + mask_at;
    if (f->count % 8 && f->mask[mask_len - 1] >> (f->count % 8))
        refuse(f, "%s: byte %llu: mask bits past the last token are set", path, (unsigned long long)(mask_at + mask_len - 1));
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
    if (version != TOKENS_VERSION && version != TOKENS_VERSION_V2)
        refuse(f, "%s: byte 8: format version %u, this mmc reads %d and %d", path, version, TOKENS_VERSION, TOKENS_VERSION_V2);
    if (version == TOKENS_VERSION_V2 && bytes < TOKENS_HEADER_BYTES_V2)
        refuse(f, "%s: not a token file (%zu bytes, a version 2 header alone is %d)", path, bytes, TOKENS_HEADER_BYTES_V2);
    size_t header = version == TOKENS_VERSION ? TOKENS_HEADER_BYTES : TOKENS_HEADER_BYTES_V2;
    f->version = version;
    f->vocab = get_u32(h + 12);
    f->count = get_u64(h + 16);
    f->row_length = get_u32(h + 24);
    f->pad_id = get_u32(h + 28);
    int known = 0;
    for (int i = 0; i < 32; i++) known |= h[32 + i];
    for (int i = 0; i < 32 && known; i++) snprintf(f->tokenizer_sha256 + 2 * i, 3, "%02x", h[32 + i]);
    f->ids = (const uint16_t *)(h + header);
    if (f->vocab == 0 || f->vocab > 65536) refuse(f, "%s: byte 12: vocab size %u (1..65536)", path, f->vocab);
    if (version == TOKENS_VERSION_V2) open_v2(f, h, bytes);
    else if (f->count != (bytes - TOKENS_HEADER_BYTES) / 2 || (bytes - TOKENS_HEADER_BYTES) % 2)
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
            refuse(f, "%s: byte %llu: token id %u is >= %s %u", path, (unsigned long long)(header + 2 * i),
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
    /* a masked writer: the mask plane goes to its own temp file as it fills (a byte per 8
     * tokens, the byte being filled held here), and is copied after the ids at the end */
    bool masked;
    char *mask_tmp;
    FILE *mask_f;
    unsigned char mask_byte;
};

static TokenWriter *create(const char *path, uint32_t vocab, uint32_t row_length, uint32_t pad_id,
                           const char *tokenizer_sha256, bool masked) {
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
    w->masked = masked;
    if (masked) {
        w->mask_tmp = xasprintf("%s.mask.tmp.%ld", path, (long)getpid());
        w->mask_f = fopen(w->mask_tmp, "w+b");
        if (!w->mask_f) die("%s: cannot create: %s", w->mask_tmp, strerror(errno));
        temp_file_begin(w->mask_tmp);
    }
    unsigned char zero[TOKENS_HEADER_BYTES_V2] = {0};
    size_t header = masked ? TOKENS_HEADER_BYTES_V2 : TOKENS_HEADER_BYTES;
    if (fwrite(zero, 1, header, w->f) != header) die("%s: write failed", w->tmp);
    return w;
}

TokenWriter *tokens_create(const char *path, uint32_t vocab, uint32_t row_length, uint32_t pad_id,
                           const char *tokenizer_sha256) {
    return create(path, vocab, row_length, pad_id, tokenizer_sha256, false);
}

TokenWriter *tokens_create_masked(const char *path, uint32_t vocab, uint32_t row_length, uint32_t pad_id,
                                  const char *tokenizer_sha256) {
    return create(path, vocab, row_length, pad_id, tokenizer_sha256, true);
}

static void append_ids(TokenWriter *w, const uint16_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= w->vocab) die("%s: token id %u is >= the vocab size %u", w->path, ids[i], w->vocab);
    unsigned char buf[8192];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; i < n && k + 2 <= sizeof buf; i++, k += 2) buf[k] = (unsigned char)ids[i], buf[k + 1] = (unsigned char)(ids[i] >> 8);
        if (fwrite(buf, 1, k, w->f) != k) die("%s: write failed: %s", w->tmp, strerror(errno));
    }
}

void tokens_append(TokenWriter *w, const uint16_t *ids, size_t n) {
    if (w->masked) die("internal error: %s has a loss mask: append with tokens_append_masked", w->path);
    append_ids(w, ids, n);
    w->count += n;
}

void tokens_append_masked(TokenWriter *w, const uint16_t *ids, const uint8_t *mask, size_t n) {
    if (!w->masked) die("internal error: %s has no loss mask (made by tokens_create)", w->path);
    append_ids(w, ids, n);
    unsigned char buf[8192];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t at = w->count + i;
        if (mask[i]) w->mask_byte |= (unsigned char)(1u << (at & 7));
        if ((at & 7) == 7) {
            buf[k++] = w->mask_byte;
            w->mask_byte = 0;
            if (k == sizeof buf) {
                if (fwrite(buf, 1, k, w->mask_f) != k) die("%s: write failed: %s", w->mask_tmp, strerror(errno));
                k = 0;
            }
        }
    }
    if (k && fwrite(buf, 1, k, w->mask_f) != k) die("%s: write failed: %s", w->mask_tmp, strerror(errno));
    w->count += n;
}

uint64_t tokens_written(const TokenWriter *w) { return w->count; }

/* after the ids: zeros to a multiple of 8, then the mask plane from its temp file; returns
 * the plane's offset */
static uint64_t write_mask_plane(TokenWriter *w) {
    if (w->count % 8 && fwrite(&w->mask_byte, 1, 1, w->mask_f) != 1) die("%s: write failed: %s", w->mask_tmp, strerror(errno));
    uint64_t ids_end = TOKENS_HEADER_BYTES_V2 + 2 * w->count, at = (ids_end + 7) & ~(uint64_t)7;
    unsigned char buf[65536] = {0};
    if (fwrite(buf, 1, (size_t)(at - ids_end), w->f) != at - ids_end) die("%s: write failed: %s", w->tmp, strerror(errno));
    if (fflush(w->mask_f) != 0 || fseek(w->mask_f, 0, SEEK_SET) != 0) die("%s: cannot read back: %s", w->mask_tmp, strerror(errno));
    uint64_t copied = 0;
    for (size_t n; (n = fread(buf, 1, sizeof buf, w->mask_f)) > 0; copied += n)
        if (fwrite(buf, 1, n, w->f) != n) die("%s: write failed: %s", w->tmp, strerror(errno));
    if (ferror(w->mask_f) || copied != (w->count + 7) / 8)
        die("%s: read back %llu bytes of a %llu-byte mask plane", w->mask_tmp, (unsigned long long)copied,
            (unsigned long long)((w->count + 7) / 8));
    return at;
}

static void drop_mask_tmp(TokenWriter *w) {
    if (!w->masked) return;
    fclose(w->mask_f);
    unlink(w->mask_tmp);
    temp_file_end(w->mask_tmp);
    free(w->mask_tmp);
}

void tokens_finish(TokenWriter *w) {
    if (w->row_length && w->count % w->row_length) die("%s: %llu tokens are not whole rows of %u", w->path,
                                                       (unsigned long long)w->count, w->row_length);
    unsigned char h[TOKENS_HEADER_BYTES_V2] = {0};
    memcpy(h, magic, 8);
    put_u32(h + 8, w->masked ? TOKENS_VERSION_V2 : TOKENS_VERSION);
    put_u32(h + 12, w->vocab);
    put_u64(h + 16, w->count);
    put_u32(h + 24, w->row_length);
    put_u32(h + 28, w->pad_id);
    memcpy(h + 32, w->tokenizer_sha, 32);
    if (w->masked) {
        put_u32(h + 64, TOKENS_FLAG_MASK);
        put_u64(h + 72, write_mask_plane(w));
    }
    size_t header = w->masked ? TOKENS_HEADER_BYTES_V2 : TOKENS_HEADER_BYTES;
    if (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(h, 1, header, w->f) != header || fflush(w->f) != 0 ||
        fsync(fileno(w->f)) != 0)
        die("%s: write failed: %s", w->tmp, strerror(errno));
    fclose(w->f);
    if (rename(w->tmp, w->path) != 0) die("%s: cannot rename to %s: %s", w->tmp, w->path, strerror(errno));
    temp_file_end(w->tmp);
    drop_mask_tmp(w);
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
    drop_mask_tmp(w);
    free(w->path), free(w->tmp), free(w);
}

/* `mmc tokens` on a masked file: the share of targets (every token but the first of its
 * row) left out of the loss, and the rows where none counts */
static void print_mask_summary(const TokenFile *f) {
    uint64_t row = f->row_length ? f->row_length : f->count, targets = 0, counted = 0, empty_rows = 0;
    bool any = false;
    for (uint64_t i = 0; i < f->count; i++) {
        if (i % row == 0) {
            if (i && !any) empty_rows++;
            any = false;
            continue;
        }
        targets++;
        if (tokens_counts(f, i)) counted++, any = true;
    }
    if (f->count && !any) empty_rows++;
    printf("loss mask: %.1f%% of %llu targets masked out (%llu count)", targets ? 100.0 * (double)(targets - counted) / (double)targets : 0.0,
           (unsigned long long)targets, (unsigned long long)counted);
    if (f->row_length) printf(", %llu rows with no counted target", (unsigned long long)empty_rows);
    putchar('\n');
}

int cmd_tokens(int argc, char **argv) {
    if (argc != 2) die("tokens: usage: mmc tokens FILE");
    TokenFile *f = tokens_open(argv[1], 0);
    printf("%s: %llu tokens, vocab %u, pad id %u, ", f->path, (unsigned long long)f->count, f->vocab, f->pad_id);
    if (f->row_length)
        printf("%llu rows of %u (seq %u)\n", (unsigned long long)(f->count / f->row_length), f->row_length, f->row_length - 1);
    else printf("a plain stream (rows cut by the reader)\n");
    if (f->tokenizer_sha256[0]) printf("made with the tokenizer of sha256 %s\n", f->tokenizer_sha256);
    if (f->mask) print_mask_summary(f);
    tokens_close(f);
    return 0;
}

void tokens_sha256(const TokenFile *f, char out[65]) {
    Sha256 h;
    sha256_init(&h);
    sha256_update(&h, f->map.p, f->map.bytes);
    sha256_hex(&h, out);
}
