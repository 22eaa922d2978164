/* tokenizer_cli: `mmc tokenizer train|encode|decode|bench`. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bpe_train.h"
#include "cli.h"
#include "jsonl.h"
#include "progress.h"
#include "tokenizer.h"

static const char *usage_text =
    "usage: mmc tokenizer train CORPUS.jsonl|--default --vocab N -o tokenizer.json [--min-frequency N]\n"
    "                           [--special A,B,...] [--threads N] [--strict] [--quiet]\n"
    "       mmc tokenizer encode TOKENIZER TEXT... | --file PATH | --jsonl PATH  [--pieces | --pretokens]\n"
    "       mmc tokenizer decode TOKENIZER ID... | --ids FILE  [--skip-special]\n"
    "       mmc tokenizer bench TOKENIZER CORPUS.jsonl [--threads N] [--repeat N]\n"
    "TOKENIZER is a tokenizer.json path, or \"default\" for the one trained on the built-in corpus.";

static MMC_NORETURN void usage(const char *why) { die("tokenizer: %s\n%s", why, usage_text); }


/* ---- encode */

typedef enum { SHOW_IDS, SHOW_PIECES, SHOW_PRETOKENS } Show;

/* One text as a line (without the newline): ids, token texts or pre-tokens. */
static void format_encoded(EncodeState *s, const Tokenizer *t, const char *text, size_t len, Show show, IdVec *ids, StrBuf *line) {
    ids->n = 0, line->len = 0;
    if (show == SHOW_PRETOKENS) tokenizer_pretokens(s, text, len, line);
    else {
        tokenizer_encode(s, text, len, ids);
        for (size_t i = 0; i < ids->n; i++) {
            if (i) sb_appendn(line, " ", 1);
            if (show == SHOW_IDS) sb_printf(line, "%u", ids->ids[i]);
            else sb_append(line, tokenizer_token_text(t, ids->ids[i]));
        }
    }
}

static void print_encoded(EncodeState *s, const Tokenizer *t, const char *text, size_t len, Show show, IdVec *ids, StrBuf *line) {
    format_encoded(s, t, text, len, show, ids, line);
    if (line->len) fwrite(line->s, 1, line->len, stdout);
    putchar('\n');
}

/* encode --jsonl: each worker formats its chunk's lines; they are printed in order. */
typedef struct LineJob {
    const Tokenizer *t;
    Show show;
} LineJob;

typedef struct LineWorker {
    EncodeState *enc;
    IdVec ids;
    StrBuf line;
} LineWorker;

static void *line_worker_new(void *ctx) {
    LineWorker *w = xcalloc(1, sizeof *w);
    w->enc = encode_state_new(((LineJob *)ctx)->t);
    return w;
}

static void line_worker_free(void *ctx, void *state) {
    LineWorker *w = state;
    encode_state_free(w->enc);
    free(w->ids.ids);
    sb_free(&w->line);
    free(w);
}

static void encode_lines(void *ctx, void *state, JsonlChunk *c) {
    LineWorker *w = state;
    const LineJob *job = ctx;
    StrBuf *out = xcalloc(1, sizeof *out);
    JsonlCursor cur = {0};
    const char *text;
    size_t len;
    uint64_t line;
    while (jsonl_next(c, &cur, &text, &len, &line)) {
        format_encoded(w->enc, job->t, text, len, job->show, &w->ids, &w->line);
        sb_appendn(out, w->line.s ? w->line.s : "", w->line.len);
        sb_appendn(out, "\n", 1);
    }
    c->result = out;
}

static void print_lines(void *ctx, JsonlChunk *c) {
    StrBuf *out = c->result;
    if (out->len) fwrite(out->s, 1, out->len, stdout);
    sb_free(out);
    free(out);
}

