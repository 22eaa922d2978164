/* util: see util.h. */
#include "util.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- errors */

static die_hook_fn die_hook;

void set_die_hook(die_hook_fn hook) { die_hook = hook; }

/* Files being written under a temporary name: an error on the way removes them, so that a
 * failed write (a full disk, a bad input line) leaves nothing half-made behind. */
enum { MAX_TEMP_FILES = 16 };
static char *temp_files[MAX_TEMP_FILES];

void temp_file_begin(const char *path) {
    for (int i = 0; i < MAX_TEMP_FILES; i++)
        if (!temp_files[i]) {
            temp_files[i] = xstrdup(path);
            return;
        }
}

void temp_file_end(const char *path) {
    for (int i = 0; i < MAX_TEMP_FILES; i++)
        if (temp_files[i] && !strcmp(temp_files[i], path)) {
            free(temp_files[i]);
            temp_files[i] = NULL;
        }
}

static void remove_temp_files(void) {
    for (int i = 0; i < MAX_TEMP_FILES; i++)
        if (temp_files[i]) {
            unlink(temp_files[i]);
            free(temp_files[i]);
            temp_files[i] = NULL;
        }
}

static MMC_NORETURN void die_v(const char *where, const char *fmt, va_list ap) {
    StrBuf b = {0};
    sb_append(&b, "mmc: ");
    if (where && *where) {
        sb_append(&b, where);
        sb_append(&b, ": ");
    }
    sb_vprintf(&b, fmt, ap);
    remove_temp_files();
    if (die_hook) die_hook(b.s); /* may longjmp */
    fprintf(stderr, "%s\n", b.s);
    exit(1);
}

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    die_v(NULL, fmt, ap);
}

void die_at(const char *where, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    die_v(where, fmt, ap);
}

const char *fmt_double(char buf[32], double v) {
    for (int precision = 6; precision <= 17; precision++) {
        snprintf(buf, 32, "%.*g", precision, v);
        if (strtod(buf, NULL) == v) break;
    }
    return buf;
}

/* ---- memory */

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory allocating %zu bytes", n);
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) die("out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) die("out of memory allocating %zu bytes", n);
    return p;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

char *xstrndup(const char *s, size_t n) {
    char *d = xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *xasprintf(const char *fmt, ...) {
    StrBuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    if (!b.s) return xstrdup("");
    return b.s;
}

/* ---- strings */

static void sb_reserve(StrBuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
}

void sb_appendn(StrBuf *b, const char *s, size_t n) {
    sb_reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void sb_append(StrBuf *b, const char *s) { sb_appendn(b, s, strlen(s)); }

void sb_vprintf(StrBuf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) die("bad format string '%s'", fmt);
    sb_reserve(b, (size_t)n);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void sb_printf(StrBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void sb_free(StrBuf *b) {
    free(b->s);
    *b = (StrBuf){0};
}

/* ---- files */

char *try_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    StrBuf b = {0};
    char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) sb_appendn(&b, chunk, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) die("%s: read error", path);
    if (!b.s) b.s = xstrdup("");
    if (len) *len = b.len;
    return b.s;
}

char *read_file(const char *path, size_t *len) {
    char *s = try_read_file(path, len);
    if (!s) die("%s: cannot open: %s", path, strerror(errno));
    return s;
}

void make_dirs(const char *path) {
    /* "" names no folder, and a file where the folder should be would fail later in a
     * stranger place: both are refused here */
    if (!path[0]) die("an empty path names no folder");
    char *p = xstrdup(path);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/' || c[-1] == '/') continue;
        *c = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) die("%s: cannot create folder: %s", p, strerror(errno));
        *c = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) die("%s: cannot create folder: %s", p, strerror(errno));
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) die("%s: exists and is not a folder", p);
    free(p);
}

char *path_dirname(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".");
    if (slash == path) return xstrdup("/");
    return xstrndup(path, (size_t)(slash - path));
}

char *path_join(const char *dir, const char *name) {
    if (name[0] == '/' || !dir || !*dir || strcmp(dir, ".") == 0) return xstrdup(name);
    size_t n = strlen(dir);
    return xasprintf("%s%s%s", dir, dir[n - 1] == '/' ? "" : "/", name);
}

