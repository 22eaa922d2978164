/* test_fuzz_readers: the readers of what a run takes in trust nothing of it. Seeded random
 * damage to three files of graphs/tiny.lua, made here:
 *   - model.safetensors (what --init, --resume, eval, generate and export read),
 *   - resume.safetensors after two updates (what --resume reads),
 *   - a token file of rows (what --data and --val read), and one with a loss-mask plane (format
 *     version 2, what mmc data --sft writes);
 * cut, flipped bytes, huge header lengths, and edits of the parsed header (numbers made -1,
 * 2^62, 1e308, strings, nested arrays; fields gone or unknown; names twice; offsets that
 * overlap), of the step state's fields, of the metadata and of the token header. Each case
 * is either refused with one line that names the file (die() jumps back here) or accepted
 * and then used: weights loaded into a ref backend, exported to f16 and read back; a resume
 * state applied, and a batch read at its data position; a token file batched at random
 * positions. Damage a version 2 file must be refused for (a truncated mask plane, a bad mask
 * offset, unknown flags, version 3) is checked to be refused. The first 300 accepted cases of each safetensors reader also run a step on the
 * ref backend (forward and backward on the weights; an update from the resume state). A
 * crash or a case that takes over 60 s (a hang) ends the test, naming the reader, the case
 * and the seed.
 * MMC_FUZZ_SEED (default 1) and MMC_FUZZ_CASES (per reader, default 2000) set the run; each
 * case draws from its own stream of the seed, so a case repeats on its own. MMC_FUZZ_VERBOSE
 * prints every case's outcome. */
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "data.h"
#include "init.h"
#include "safetensors.h"
#include "test_util.h"
#include "tokens.h"
#include "train.h"

/* the files, in a folder of this process's own, so that two runs at once do not write each
 * other's (a file cut while another process maps it is a SIGBUS there) */
static struct {
    char *dir, *run, *cases, *data, *masked, *exported, *weights, *resume, *tokens, *fifo;
} at;

static void make_paths(void) {
    at.dir = xasprintf("build/tests/tmp/fuzz_readers.%ld", (long)getpid());
    at.run = xasprintf("%s/run", at.dir);
    at.cases = xasprintf("%s/case", at.dir);
    at.data = xasprintf("%s/data.bin", at.dir);
    at.masked = xasprintf("%s/masked.bin", at.dir);
    at.exported = xasprintf("%s/export.safetensors", at.dir);
    at.weights = xasprintf("%s/weights.safetensors", at.cases);
    at.resume = xasprintf("%s/resume.safetensors", at.cases);
    at.tokens = xasprintf("%s/tokens.bin", at.cases);
    at.fifo = xasprintf("%s/fifo", at.dir);
}

static jmp_buf on_die;
static char last_error[4096];
static void jump_back(const char *message) {
    snprintf(last_error, sizeof last_error, "%s", message);
    longjmp(on_die, 1);
}

/* ---- what a crash or a hang reports */

static const char *current_reader = "setup";
static volatile long current_case = -1;
static uint64_t seed = 1;

static void on_fatal(int sig) {
    char msg[256];
    int n = snprintf(msg, sizeof msg, "\ntest_fuzz_readers: %s at reader %s, case %ld (MMC_FUZZ_SEED=%llu)\n",
                     sig == SIGALRM ? "a hang (over 60 s)" : strsignal(sig), current_reader, current_case,
                     (unsigned long long)seed);
    if (write(2, msg, (size_t)n) < 0) {}
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---- random draws: each case its own stream */

static void case_stream(int reader, long k) {
    test_rng = seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t)reader << 56) ^ (uint64_t)k * 0xbf58476d1ce4e5b9ull;
    if (!test_rng) test_rng = 1;
    for (int i = 0; i < 4; i++) test_uniform();
}
static size_t below(size_t n) { return n ? (size_t)(test_uniform() * (double)n) % n : 0; }
static int chance(double p) { return test_uniform() < p; }

/* ---- byte buffers */

typedef struct Buf {
    unsigned char *p;
    size_t n;
} Buf;

static Buf buf_copy(const void *p, size_t n) {
    Buf b = {xmalloc(n + 1), n};
    memcpy(b.p, p, n);
    return b;
}

static Buf buf_file(const char *path) {
    size_t n = 0;
    char *p = read_file(path, &n);
    return (Buf){(unsigned char *)p, n};
}

static void buf_write(const Buf *b, const char *path) { /* no fsync: thousands of cases */
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->p, 1, b->n, f) != b->n || fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write\n", path);
        exit(1);
    }
}