static int encode_main(int argc, char **argv) {
    const char *tok_path = NULL, *jsonl = NULL;
    Show show = SHOW_IDS;
    int n_texts = 0, n_files = 0;
    char **texts = xcalloc((size_t)argc, sizeof *texts), **files = xcalloc((size_t)argc, sizeof *files);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--file") || !strcmp(a, "--jsonl")) && i + 1 >= argc) usage("--file and --jsonl want a path");
        if (!strcmp(a, "--file")) files[n_files++] = argv[++i];
        else if (!strcmp(a, "--jsonl")) jsonl = argv[++i];
        else if (!strcmp(a, "--pieces")) show = SHOW_PIECES;
        else if (!strcmp(a, "--pretokens")) show = SHOW_PRETOKENS;
        else if (!strcmp(a, "--")) {
            while (++i < argc) texts[n_texts++] = argv[i];
        } else if (a[0] == '-' && a[1] == '-') usage(xasprintf("unknown option %s", a));
        else if (!tok_path) tok_path = a;
        else texts[n_texts++] = argv[i];
    }
    if (!tok_path) usage("encode: which tokenizer?");
    if (!n_texts && !n_files && !jsonl) usage("encode: what text? (TEXT..., --file PATH or --jsonl PATH)");
    Tokenizer *t = tokenizer_open(tok_path);
    EncodeState *s = encode_state_new(t);
    IdVec ids = {0};
    StrBuf line = {0};
    for (int i = 0; i < n_texts; i++) print_encoded(s, t, texts[i], strlen(texts[i]), show, &ids, &line);
    for (int i = 0; i < n_files; i++) { /* each file is one text, bytes as they are */
        size_t len;
        char *text = read_file(files[i], &len);
        print_encoded(s, t, text, len, show, &ids, &line);
        free(text);
    }
    if (jsonl) { /* one output line per document, in order, encoded on every core */
        LineJob lines = {t, show};
        JsonlJob job = {.path = jsonl, .label = "mmc tokenizer encode", .strict = true, .quiet = true, .ctx = &lines,
                        .worker_new = line_worker_new, .worker_free = line_worker_free, .work = encode_lines,
                        .consume = print_lines};
        jsonl_run(&job);
    }
    free(ids.ids);
    sb_free(&line);
    encode_state_free(s);
    tokenizer_free(t);
    free(texts), free(files);
    return 0;
}

/* ---- decode */

static void parse_ids(const char *text, IdVec *ids, const char *where) {
    for (const char *p = text; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        unsigned long long id = strtoull(p, &end, 10);
        if (end == p || id > UINT32_MAX || (*end && *end != ' ' && *end != '\t' && *end != ',' && *end != '\r'))
            die_at(where, "not a token id: '%.20s'", p);
        idvec_push(ids, (uint32_t)id);
        p = end;
    }
}

/* With --ids FILE: one line of ids in, one {"text": ...} line out, the inverse of
 * encode --jsonl. */
static int decode_main(int argc, char **argv) {
    const char *tok_path = NULL, *ids_file = NULL;
    bool skip = false;
    IdVec ids = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--skip-special")) skip = true;
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc) ids_file = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1] == '-') usage(xasprintf("unknown option %s", argv[i]));
        else if (!tok_path) tok_path = argv[i];
        else parse_ids(argv[i], &ids, "decode");
    }
    if (!tok_path) usage("decode: which tokenizer?");
    Tokenizer *t = tokenizer_open(tok_path);
    StrBuf text = {0};
    if (!ids_file) {
        tokenizer_decode(t, ids.ids, ids.n, skip, &text);
        if (text.len) fwrite(text.s, 1, text.len, stdout);
        putchar('\n');
    } else {
        char *data = read_file(ids_file, NULL);
        uint64_t number = 1;
        for (char *line = data, *next; *line; line = next, number++) {
            next = strchr(line, '\n');
            next = next ? (*next = 0, next + 1) : line + strlen(line);
            char *where = xasprintf("%s:%llu", ids_file, (unsigned long long)number);
            ids.n = 0, text.len = 0;
            parse_ids(line, &ids, where);
            free(where);
            tokenizer_decode(t, ids.ids, ids.n, skip, &text);
            json_t *doc = json_object();
            json_object_set_new(doc, "text", json_stringn(text.len ? text.s : "", text.len));
            char *out = json_dumps(doc, JSON_COMPACT);
            puts(out);
            free(out);
            json_decref(doc);
        }
        free(data);
    }
    sb_free(&text);
    free(ids.ids);
    tokenizer_free(t);
    return 0;
}

/* ---- bench: encode a corpus held in memory on N threads, timing only the encoding */

typedef struct Bench {
    const Tokenizer *t;
    char **texts;
    size_t *lens;
    size_t n, cap, next;
    uint64_t tokens;
} Bench;

typedef struct Texts {
    char **texts;
    size_t *lens;
    size_t n, cap;
} Texts;