void write_file_atomic(const char *path, const void *data, size_t len) {
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("%s: cannot create: %s", tmp, strerror(errno));
    temp_file_begin(tmp);
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            die("%s: write failed: %s", tmp, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        die("%s: cannot flush: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        die("%s: cannot rename to %s: %s", tmp, path, strerror(e));
    }
    temp_file_end(tmp);
    char *dir = path_dirname(path);
    int dfd = open(dir, O_RDONLY);
    if (dfd >= 0) {
        fsync(dfd); /* makes the rename itself durable */
        close(dfd);
    }
    free(dir);
    free(tmp);
}

/* ---- SHA-256 (FIPS 180-4) */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(Sha256 *c, const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3];
    uint32_t e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g, g = f, f = e, e = d + t1, d = cc, cc = b, b = a, a = t1 + t2;
    }
    c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
    c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

void sha256_init(Sha256 *c) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->bytes = 0;
    c->fill = 0;
}

void sha256_update(Sha256 *c, const void *data, size_t len) {
    const uint8_t *p = data;
    c->bytes += len;
    while (len > 0) {
        size_t take = 64 - c->fill < len ? 64 - c->fill : len;
        memcpy(c->block + c->fill, p, take);
        c->fill += take, p += take, len -= take;
        if (c->fill == 64) {
            sha256_block(c, c->block);
            c->fill = 0;
        }
    }
}

void sha256_hex(Sha256 *c, char out[65]) {
    uint64_t bits = c->bytes * 8;
    uint8_t pad = 0x80;
    sha256_update(c, &pad, 1);
    uint8_t zero = 0;
    while (c->fill != 56) sha256_update(c, &zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, len, 8);
    for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", c->h[i]);
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* edit distance of two words, for "did you mean" (longer words are never near) */
static int edit_distance(const char *a, const char *b) {
    int n = (int)strlen(b), row[64];
    if (n > 62 || strlen(a) > 62) return 99;
    for (int j = 0; j <= n; j++) row[j] = j;
    for (int i = 1; a[i - 1]; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= n; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up, row[j] = best;
        }
    }
    return row[n];
}

const char *nearest_word(const char *word, const char *const *choices) {
    const char *best = NULL;
    int best_d = 3;
    for (int i = 0; choices[i]; i++) {
        int d = edit_distance(word, choices[i]);
        if (d < best_d) best_d = d, best = choices[i];
    }
    return best;
}

int word_index(const char *const *words, const char *word) {
    for (int i = 0; words[i]; i++)
        if (strcmp(words[i], word) == 0) return i;
    return -1;
}

char *word_list(const char *const *words) {
    StrBuf b = {0};
    sb_append(&b, "");
    for (int i = 0; words[i]; i++) sb_printf(&b, "%s%s", i == 0 ? "" : words[i + 1] ? ", " : " or ", words[i]);
    return b.s;
}

void die_unknown_option(const char *cmd, const char *opt, const char *const *known) {
    const char *near = nearest_word(opt, known);
    if (near) die("%s: unknown option %s; did you mean %s?", cmd, opt, near);
    die("%s: unknown option %s (mmc %s --help lists them)", cmd, opt, cmd);
}

int64_t option_range(const char *cmd, const char *opt, const char *v, int64_t min, int64_t max) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || end == v || errno == ERANGE || x < min || x > max) {
        if (max == INT32_MAX || max == INT64_MAX)
            die("%s: %s needs %s integer up to %lld, got '%s'", cmd, opt,
                min == 1 ? "a positive" : min == 0 ? "a non-negative" : "an", (long long)max, v);
        die("%s: %s needs an integer from %lld to %lld, got '%s'", cmd, opt, (long long)min, (long long)max, v);
    }
    return x;
}

int64_t option_int(const char *cmd, const char *opt, const char *v, int64_t min) {
    return option_range(cmd, opt, v, min, INT32_MAX);
}

double option_double(const char *cmd, const char *opt, const char *v) {
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !isfinite(x)) die("%s: %s needs a number, got '%s'", cmd, opt, v);
    return x;
}