static uint64_t get_le(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static void put_le(unsigned char *p, int bytes, uint64_t v) {
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* damage any file may take: cut, bytes flipped or put in, bytes added at the end */
static void mutate_bytes(Buf *b, size_t from) {
    switch (below(4)) {
    case 0: b->n = below(b->n + 1); break;
    case 1:
        for (int k = 1 + (int)below(8); k > 0 && b->n > from; k--)
            b->p[from + below(b->n - from)] ^= (unsigned char)(1 + below(255));
        break;
    case 2:
        for (int k = 1 + (int)below(4); k > 0 && b->n > from; k--)
            b->p[from + below(b->n - from)] = "\0\xff\x7f\x80{}[]\",:0-9e"[below(16)];
        break;
    default: {
        size_t add = 1 + below(64);
        b->p = xrealloc(b->p, b->n + add + 1);
        for (size_t i = 0; i < add; i++) b->p[b->n + i] = (unsigned char)below(256);
        b->n += add;
    }
    }
}

/* ---- safetensors: the header as JSON, edited, and put back before the same data */

typedef struct St {
    json_t *head; /* the parsed header */
    Buf data;     /* the bytes after it */
} St;

static St st_split(const Buf *b) {
    uint64_t hlen = get_le(b->p, 8);
    json_error_t err;
    St s = {json_loadb((const char *)b->p + 8, (size_t)hlen, 0, &err), buf_copy(b->p + 8 + hlen, b->n - 8 - (size_t)hlen)};
    if (!s.head) {
        fprintf(stderr, "test_fuzz_readers: the valid file does not parse: %s\n", err.text);
        exit(1);
    }
    return s;
}

/* header text + padding + data; `text` is the header as it is to be written */
static Buf st_join(const char *text, const Buf *data) {
    size_t h = strlen(text), padded = (h + 7) / 8 * 8;
    Buf b = {xmalloc(8 + padded + data->n + 1), 8 + padded + data->n};
    put_le(b.p, 8, padded);
    memcpy(b.p + 8, text, h);
    memset(b.p + 8 + h, ' ', padded - h);
    memcpy(b.p + 8 + padded, data->p, data->n);
    return b;
}

static const char *odd_json[] = {"-1", "0", "1", "4611686018427387904", "9223372036854775807", "-9223372036854775808",
                                 "18446744073709551616", "1e308", "-0.0", "0.5", "\"x\"", "\"F32\"", "\"\"", "[]", "[[1]]",
                                 "[[[[[[[[1]]]]]]]]", "{}", "null", "true", "[-1]", "[4611686018427387904]",
                                 "[4611686018427387904, 4]", "[1, 2, 3]", "[0, 0]", "[1e308, 2]", "[\"0\", \"4\"]",
                                 "{\"dtype\": \"F32\"}", "\"\\u00e9\\n\"", "[0, 18446744073709551615]"};

static json_t *odd_value(void) {
    json_t *v = json_loads(odd_json[below(sizeof odd_json / sizeof *odd_json)], JSON_DECODE_ANY, NULL);
    return v ? v : json_string("18446744073709551616"); /* a number past what jansson reads */
}

/* a random tensor entry's name (not __metadata__) */
static const char *some_tensor(json_t *head) {
    size_t n = json_object_size(head), pick = below(n), i = 0;
    const char *key, *first = NULL;
    json_t *v;
    json_object_foreach(head, key, v) {
        if (!strcmp(key, "__metadata__")) continue;
        if (!first) first = key;
        if (i++ >= pick) return key;
    }
    return first;
}

static const char *odd_strings[] = {"-5", "abc", "", " 5", "5x", "1e3", "+5", "0x10", "99999999999999999999",
                                    "18446744073709551615", "9223372036854775807", "0", "007", "5\n", "\xff"};

/* one edit of the header's JSON, or of its text; returns the file */
static Buf st_mutate_header(const Buf *valid) {
    St s = st_split(valid);
    const char *name = some_tensor(s.head);
    json_t *e = json_object_get(s.head, name), *meta = json_object_get(s.head, "__metadata__");
    const char *fields[] = {"dtype", "shape", "data_offsets"};
    char *text = NULL;
    switch (below(12)) {
    case 0: /* a field made an odd value */
        json_object_set_new(e, fields[below(3)], odd_value());
        break;
    case 1: /* a field gone, or one unknown */
        if (chance(0.5)) json_object_del(e, fields[below(3)]);
        else json_object_set_new(e, "offsets", odd_value());
        break;
    case 2: { /* a shape whose element count overflows into the bytes it has */
        json_t *off = json_object_get(e, "data_offsets");
        json_int_t b0 = json_integer_value(json_array_get(off, 0));
        json_object_set_new(e, "shape", json_pack("[I]", (json_int_t)4611686018427387904ll));
        if (chance(0.5)) json_object_set_new(e, "data_offsets", json_pack("[II]", b0, b0));
        break;
    }
    case 3: { /* offsets moved onto a neighbour's, or by a few bytes */
        json_t *off = json_object_get(e, "data_offsets");
        json_int_t b0 = json_integer_value(json_array_get(off, 0)), b1 = json_integer_value(json_array_get(off, 1));
        json_int_t d = chance(0.5) ? (json_int_t)below(9) - 4 : (json_int_t)below(valid->n) - b0;
        json_object_set_new(e, "data_offsets", json_pack("[II]", b0 + d, b1 + d));
        break;
    }
    case 4: { /* another tensor's offsets: two tensors on the same bytes */
        json_t *other = json_object_get(s.head, some_tensor(s.head));
        json_object_set(e, "data_offsets", json_object_get(other, "data_offsets"));
        json_object_set(e, "shape", json_object_get(other, "shape"));
        json_object_set(e, "dtype", json_object_get(other, "dtype"));
        break;
    }
    case 5: /* a dtype of another size */
        json_object_set_new(e, "dtype",
                            json_string((const char *[]){"F16", "BF16", "F64", "I32", "U8", "I64", "f32"}[below(7)]));
        break;
    case 6: /* a tensor gone */
        json_object_del(s.head, name);
        break;
    case 7: /* metadata made odd */
        if (meta && json_object_size(meta) && chance(0.7)) {
            const char *keys[32];
            size_t n = 0;
            const char *k;
            json_t *v;
            json_object_foreach(meta, k, v) if (n < 32) keys[n++] = k;
            const char *key = keys[below(n)];
            if (chance(0.3)) json_object_set_new(meta, key, odd_value());
            else if (chance(0.2)) json_object_del(meta, key);
            else json_object_set_new(meta, key, json_string(odd_strings[below(sizeof odd_strings / sizeof *odd_strings)]));
        } else json_object_set_new(s.head, "__metadata__", odd_value());
        break;
    case 8: { /* a name twice, textually (a JSON object cannot hold it) */
        char *t = json_dumps(s.head, JSON_COMPACT), *entry = json_dumps(e, JSON_COMPACT);
        const char *other = some_tensor(s.head);
        text = xasprintf("{\"%s\":%s,%s", chance(0.5) ? name : other, entry, t + 1);
        free(t), free(entry);
        break;
    }
    case 9: /* the header not an object, or nested deep */
        if (chance(0.5)) text = xstrdup((const char *[]){"[]", "null", "\"x\"", "1", "{", "", "{}"}[below(7)]);
        else {
            StrBuf d = {0};
            size_t depth = 1 + below(5000);
            sb_append(&d, "{\"a\":");
            for (size_t i = 0; i < depth; i++) sb_append(&d, "[");
            for (size_t i = 0; i < depth; i++) sb_append(&d, "]");
            sb_append(&d, "}");
            text = d.s;
        }
        break;
    case 10: { /* a shape dimension made odd */
        json_t *sh = json_object_get(e, "shape");
        if (json_array_size(sh)) json_array_set_new(sh, below(json_array_size(sh)), odd_value());
        else json_array_append_new(sh, odd_value());
        break;
    }
    default: { /* the JSON text damaged: a character changed, put in or cut */
        char *t = json_dumps(s.head, JSON_COMPACT);
        size_t n = strlen(t), at = below(n);
        if (chance(0.4)) t[at] = "{}[]\",:-0e9 \\x"[below(15)];
        else if (chance(0.5)) t[below(n)] = 0;
        else {
            char *u = xasprintf("%.*s%s%s", (int)at, t, odd_json[below(sizeof odd_json / sizeof *odd_json)], t + at);
            free(t);
            t = u;
        }
        text = t;
    }
    }
    if (!text) text = json_dumps(s.head, JSON_COMPACT);
    Buf b = st_join(text ? text : "", &s.data);
    free(text);
    json_decref(s.head);
    free(s.data.p);
    return b;
}

/* an element of a tensor of floats made inf, nan, huge or negative, in place */
static void st_mutate_value(Buf *b) {
    St s = st_split(b);
    const char *name = some_tensor(s.head);
    json_t *e = json_object_get(s.head, name);
    const char *dt = json_string_value(json_object_get(e, "dtype"));
    json_int_t b0 = json_integer_value(json_array_get(json_object_get(e, "data_offsets"), 0));
    json_int_t b1 = json_integer_value(json_array_get(json_object_get(e, "data_offsets"), 1));
    size_t at = 8 + get_le(b->p, 8) + (size_t)b0;
    if (dt && !strcmp(dt, "F32") && b1 - b0 >= 4) {
        /* nan, inf, -inf, the largest float, -1, -0, the least subnormal, a signalling nan */
        static const uint32_t odd[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu,
                                       0xbf800000u, 0x80000000u, 0x00000001u, 0x7fa00001u};
        size_t k = below((size_t)(b1 - b0) / 4);
        put_le(b->p + at + 4 * k, 4, odd[below(sizeof odd / sizeof *odd)]);
    } else if (b1 > b0)
        b->p[at + below((size_t)(b1 - b0))] ^= 0xff;
    json_decref(s.head);
    free(s.data.p);
}

/* ---- the resume file's step state */

typedef struct Field {
    size_t offset;
    int kind; /* 0 int, 1 float, 2 double */
} Field;

#define F(name, kind) {offsetof(MmcStepState, name), kind}
static const Field step_fields[] = {F(lr, 2), F(total_micro, 2), F(loss_seed, 1), F(scale, 1), F(found_inf, 1),
                                    F(grad_norm, 1), F(clip_coef, 1), F(growth_tracker, 0), F(adam_step, 0), F(update, 0),
                                    F(skipped, 0), F(ticket, 0), F(pad_, 0)};
#undef F

static void mutate_step_state(Buf *b) {
    St s = st_split(b);
    json_t *off = json_object_get(json_object_get(s.head, "step_state"), "data_offsets");
    json_int_t b0 = json_integer_value(json_array_get(off, 0));
    unsigned char *p = b->p + 8 + get_le(b->p, 8) + (size_t)b0;
    MmcStepState st;
    memcpy(&st, p, sizeof st);
    for (int k = 1 + (int)below(2); k > 0; k--) {
        const Field *f = &step_fields[below(sizeof step_fields / sizeof *step_fields)];
        unsigned char *at = (unsigned char *)&st + f->offset;
        if (f->kind == 0) {
            int old, v;
            memcpy(&old, at, sizeof old);
            const int odd[] = {-1, 0, 1, 2147483647, -2147483647 - 1, (int)((unsigned)old + 1u), (int)((unsigned)old - 1u),
                               2, 1999, 2000, 65536};
            v = odd[below(sizeof odd / sizeof *odd)];
            memcpy(at, &v, sizeof v);
        } else {
            double old = f->kind == 1 ? (double)*(float *)(void *)at : *(double *)(void *)at;
            const double odd[] = {NAN, INFINITY, -INFINITY, 0.0, -1.0, 1e-45, 3e38, 1e308, 0.5, old * 2, old + 1, 16384};
            double v = odd[below(sizeof odd / sizeof *odd)];
            if (f->kind == 1) {
                float x = (float)v;
                memcpy(at, &x, sizeof x);
            } else memcpy(at, &v, sizeof v);
        }
    }
    memcpy(p, &st, sizeof st);
    json_decref(s.head);
    free(s.data.p);
}

/* ---- the readers under test */

typedef struct Tally {
    const char *name;
    long cases, refused, accepted;
    double seconds;
} Tally;

typedef struct World {
    Plan *pl;
    Backend *b;
    int64_t B, T;
    long steps_left; /* accepted cases that still run a step, of the reader at hand */
    char *data_path; /* the valid token file */
    Buf model, resume, tokens, masked; /* masked: a version 2 token file with a loss mask */
} World;

/* the message of a refusal: one line, naming the file */
static void check_message(const char *reader, long k, const char *path) {
    CHECK(strchr(last_error, '\n') == NULL, "%s case %ld: a message of more than one line: %s", reader, k, last_error);
    CHECK(strstr(last_error, path) != NULL, "%s case %ld: the message does not name %s: %s", reader, k, path, last_error);
}

/* one update, as mmc train runs it: accumulation micro-batches from the data, then the update */
static void train_update(Backend *b, Batcher *data) {
    const Graph *g = b->pl->g;
    const Node *ids = g->role[ROLE_TOKENS], *labels = g->role[ROLE_TARGETS];
    int64_t n = data->batch * data->seq;
    int32_t *x = xmalloc((size_t)n * sizeof *x), *y = xmalloc((size_t)n * sizeof *y);
    for (int a = 0; a < g->train.accumulation; a++) {
        batcher_next(data, x, y);
        b->write(b, BUF_IO, ids->offset, x, n * (int64_t)sizeof *x);
        b->write(b, BUF_IO, labels->offset, y, n * (int64_t)sizeof *y);
        b->run_phase(b, PHASE_MICRO);
    }
    b->run_phase(b, PHASE_UPDATE);
    free(x), free(y);
}

/* the weights file: --init's reader, then a step on the weights, then export and back */
static int use_model(World *w, const char *path, long k) {
    static volatile int stage;
    stage = 0;
    if (!setjmp(on_die)) {
        checkpoint_load_weights(w->b, path);
        stage = 1;
        if (w->steps_left > 0) {
            w->steps_left--;
            MmcStepState st = init_state(w->pl, 1);
            w->b->write(w->b, BUF_STATE, 0, &st, sizeof st);
            w->b->run_phase(w->b, PHASE_MICRO);
            double loss = read_loss(w->b);
            (void)loss; /* any value: huge weights give inf, which is theirs to give */
        }
        stage = 2;
        checkpoint_export(path, at.exported, DT_F16);
        stage = 3;
        StFile *back = st_open(at.exported);
        st_close(back);
        return 1;
    }
    if (stage == 0 || stage == 2) { /* refused by the loader, or its values refused by the f16 export */
        check_message("model", k, path);
        return stage == 2;
    }
    CHECK(0, "model case %ld: refused after it was accepted: %s", k, last_error);
    return 1;
}

/* the resume file: applied, then one update trained from its data position */
static int use_resume(World *w, const char *dir, long k) {
    static volatile int stage;
    stage = 0;
    if (!setjmp(on_die)) {
        RunPosition pos = checkpoint_resume(w->b, dir, NULL);
        stage = 1;
        Batcher *data = batcher_open(w->data_path, w->B, w->T, 320, pos.shuffle, BATCHER_PAD_ID);
        data->position = pos.rows;
        MmcStepState before, after;
        w->b->read(w->b, BUF_STATE, 0, &before, sizeof before);
        if (w->steps_left <= 0 || before.update >= before.total_micro / w->pl->g->train.accumulation) {
            int32_t *x = xmalloc((size_t)(w->B * w->T) * sizeof *x), *y = xmalloc((size_t)(w->B * w->T) * sizeof *y);
            batcher_next(data, x, y); /* a finished run trains no more, but its position is a row */
            free(x), free(y);
        } else {
            w->steps_left--;
            train_update(w->b, data);
            w->b->read(w->b, BUF_STATE, 0, &after, sizeof after);
            CHECK(after.update == before.update + 1 && after.adam_step + after.skipped == after.update,
                  "resume case %ld: the update after a resume at %d counts %d (%d + %d)", k, before.update, after.update,
                  after.adam_step, after.skipped);
            CHECK(data->position == pos.rows + w->B * w->pl->g->train.accumulation, "resume case %ld: the data position", k);
        }
        batcher_close(data);
        return 1;
    }
    if (stage == 0) {
        char *path = path_join(dir, "resume.safetensors");
        check_message("resume", k, path);
        free(path);
        return 0;
    }
    CHECK(0, "resume case %ld: refused after it was accepted: %s", k, last_error);
    return 1;
}

/* the token file, read for a model of that vocabulary: batches from random positions, each
 * id below the vocabulary */
static int use_tokens(World *w, const char *path, long k, uint32_t model_vocab, uint64_t shuffle) {
    if (!setjmp(on_die)) {
        Batcher *data = batcher_open(path, w->B, w->T, model_vocab, shuffle, BATCHER_PAD_ID);
        int64_t n = w->B * w->T;
        int32_t *x = xmalloc((size_t)n * sizeof *x), *y = xmalloc((size_t)n * sizeof *y);
        for (int i = 0; i < 3; i++) {
            data->position = (int64_t)below((size_t)data->rows * 4);
            batcher_next(data, x, y);
            for (int64_t c = 0; c < n; c++)
                CHECK(x[c] >= 0 && (uint32_t)x[c] < data->file->vocab && y[c] >= 0 && (uint32_t)y[c] < data->file->vocab,
                      "tokens case %ld: an id past the vocabulary", k);
        }
        free(x), free(y);
        batcher_close(data);
        return 1;
    }
    check_message("tokens", k, path);
    return 0;
}

/* ---- the valid files, made as mmc init and mmc train make them */

static void write_tokens(const char *path, int64_t rows, int64_t T, uint32_t pad, int all_pad) {
    TokenWriter *tw = tokens_create(path, 320, (uint32_t)(T + 1), pad, NULL);
    uint16_t *row = xmalloc((size_t)(T + 1) * sizeof *row);
    for (int64_t r = 0; r < rows; r++) {
        row[0] = 1; /* bos */
        int64_t len = 2 + (int64_t)below((size_t)T);
        for (int64_t t = 1; t <= T; t++) row[t] = all_pad || t >= len ? (uint16_t)pad : (uint16_t)(3 + below(317));
        tokens_append(tw, row, (size_t)(T + 1));
    }
    tokens_finish(tw);
    free(row);
}

/* 47 rows of T + 1, so that the ids end off a multiple of 8 (zero bytes before the mask
 * plane) and the plane's last byte is partly past the last token */
static void write_masked_tokens(const char *path, int64_t T) {
    TokenWriter *tw = tokens_create_masked(path, 320, (uint32_t)(T + 1), 0, NULL);
    uint16_t *row = xmalloc((size_t)(T + 1) * sizeof *row);
    uint8_t *mask = xmalloc((size_t)(T + 1));
    for (int64_t r = 0; r < 47; r++) {
        for (int64_t t = 0; t <= T; t++) row[t] = t ? (uint16_t)(3 + below(317)) : 1, mask[t] = t && chance(0.5);
        tokens_append_masked(tw, row, mask, (size_t)(T + 1));
    }
    tokens_finish(tw);
    free(row), free(mask);
}

static void setup(World *w) {
    make_dirs(at.run);
    make_dirs(at.cases);
    /* tiny's weights at a batch of 2 rows of 8: the same tensors, a step of a sixteenth the
     * work, so that every accepted case can run one */
    w->pl = test_compile("graphs/tiny.lua", NULL, "batch=2,seq=8", 1);
    w->b = ref_backend_create(w->pl);
    w->B = w->pl->g->role[ROLE_TOKENS]->shape.dim[0], w->T = w->pl->g->role[ROLE_TOKENS]->shape.dim[1];
    w->data_path = xstrdup(at.data);
    case_stream(0, 0);
    write_tokens(w->data_path, 48, w->T, 0, 0);
    init_consts(w->b);
    init_params(w->b, 3);
    MmcStepState st = init_state(w->pl, 8);
    w->b->write(w->b, BUF_STATE, 0, &st, sizeof st);
    Batcher *data = batcher_open(w->data_path, w->B, w->T, 320, 5, BATCHER_PAD_ID);
    train_update(w->b, data);
    train_update(w->b, data);
    RunPosition pos = {data->position, 3, 5, "", "data.bin"};
    tokens_sha256(data->file, pos.data_sha256);
    checkpoint_save(w->b, at.run, &pos);
    batcher_close(data);
    char *model = path_join(at.run, "model.safetensors"), *resume = path_join(at.run, "resume.safetensors");
    char *case_model = path_join(at.cases, "model.safetensors");
    w->model = buf_file(model);
    w->resume = buf_file(resume);
    w->tokens = buf_file(w->data_path);
    write_masked_tokens(at.masked, w->T);
    w->masked = buf_file(at.masked);
    buf_write(&w->model, case_model); /* beside each damaged resume file */
    /* the valid files are accepted, or the cases below test nothing */
    w->steps_left = 2;
    set_die_hook(jump_back);
    CHECK(use_model(w, model, -1), "the valid model.safetensors is refused: %s", last_error);
    CHECK(use_resume(w, at.run, -1), "the valid resume.safetensors is refused: %s", last_error);
    CHECK(use_tokens(w, w->data_path, -1, 320, 0), "the valid token file is refused: %s", last_error);
    CHECK(use_tokens(w, at.masked, -1, 320, 0), "the valid masked token file is refused: %s", last_error);
    TokenFile *masked = tokens_open(at.masked, 0);
    CHECK(masked->version == 2 && masked->mask && !tokens_counts(masked, 0) && masked->count == 47 * (uint64_t)(w->T + 1),
          "the masked token file reads back without its mask");
    tokens_close(masked);
    set_die_hook(NULL);
    free(model), free(resume), free(case_model);
}

/* ---- the cases */

static Buf model_case(const World *w) {
    Buf b;
    double r = test_uniform();
    if (r < 0.45) return st_mutate_header(&w->model);
    b = buf_copy(w->model.p, w->model.n);
    if (r < 0.6) st_mutate_value(&b);
    else if (r < 0.75) { /* a header length past the file, or not the header's */
        uint64_t h = get_le(b.p, 8);
        const uint64_t odd[] = {0, 1, 7, h - 1, h + 1, b.n, b.n - 8, b.n - 7, 1ull << 62, UINT64_MAX};
        put_le(b.p, 8, odd[below(sizeof odd / sizeof *odd)]);
    } else mutate_bytes(&b, chance(0.5) ? 0 : 8 + get_le(b.p, 8));
    return b;
}

/* a metadata value of the resume file made odd, or another number */
static Buf mutate_resume_meta(const Buf *valid) {
    St s = st_split(valid);
    json_t *meta = json_object_get(s.head, "__metadata__");
    const char *keys[] = {"data_rows_consumed", "seed",          "shuffle",   "data_sha256",
                          "data_file",          "mmc_plan_hash", "mmc_update"};
    const char *key = keys[below(sizeof keys / sizeof *keys)];
    char number[32];
    snprintf(number, sizeof number, "%llu", (unsigned long long)(chance(0.5) ? below(20) : (size_t)test_rng));
    if (chance(0.1)) json_object_del(meta, key);
    else {
        const char *odd = odd_strings[below(sizeof odd_strings / sizeof *odd_strings)];
        json_object_set_new(meta, key, json_string(chance(0.4) ? number : odd));
    }
    char *text = json_dumps(s.head, JSON_COMPACT);
    Buf b = st_join(text, &s.data);
    free(text);
    json_decref(s.head);
    free(s.data.p);
    return b;
}

static Buf resume_case(const World *w) {
    double r = test_uniform();
    if (r < 0.3) return st_mutate_header(&w->resume);
    if (r < 0.45) return mutate_resume_meta(&w->resume);
    Buf b = buf_copy(w->resume.p, w->resume.n);
    if (r < 0.75) mutate_step_state(&b);
    else if (r < 0.8) st_mutate_value(&b);
    else mutate_bytes(&b, 0);
    return b;
}

static Buf tokens_case(const World *w) {
    Buf b = buf_copy(w->tokens.p, w->tokens.n);
    uint64_t count = get_le(b.p + 16, 8);
    switch (below(6)) {
    case 0: { /* a header field made odd */
        static const int at[] = {8, 12, 16, 24, 28}, size[] = {4, 4, 8, 4, 4};
        int f = (int)below(5);
        const uint64_t odd[] = {0, 1, 2, 3, 32, 33, 34, 319, 320, 321, 65535, 65536, 65537, UINT32_MAX, count - 1, count + 1,
                                count * 2, 1ull << 62, UINT64_MAX};
        put_le(b.p + at[f], size[f], odd[below(sizeof odd / sizeof *odd)]);
        break;
    }
    case 1: /* every target padding, under the pad id the header says or another */
        for (uint64_t i = 0; i < count; i++)
            if (i % (uint64_t)(w->T + 1)) put_le(b.p + 64 + 2 * i, 2, 0);
        if (chance(0.3)) put_le(b.p + 28, 4, 1 + below(400));
        break;
    case 2: /* an id at or past the vocabulary */
        put_le(b.p + 64 + 2 * below(count), 2, 318 + below(65536 - 318));
        break;
    case 3: /* the magic */
        b.p[below(8)] ^= (unsigned char)(1 + below(255));
        break;
    default: mutate_bytes(&b, chance(0.3) ? 0 : 64); break;
    }
    return b;
}

/* the version 2 file: its v1 damage, and damage of what v2 adds; *must_refuse when no reader
 * may accept the result */
static Buf masked_case(const World *w, int *must_refuse) {
    Buf b = buf_copy(w->masked.p, w->masked.n);
    uint64_t count = get_le(b.p + 16, 8), at = get_le(b.p + 72, 8), plane = (count + 7) / 8;
    *must_refuse = 1;
    switch (below(8)) {
    case 0: /* the mask plane cut short, or gone */
        b.n -= 1 + below(plane);
        break;
    case 1: { /* the mask offset elsewhere */
        const uint64_t odd[] = {0, 1, 64, 127, 128, at - 8, at - 1, at + 1, at + 8, b.n, b.n - plane + 1, 1ull << 62, UINT64_MAX};
        put_le(b.p + 72, 8, odd[below(sizeof odd / sizeof *odd)]);
        break;
    }
    case 2: /* flags this mmc does not know, with or without the mask bit */
        put_le(b.p + 64, 4, (uint64_t)(1u << (1 + below(31))) | (chance(0.5) ? 1 : 0));
        break;
    case 3: { /* a version this mmc does not read, or version 1 over a version 2 layout */
        const uint64_t odd[] = {0, 1, 3, 4, 255, UINT32_MAX};
        put_le(b.p + 8, 4, odd[below(sizeof odd / sizeof *odd)]);
        break;
    }
    case 4: /* the mask flag off while a plane follows, a reserved byte set, bits past the last token */
        if (chance(0.3)) put_le(b.p + 64, 4, 0);
        else if (chance(0.5)) b.p[68 + below(60)] ^= (unsigned char)(1 + below(255));
        else if (count % 8) b.p[b.n - 1] |= (unsigned char)(0x80);
        else *must_refuse = 0;
        break;
    case 5: /* other mask bits: still a valid file */
        for (int k = 1 + (int)below(16); k > 0; k--) {
            uint64_t i = below(count);
            b.p[at + i / 8] ^= (unsigned char)(1u << (i % 8));
        }
        *must_refuse = 0;
        break;
    default:
        mutate_bytes(&b, chance(0.3) ? 0 : 64);
        *must_refuse = 0;
        break;
    }
    return b;
}

/* a FIFO, a folder and /dev/zero are refused before they are read: they would block, fail
 * late or never end */
static void special_files(World *w) {
    const char *fifo = at.fifo;
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    const char *paths[] = {fifo, at.dir, "/dev/zero"};
    for (int i = 0; i < 3; i++) {
        alarm(60);
        last_error[0] = 0;
        if (!setjmp(on_die)) {
            tokens_open(paths[i], 0);
            CHECK(0, "%s: accepted as a token file", paths[i]);
        } else CHECK(strstr(last_error, "must be a regular file"), "%s as a token file: %s", paths[i], last_error);
        if (!setjmp(on_die)) {
            st_open(paths[i]);
            CHECK(0, "%s: accepted as a safetensors file", paths[i]);
        } else CHECK(strstr(last_error, "must be a regular file"), "%s as a safetensors file: %s", paths[i], last_error);
    }
    alarm(0);
    unlink(fifo);
}

int main(void) {
    const char *s = getenv("MMC_FUZZ_SEED"), *c = getenv("MMC_FUZZ_CASES");
    seed = s ? strtoull(s, NULL, 10) : 1;
    long cases = c ? strtol(c, NULL, 10) : 2000;
    int verbose = getenv("MMC_FUZZ_VERBOSE") != NULL; /* each case's outcome, to read or to compare */
    printf("test_fuzz_readers: seed %llu, %ld cases per reader (MMC_FUZZ_SEED, MMC_FUZZ_CASES)\n", (unsigned long long)seed,
           cases);
    fflush(stdout);
    int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM};
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) signal(fatal[i], on_fatal);
    make_paths();
    World w = {0};
    setup(&w);
    set_die_hook(jump_back);
    current_reader = "special files";
    special_files(&w);
    Tally tally[4] = {{"model.safetensors", 0, 0, 0, 0}, {"resume.safetensors", 0, 0, 0, 0}, {"token file", 0, 0, 0, 0},
                      {"masked token file", 0, 0, 0, 0}};
    for (int reader = 0; reader < 4; reader++) {
        Tally *t = &tally[reader];
        current_reader = t->name;
        w.steps_left = 300;
        double t0 = now_seconds();
        for (long k = 0; k < cases; k++) {
            current_case = k;
            case_stream(reader + 1, k);
            alarm(60);
            int ok;
            if (reader == 0) {
                Buf b = model_case(&w);
                buf_write(&b, at.weights);
                free(b.p);
                ok = use_model(&w, at.weights, k);
            } else if (reader == 1) {
                Buf b = resume_case(&w);
                buf_write(&b, at.resume);
                free(b.p);
                ok = use_resume(&w, at.cases, k);
            } else if (reader == 3) {
                int must_refuse;
                Buf b = masked_case(&w, &must_refuse);
                buf_write(&b, at.tokens);
                free(b.p);
                ok = use_tokens(&w, at.tokens, k, 320, chance(0.5) ? 1 + below(5) : 0);
                CHECK(!(ok && must_refuse), "masked token file case %ld: damage of the version 2 layout accepted", k);
            } else {
                Buf b = tokens_case(&w);
                buf_write(&b, at.tokens);
                free(b.p);
                uint32_t model_vocab = chance(0.8) ? 320 : (uint32_t)(1 + below(400));
                ok = use_tokens(&w, at.tokens, k, model_vocab, chance(0.5) ? 1 + below(5) : 0);
            }
            t->cases++;
            if (ok) t->accepted++;
            else t->refused++;
            if (verbose) printf("%s case %ld: %s\n", t->name, k, ok ? "accepted" : last_error);
        }
        alarm(0);
        t->seconds = now_seconds() - t0;
        /* a crash or a hang would have ended the test in on_fatal, naming the case */
        printf("  %-18s %6ld cases: %6ld refused, %6ld accepted and used, 0 crashes, 0 hangs, %.1f s\n", t->name, t->cases,
               t->refused, t->accepted, t->seconds);
        fflush(stdout);
        /* both outcomes must happen, or the mutations no longer reach the reader's checks */
        CHECK(cases < 100 || (t->refused > 0 && t->accepted > 0), "%s: %ld refused, %ld accepted", t->name, t->refused,
              t->accepted);
    }
    set_die_hook(NULL);
    w.b->destroy(w.b);
    free(w.model.p), free(w.resume.p), free(w.tokens.p), free(w.masked.p), free(w.data_path);
    char *rm = xasprintf("rm -rf '%s'", at.dir);
    CHECK(system(rm) == 0, "%s", rm);
    free(rm);
    return test_done("test_fuzz_readers");
}
