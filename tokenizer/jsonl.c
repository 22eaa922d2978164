/* jsonl: see jsonl.h. One reader (the calling thread) cuts the input into chunks at line
 * ends, a fixed pool of workers processes them, and the calling thread consumes them in
 * order; at most 2 x threads + 2 chunks are alive at once, which bounds memory whatever
 * the file size (a single line longer than a chunk makes its chunk grow to hold it). */
#include "jsonl.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "progress.h"
#include "util.h"

enum { CHUNK_BYTES = 4 << 20, WARN_BAD_LINES = 10 };
enum { QUEUED, WORKING, DONE };

int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

/* ---- one line */

/* A line as JSON: 1 with its value, 0 for a blank line, -1 with a message. *len loses a CR
 * line end. */
static int parse_line(const char *line, size_t *len, json_t **root, char *err, size_t err_size) {
    *root = NULL;
    if (*len && line[*len - 1] == '\r') (*len)--; /* CRLF files */
    size_t i = 0;
    while (i < *len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) i++;
    if (i == *len) return 0;
    json_error_t e;
    *root = json_loadb(line, *len, JSON_ALLOW_NUL, &e);
    if (!*root) {
        snprintf(err, err_size, "invalid JSON at column %d: %s", e.column, e.text);
        return -1;
    }
    return 1;
}

int jsonl_line_text(const char *line, size_t len, const char **text, size_t *text_len, void **doc, char *err, size_t err_size) {
    *doc = NULL;
    json_t *root;
    int r = parse_line(line, &len, &root, err, err_size);
    if (r <= 0) return r;
    json_t *t = json_is_object(root) ? json_object_get(root, "text") : NULL;
    if (!json_is_string(t)) {
        snprintf(err, err_size, "%s", !json_is_object(root) ? "not a JSON object" : t ? "\"text\" is not a string" : "no \"text\" in the object");
        json_decref(root);
        return -1;
    }
    *text = json_string_value(t);
    *text_len = json_string_length(t);
    *doc = root;
    return 1;
}

void jsonl_text_free(void *doc) {
    if (doc) json_decref(doc);
}

/* The cursor's next line of the chunk (its bytes without the newline, and its number), the
 * document the previous one held released; false at the chunk's end. */
static bool next_line(JsonlChunk *c, JsonlCursor *cur, const char **start, size_t *n, uint64_t *at) {
    jsonl_text_free(cur->doc);
    cur->doc = NULL;
    if (!cur->line) cur->line = c->first_line;
    if (cur->pos >= c->len) return false;
    *start = c->data + cur->pos;
    const char *nl = memchr(*start, '\n', c->len - cur->pos);
    *n = nl ? (size_t)(nl - *start) : c->len - cur->pos;
    *at = cur->line++;
    cur->pos += *n + (nl != NULL);
    return true;
}

bool jsonl_next(JsonlChunk *c, JsonlCursor *cur, const char **text, size_t *len, uint64_t *line) {
    const char *start;
    size_t n;
    uint64_t at;
    while (next_line(c, cur, &start, &n, &at)) {
        char err[256];
        int r = jsonl_line_text(start, n, text, len, &cur->doc, err, sizeof err);
        if (r > 0) {
            *line = at;
            return true;
        }
        if (r < 0) jsonl_bad(c, at, "%s", err);
    }
    return false;
}

bool jsonl_next_json(JsonlChunk *c, JsonlCursor *cur, json_t **root, const char **bytes, size_t *len, uint64_t *line) {
    const char *start;
    size_t n;
    uint64_t at;
    while (next_line(c, cur, &start, &n, &at)) {
        char err[256];
        json_t *value;
        int r = parse_line(start, &n, &value, err, sizeof err);
        if (r > 0) {
            cur->doc = value;
            *root = value, *bytes = start, *len = n, *line = at;
            return true;
        }
        if (r < 0) jsonl_bad(c, at, "%s", err);
    }
    return false;
}

void jsonl_bad(JsonlChunk *c, uint64_t line, const char *fmt, ...) {
    StrBuf m = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&m, fmt, ap);
    va_end(ap);
    BadLine b = {line, m.s ? m.s : xstrdup("")};
    vec_push(c->bad, c->n_bad, c->cap_bad, b);
}

/* ---- reading chunks */

typedef struct Reader {
    int fd;            /* -1: reading mem */
    const char *mem;
    size_t mem_len, mem_pos;
    char *carry;       /* the start of a line the last chunk did not end */
    size_t carry_len;
    uint64_t line;     /* number of the next chunk's first line */
    bool eof, started;
} Reader;

static size_t fill(Reader *r, char *dst, size_t want, const char *name) {
    if (r->fd < 0) {
        size_t n = r->mem_len - r->mem_pos < want ? r->mem_len - r->mem_pos : want;
        memcpy(dst, r->mem + r->mem_pos, n);
        r->mem_pos += n;
        return n;
    }
    for (;;) {
        ssize_t n = read(r->fd, dst, want);
        if (n >= 0) return (size_t)n;
        if (errno != EINTR) die("%s: read error: %s", name, strerror(errno));
    }
}

