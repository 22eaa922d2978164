/* util: the one error path, allocation that cannot fail silently, a growable string,
 * whole-file I/O with atomic replacement, and SHA-256 for content hashes. */
#ifndef MMC_UTIL_H
#define MMC_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define MMC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define MMC_NORETURN __attribute__((noreturn))
#else
#define MMC_PRINTF(a, b)
#define MMC_NORETURN
#endif

/* Every fatal error goes through here: one line "mmc: <where>: <message>" on stderr, exit 1.
 * `where` is a file:line, a tensor name or NULL. Tests may install a hook that longjmps. */
MMC_NORETURN void die(const char *fmt, ...) MMC_PRINTF(1, 2);
MMC_NORETURN void die_at(const char *where, const char *fmt, ...) MMC_PRINTF(2, 3);
typedef void (*die_hook_fn)(const char *message);
void set_die_hook(die_hook_fn hook);

/* The shortest decimal that reads back as exactly v ("1e-05", not "1.0000000000000001e-05"). */
const char *fmt_double(char buf[32], double v);

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) MMC_PRINTF(1, 2);

/* Growable arrays: `T *items; int n, cap;` grown by vec_push. */
#define vec_push(items, n, cap, value)                                         \
    do {                                                                       \
        if ((n) == (cap)) {                                                    \
            (cap) = (cap) ? 2 * (cap) : 8;                                     \
            (items) = xrealloc((items), (size_t)(cap) * sizeof *(items));      \
        }                                                                      \
        (items)[(n)++] = (value);                                              \
    } while (0)

typedef struct StrBuf {
    char *s;      /* always NUL-terminated once anything was appended */
    size_t len, cap;
} StrBuf;
void sb_append(StrBuf *b, const char *s);
void sb_appendn(StrBuf *b, const char *s, size_t n);
void sb_printf(StrBuf *b, const char *fmt, ...) MMC_PRINTF(2, 3);
void sb_vprintf(StrBuf *b, const char *fmt, va_list ap);
void sb_free(StrBuf *b);

/* Reads a whole file; dies naming the path on failure. Returns a NUL-terminated buffer. */
char *read_file(const char *path, size_t *len);
/* Returns NULL instead of dying when the file cannot be opened. */
char *try_read_file(const char *path, size_t *len);
double now_seconds(void); /* a monotonic clock, for durations */
/* the choice (a NULL-terminated list) nearest to a misspelt word, within two edits; or NULL */
const char *nearest_word(const char *word, const char *const *choices);
/* the words of a NULL-terminated list for a message: "a, b or c" */
/* the position of `word` in the NULL-terminated `words`, or -1 */
int word_index(const char *const *words, const char *word);
char *word_list(const char *const *words);
/* "CMD: unknown option OPT; did you mean X?" (X from known, when one is near), and exit */
MMC_NORETURN void die_unknown_option(const char *cmd, const char *opt, const char *const *known);
/* an option's value as a whole integer in [min, max] (overflow included), or a finite number;
 * else dies naming the command and the option. option_int's max is 2^31 - 1, so the value
 * fits the int it usually goes to. */
int64_t option_range(const char *cmd, const char *opt, const char *v, int64_t min, int64_t max);
int64_t option_int(const char *cmd, const char *opt, const char *v, int64_t min);
double option_double(const char *cmd, const char *opt, const char *v);
/* A file written under a temporary name until it is renamed into place: die() removes it
 * in between (temp_file_begin), and not once it is in place (temp_file_end). */
void temp_file_begin(const char *path);
void temp_file_end(const char *path);
/* Writes to path.tmp.<pid>, fsyncs it, renames it over path and fsyncs the folder,
 * so a reader never sees a half-written file and a crash loses nothing old. */
void write_file_atomic(const char *path, const void *data, size_t len);
void make_dirs(const char *path); /* mkdir -p */
char *path_join(const char *dir, const char *name);
char *path_dirname(const char *path);

typedef struct Sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} Sha256;
void sha256_init(Sha256 *c);
void sha256_update(Sha256 *c, const void *data, size_t len);
void sha256_hex(Sha256 *c, char out[65]); /* finishes and writes lowercase hex */

#endif