static void copy_texts(void *ctx, void *state, JsonlChunk *c) {
    Texts *out = xcalloc(1, sizeof *out);
    JsonlCursor cur = {0};
    const char *text;
    size_t len;
    uint64_t line;
    while (jsonl_next(c, &cur, &text, &len, &line)) {
        if (out->n == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 256;
            out->texts = xrealloc(out->texts, out->cap * sizeof *out->texts);
            out->lens = xrealloc(out->lens, out->cap * sizeof *out->lens);
        }
        out->texts[out->n] = xstrndup(text, len);
        out->lens[out->n++] = len;
    }
    c->result = out;
}

static void keep_texts(void *ctx, JsonlChunk *c) {
    Bench *b = ctx;
    Texts *in = c->result;
    for (size_t i = 0; i < in->n; i++) {
        if (b->n == b->cap) {
            b->cap = b->cap ? 2 * b->cap : 1024;
            b->texts = xrealloc(b->texts, b->cap * sizeof *b->texts);
            b->lens = xrealloc(b->lens, b->cap * sizeof *b->lens);
        }
        b->texts[b->n] = in->texts[i];
        b->lens[b->n++] = in->lens[i];
    }
    free(in->texts), free(in->lens), free(in);
}

static void *bench_worker(void *arg) {
    Bench *b = arg;
    EncodeState *s = encode_state_new(b->t);
    IdVec ids = {0};
    uint64_t tokens = 0;
    for (;;) {
        size_t first = __atomic_fetch_add(&b->next, 64, __ATOMIC_RELAXED);
        if (first >= b->n) break;
        for (size_t i = first; i < first + 64 && i < b->n; i++) {
            ids.n = 0;
            tokenizer_encode(s, b->texts[i], b->lens[i], &ids);
            tokens += ids.n;
        }
    }
    __atomic_fetch_add(&b->tokens, tokens, __ATOMIC_RELAXED);
    free(ids.ids);
    encode_state_free(s);
    return NULL;
}

static int bench_main(int argc, char **argv) {
    const char *tok_path = NULL, *corpus = NULL;
    int threads = default_threads(), repeat = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = (int)arg_number("tokenizer bench", "--threads", argv[++i], 1, 1024);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = (int)arg_number("tokenizer bench", "--repeat", argv[++i], 1, 100);
        else if (argv[i][0] == '-' && argv[i][1] == '-') usage(xasprintf("unknown option %s", argv[i]));
        else if (!tok_path) tok_path = argv[i];
        else corpus = argv[i];
    }
    if (!corpus) usage("bench: which tokenizer and corpus?");
    Tokenizer *t = tokenizer_open(tok_path);
    Bench b = {.t = t};
    JsonlJob job = {.path = corpus, .label = "mmc tokenizer bench", .strict = true, .quiet = true, .ctx = &b,
                    .work = copy_texts, .consume = keep_texts};
    jsonl_run(&job);
    size_t bytes = 0;
    for (size_t i = 0; i < b.n; i++) bytes += b.lens[i];
    pthread_t *tids = xcalloc((size_t)threads, sizeof *tids);
    double secs = 0;
    for (int r = 0; r < repeat; r++) { /* the best run; each starts with empty word caches */
        b.next = 0, b.tokens = 0;
        double start = now_seconds();
        for (int i = 0; i < threads; i++) pthread_create(&tids[i], NULL, bench_worker, &b);
        for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
        double took = now_seconds() - start;
        if (!r || took < secs) secs = took;
    }
    printf("mmc: %.2f MB, %zu texts, %llu tokens in %.3f s: %.2f MB/s (%d threads)\n", (double)bytes / 1e6, b.n,
           (unsigned long long)b.tokens, secs, (double)bytes / 1e6 / secs, threads);
    for (size_t i = 0; i < b.n; i++) free(b.texts[i]);
    free(tids), free(b.texts), free(b.lens);
    tokenizer_free(t);
    return 0;
}

int cmd_tokenizer(int argc, char **argv) {
    if (argc < 2) usage("which subcommand?");
    const char *sub = argv[1];
    if (!strcmp(sub, "encode")) return encode_main(argc - 1, argv + 1);
    if (!strcmp(sub, "decode")) return decode_main(argc - 1, argv + 1);
    if (!strcmp(sub, "train")) return tokenizer_train_cmd(argc - 1, argv + 1);
    if (!strcmp(sub, "bench")) return bench_main(argc - 1, argv + 1);
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
        puts(usage_text);
        return 0;
    }
    usage(xasprintf("unknown subcommand '%s'", sub));
}
