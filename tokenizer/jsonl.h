/* jsonl: streams a JSON-lines file of {"text": ...} documents (jsonl_next), or of any JSON
 * lines whose shape the worker checks itself (jsonl_next_json), through worker threads in
 * bounded memory. The file is cut into chunks of whole lines (a few MB each); workers
 * parse and process chunks in any order, and the calling thread consumes the results in
 * file order, so what is written never depends on the number of threads. Bad lines
 * (invalid JSON, no "text" string) are reported with their line number: --strict stops at
 * the first, otherwise they are skipped and counted. Blank lines are ignored. */
#ifndef MMC_JSONL_H
#define MMC_JSONL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct BadLine {
    uint64_t line;
    char *message;
} BadLine;

typedef struct JsonlChunk {
    uint64_t first_line; /* 1-based line number of data[0] */
    char *data;
    size_t len;
    uint64_t lines;
    BadLine *bad;
    int n_bad, cap_bad;
    void *result;        /* what the worker made, for consume; freed by consume */
    int state;
} JsonlChunk;

/* A worker's walk over the documents of a chunk. */
typedef struct JsonlCursor {
    size_t pos;
    uint64_t line;
    void *doc; /* the parsed line holding the current text */
} JsonlCursor;

/* The next document's text (valid UTF-8, may hold NULs) and line; false at the chunk's
 * end. Bad lines are recorded in the chunk on the way. */
bool jsonl_next(JsonlChunk *c, JsonlCursor *cur, const char **text, size_t *len, uint64_t *line);

/* The next non-blank line parsed as JSON, any value: the worker checks its shape and
 * records what is wrong with jsonl_bad. Also the line's bytes (without its line end) and
 * number; false at the chunk's end. Invalid JSON is recorded as a bad line on the way. The
 * value lives until the next call. */
struct json_t;
bool jsonl_next_json(JsonlChunk *c, JsonlCursor *cur, struct json_t **root, const char **bytes, size_t *len,
                     uint64_t *line);
/* Records a bad line of the chunk (reported as FILE:LINE: message, or stopping --strict). */
void jsonl_bad(JsonlChunk *c, uint64_t line, const char *fmt, ...) MMC_PRINTF(3, 4);

typedef struct JsonlJob {
    const char *path;    /* the file, or NULL to read mem */
    const char *mem;
    size_t mem_len;
    const char *label;   /* progress line: "mmc data" */
    int threads;
    bool strict, quiet;
    void *ctx;
    void *(*worker_new)(void *ctx);             /* per-thread state */
    void (*worker_free)(void *ctx, void *state);
    void (*work)(void *ctx, void *state, JsonlChunk *c);
    void (*consume)(void *ctx, JsonlChunk *c);  /* on the calling thread, in file order */
    void (*abort)(void *ctx);                   /* before dying on a bad line: drop partial output */
} JsonlJob;

typedef struct JsonlStats {
    uint64_t bytes, lines, bad, first_bad;
    double seconds;
} JsonlStats;

JsonlStats jsonl_run(const JsonlJob *job);
/* Parses one line; returns 1 with its text, 0 for a blank line, -1 with a message. The
 * text lives until jsonl_text_free(*doc). */
int jsonl_line_text(const char *line, size_t len, const char **text, size_t *text_len, void **doc, char *err, size_t err_size);
void jsonl_text_free(void *doc);
int default_threads(void);

#endif
