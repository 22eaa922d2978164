/* data_cli: `mmc data`: MiniMind's pretraining rows from a jsonl corpus, written as mmc
 * token files (runtime/tokens.h) with row length seq + 1 and pad id <|endoftext|>:
 *   default: one row per document: <|im_start|> text <|im_end|>, the text cut to seq - 1
 *            tokens so the row still ends with <|im_end|> (as MiniMind's PretrainDataset
 *            cuts to max_length - 2), then padding; the trainer leaves targets equal to the
 *            pad id out of the loss, which is MiniMind's loss mask.
 *   --pack:  the documents back to back, cut into rows; only the last row is padded.
 *   --sft:   MiniMind's SFT rows, with a loss mask (sft_data.c).
 * A document goes to the validation file (train.bin -> train.val.bin) when a hash of its
 * text falls below --val, so the split is the same on every run and duplicates of a
 * document land on the same side. Output never depends on the thread count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bytemap.h"
#include "cli.h"
#include "data_cli.h"
#include "defaults.h"
#include "jsonl.h"
#include "tokenizer.h"
#include "tokens.h"

typedef struct U16Vec {
    uint16_t *v;
    size_t n, cap;
} U16Vec;

static void u16_push(U16Vec *v, uint16_t x) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 4096;
        v->v = xrealloc(v->v, v->cap * sizeof *v->v);
    }
    v->v[v->n++] = x;
}

typedef struct Split { /* what one file gets */
    U16Vec tokens;
    uint64_t docs, truncated, text_tokens;
} Split;

typedef struct Data {
    const Tokenizer *t;
    uint32_t seq, row;      /* row = seq + 1 */
    uint16_t bos, eos, pad;
    bool pack;
    double val;
    TokenWriter *out[2];    /* train, validation (NULL without --val) */
    Split total[2];         /* counts only */
} Data;

typedef struct Worker {
    EncodeState *enc;
    IdVec ids;
} Worker;

static void *worker_new(void *ctx) {
    Worker *w = xcalloc(1, sizeof *w);
    w->enc = encode_state_new(((Data *)ctx)->t);
    return w;
}

static void worker_free(void *ctx, void *state) {
    Worker *w = state;
    encode_state_free(w->enc);
    free(w->ids.ids);
    free(w);
}

bool data_goes_to_val(double val, const char *bytes, size_t len) {
    if (val <= 0) return false;
    uint64_t h = bytes_hash(bytes, len) * 0xD6E8FEB86659FD93ULL; /* a different draw than the hash tables' */
    return (double)(h >> 11) / 9007199254740992.0 < val;
}

static void add_document(const Data *d, Split *s, const IdVec *ids) {
    size_t n = ids->n;
    if (!d->pack && n > d->seq - 1) {
        n = d->seq - 1;
        s->truncated++;
    }
    u16_push(&s->tokens, d->bos);
    for (size_t i = 0; i < n; i++) u16_push(&s->tokens, (uint16_t)ids->ids[i]);
    u16_push(&s->tokens, d->eos);
    if (!d->pack)
        for (size_t i = n + 2; i < d->row; i++) u16_push(&s->tokens, d->pad);
    s->docs++;
    s->text_tokens += n;
}

static void work(void *ctx, void *state, JsonlChunk *c) {
    Data *d = ctx;
    Worker *w = state;
    Split *out = xcalloc(2, sizeof *out);
    JsonlCursor cur = {0};
    const char *text;
    size_t len;
    uint64_t line;
    while (jsonl_next(c, &cur, &text, &len, &line)) {
        w->ids.n = 0;
        tokenizer_encode(w->enc, text, len, &w->ids);
        add_document(d, &out[data_goes_to_val(d->val, text, len)], &w->ids);
    }
    c->result = out;
}

static void consume(void *ctx, JsonlChunk *c) {
    Data *d = ctx;
    Split *out = c->result;
    for (int k = 0; k < 2; k++) {
        if (out[k].tokens.n) tokens_append(d->out[k], out[k].tokens.v, out[k].tokens.n);
        d->total[k].docs += out[k].docs;
        d->total[k].truncated += out[k].truncated;
        d->total[k].text_tokens += out[k].text_tokens;
        free(out[k].tokens.v);
    }
    free(out);
}

static void abort_output(void *ctx) {
    Data *d = ctx;
    for (int k = 0; k < 2; k++)
        if (d->out[k]) tokens_abort(d->out[k]), d->out[k] = NULL;
}

/* If anything dies while the files are open (a full disk, say), their temp files go too. */
static Data *writing;
static void remove_partial_output(void) {
    if (writing) abort_output(writing);
}

uint16_t data_special_id(const Tokenizer *t, const char *flag, const char *content) {
    int64_t id = tokenizer_token_id(t, content);
    if (id < 0) die("data: the tokenizer has no token %s (choose another with %s TOKEN)", content, flag);
    return (uint16_t)id;
}

char *data_val_path(const char *out) {
    size_t n = strlen(out);
    if (n > 4 && strcmp(out + n - 4, ".bin") == 0) return xasprintf("%.*s.val.bin", (int)(n - 4), out);
    return xasprintf("%s.val", out);
}