static JsonlChunk *read_chunk(Reader *r, const char *name) {
    if (r->eof && !r->carry_len) return NULL;
    size_t cap = CHUNK_BYTES > 2 * r->carry_len ? CHUNK_BYTES : 2 * r->carry_len, len = r->carry_len;
    char *buf = xmalloc(cap);
    if (len) memcpy(buf, r->carry, len);
    size_t scanned = 0; /* bytes already known to hold no newline */
    for (;;) {
        while (!r->eof && len < cap) {
            size_t n = fill(r, buf + len, cap - len, name);
            if (!n) r->eof = true;
            len += n;
        }
        if (!r->started && len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) { /* a UTF-8 byte order mark */
            memmove(buf, buf + 3, len - 3);
            len -= 3;
        }
        r->started = true;
        char *nl = NULL;
        for (size_t i = len; i > scanned; i--)
            if (buf[i - 1] == '\n') {
                nl = buf + i - 1;
                break;
            }
        if (nl || r->eof) {
            size_t keep = nl ? (size_t)(nl - buf) + 1 : len;
            free(r->carry);
            r->carry_len = len - keep;
            r->carry = r->carry_len ? xstrndup(buf + keep, r->carry_len) : NULL;
            if (!keep) {
                free(buf);
                return NULL;
            }
            JsonlChunk *c = xcalloc(1, sizeof *c);
            c->data = buf, c->len = keep, c->first_line = r->line;
            for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + keep - p))); p++) c->lines++;
            if (buf[keep - 1] != '\n') c->lines++;
            r->line += c->lines;
            return c;
        }
        scanned = len; /* one line longer than the buffer: grow it */
        cap *= 2;
        buf = xrealloc(buf, cap);
    }
}

/* ---- the worker pool */

typedef struct Pool {
    const JsonlJob *job;
    pthread_mutex_t lock;
    pthread_cond_t work_ready, work_done;
    JsonlChunk **ring;
    size_t depth;
    uint64_t queued, taken; /* chunks put in the ring, chunks taken by workers */
    bool stop;
} Pool;

static void *worker_main(void *arg) {
    Pool *p = arg;
    void *state = p->job->worker_new ? p->job->worker_new(p->job->ctx) : NULL;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->taken == p->queued) pthread_cond_wait(&p->work_ready, &p->lock);
        if (p->taken == p->queued) break;
        JsonlChunk *c = p->ring[p->taken++ % p->depth];
        c->state = WORKING;
        pthread_mutex_unlock(&p->lock);
        p->job->work(p->job->ctx, state, c);
        pthread_mutex_lock(&p->lock);
        c->state = DONE;
        pthread_cond_broadcast(&p->work_done);
    }
    pthread_mutex_unlock(&p->lock);
    if (p->job->worker_free) p->job->worker_free(p->job->ctx, state);
    return NULL;
}

static void report_bad(const JsonlJob *job, const char *name, JsonlChunk *c, JsonlStats *st) {
    for (int i = 0; i < c->n_bad; i++) {
        char *where = xasprintf("%s:%llu", name, (unsigned long long)c->bad[i].line);
        if (job->strict) {
            if (job->abort) job->abort(job->ctx);
            die_at(where, "%s (--strict stops at the first bad line)", c->bad[i].message);
        }
        if (!st->bad) st->first_bad = c->bad[i].line;
        if (++st->bad <= WARN_BAD_LINES)
            fprintf(stderr, "%smmc: warning: %s: %s (line skipped)\n", isatty(2) ? "\r" : "", where, c->bad[i].message);
        free(where);
        free(c->bad[i].message);
    }
    free(c->bad);
}

JsonlStats jsonl_run(const JsonlJob *job) {
    const char *name = job->path ? job->path : "(built-in corpus)";
    Reader r = {-1, job->mem, job->mem_len, 0, NULL, 0, 1, false, false};
    uint64_t total = job->mem_len;
    if (job->path) {
        r.fd = strcmp(job->path, "-") == 0 ? 0 : open(job->path, O_RDONLY);
        if (r.fd < 0) die("%s: cannot open: %s", job->path, strerror(errno));
        struct stat st;
        total = fstat(r.fd, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    }
    int threads = job->threads > 0 ? job->threads : default_threads();
    json_object_seed(0); /* jansson's one global, set before the workers parse in parallel */
    Pool p = {.job = job, .depth = 2 * (size_t)threads + 2};
    p.ring = xcalloc(p.depth, sizeof *p.ring);
    pthread_mutex_init(&p.lock, NULL);
    pthread_cond_init(&p.work_ready, NULL);
    pthread_cond_init(&p.work_done, NULL);
    pthread_t *tids = xcalloc((size_t)threads, sizeof *tids);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tids[i], NULL, worker_main, &p) != 0) die("cannot start worker thread %d", i);

    Progress prog;
    progress_start(&prog, job->label, total, job->quiet);
    JsonlStats st = {0};
    uint64_t consumed = 0;
    bool eof = false;
    for (;;) {
        while (!eof && p.queued - consumed < p.depth) {
            JsonlChunk *c = read_chunk(&r, name);
            if (!c) {
                eof = true;
                break;
            }
            pthread_mutex_lock(&p.lock);
            c->state = QUEUED;
            p.ring[p.queued++ % p.depth] = c;
            pthread_cond_signal(&p.work_ready);
            pthread_mutex_unlock(&p.lock);
        }
        if (consumed == p.queued) break;
        JsonlChunk *c = p.ring[consumed % p.depth];
        pthread_mutex_lock(&p.lock);
        while (c->state != DONE) pthread_cond_wait(&p.work_done, &p.lock);
        pthread_mutex_unlock(&p.lock);
        report_bad(job, name, c, &st);
        st.bytes += c->len;
        st.lines += c->lines;
        job->consume(job->ctx, c);
        free(c->data);
        free(c);
        consumed++;
        progress_update(&prog, st.bytes, st.lines);
    }
    pthread_mutex_lock(&p.lock);
    p.stop = true;
    pthread_cond_broadcast(&p.work_ready);
    pthread_mutex_unlock(&p.lock);
    for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    progress_finish(&prog, st.bytes, st.lines);
    st.seconds = now_seconds() - prog.start;
    if (r.fd > 0) close(r.fd);
    free(r.carry);
    free(tids);
    free(p.ring);
    return st;
}