static void finish(Data *d, int k, const char *path) {
    if (d->pack) { /* pad the last row */
        uint64_t rest = tokens_written(d->out[k]) % d->row;
        for (uint64_t i = rest ? rest : d->row; i < d->row; i++) tokens_append(d->out[k], &d->pad, 1);
    }
    uint64_t tokens = tokens_written(d->out[k]);
    TokenWriter *w = d->out[k];
    d->out[k] = NULL; /* finished or failed, no longer ours to remove */
    tokens_finish(w);
    const Split *s = &d->total[k];
    uint64_t used = s->text_tokens + 2 * s->docs;
    printf("%s: %llu rows of %u (seq %u), %llu documents, %llu text tokens, %.1f%% padding", path,
           (unsigned long long)(tokens / d->row), d->row, d->seq, (unsigned long long)s->docs,
           (unsigned long long)s->text_tokens, tokens ? 100.0 * (double)(tokens - used) / (double)tokens : 0.0);
    if (s->truncated) printf(", %llu documents cut to seq", (unsigned long long)s->truncated);
    putchar('\n');
}

void data_print_stats(const JsonlStats *st) {
    printf("%.1f MB, %llu lines in %.1f s (%.1f MB/s)", (double)st->bytes / 1e6, (unsigned long long)st->lines, st->seconds,
           st->seconds > 0 ? (double)st->bytes / 1e6 / st->seconds : 0.0);
    if (st->bad) printf(", %llu bad lines skipped (the first: line %llu)", (unsigned long long)st->bad, (unsigned long long)st->first_bad);
    putchar('\n');
}

int cmd_data(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--sft")) return cmd_data_sft(argc, argv); /* conversations: sft_data.c */
    const char *input = NULL, *tok_path = NULL, *out = NULL;
    const char *bos = "<|im_start|>", *eos = "<|im_end|>", *pad = "<|endoftext|>";
    bool use_default = false;
    Data d = {.seq = 512};
    JsonlJob job = {.label = "mmc data"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool valued = !strcmp(a, "--tokenizer") || !strcmp(a, "--seq") || !strcmp(a, "-o") || !strcmp(a, "--val") ||
                      !strcmp(a, "--threads") || !strcmp(a, "--bos") || !strcmp(a, "--eos") || !strcmp(a, "--pad");
        if (valued && i + 1 >= argc) die("data: %s needs a value", a);
        if (!strcmp(a, "--tokenizer")) tok_path = argv[++i];
        else if (!strcmp(a, "--seq")) d.seq = (uint32_t)arg_number("data", a, argv[++i], 1, 1 << 24);
        else if (!strcmp(a, "-o")) out = argv[++i];
        else if (!strcmp(a, "--threads")) job.threads = (int)arg_number("data", a, argv[++i], 1, 1024);
        else if (!strcmp(a, "--bos")) bos = argv[++i];
        else if (!strcmp(a, "--eos")) eos = argv[++i];
        else if (!strcmp(a, "--pad")) pad = argv[++i];
        else if (!strcmp(a, "--val")) {
            char *end;
            d.val = strtod(argv[++i], &end);
            if (*end || !(d.val >= 0 && d.val < 1)) die("data: --val wants a fraction in [0, 1), not '%s'", argv[i]);
        } else if (!strcmp(a, "--pack")) d.pack = true;
        else if (!strcmp(a, "--strict")) job.strict = true;
        else if (!strcmp(a, "--quiet")) job.quiet = true;
        else if (!strcmp(a, "--default")) use_default = true;
        else if (a[0] == '-' && a[1]) die("data: unknown option %s", a);
        else if (!input) input = a;
        else die("data: one input at a time (got %s and %s)", input, a);
    }
    if (!input && !use_default) die("data: which corpus? usage: mmc data CORPUS.jsonl --tokenizer tokenizer.json --seq 512 -o train.bin [--val 0.005] [--pack], or mmc data --sft CONVERSATIONS.jsonl ... for supervised fine-tuning");
    if (input && use_default) die("data: a corpus or --default, not both");
    if (!tok_path && !use_default) die("data: which tokenizer? (--tokenizer tokenizer.json)");
    if (!out) die("data: where to? (-o train.bin)");
    Tokenizer *t = tokenizer_open(tok_path ? tok_path : "default");
    if (tokenizer_vocab_size(t) > 65536) die("data: token files hold 16-bit ids, and this tokenizer has %u", tokenizer_vocab_size(t));
    d.t = t;
    d.row = d.seq + 1;
    d.bos = data_special_id(t, "--bos", bos), d.eos = data_special_id(t, "--eos", eos), d.pad = data_special_id(t, "--pad", pad);
    if (use_default) job.mem = default_corpus(&job.mem_len);
    else job.path = input;
    char *vpath = data_val_path(out);
    char sha[65];
    tokenizer_json_sha256(tok_path ? tok_path : "default", sha); /* recorded, so runs can keep the tokenizer */
    d.out[0] = tokens_create(out, tokenizer_vocab_size(t), d.row, d.pad, sha);
    if (d.val > 0) d.out[1] = tokens_create(vpath, tokenizer_vocab_size(t), d.row, d.pad, sha);
    writing = &d;
    atexit(remove_partial_output);
    job.ctx = &d;
    job.worker_new = worker_new;
    job.worker_free = worker_free;
    job.work = work;
    job.consume = consume;
    job.abort = abort_output;
    JsonlStats st = jsonl_run(&job);
    finish(&d, 0, out);
    if (d.out[1]) finish(&d, 1, vpath);
    writing = NULL;
    if (d.val > 0 && !d.total[1].docs) fprintf(stderr, "mmc: warning: no document fell into the validation split (--val %g)\n", d.val);
    data_print_stats(&st);
    free(vpath);
    tokenizer_free(t);
    return 0;
}
