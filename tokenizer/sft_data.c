/* sft_data: `mmc data --sft`: MiniMind's supervised fine-tuning rows (SFTDataset in
 * dataset/lm_dataset.py) from a jsonl of {"conversations": [{"role", "content"}, ...]},
 * written as token files with a loss-mask plane (runtime/tokens.h, version 2):
 *   roles:  positional by default, as MiniMind's _create_chat_prompt assigns them (entry i
 *           is the user's when i is even, the assistant's when odd, whatever its "role"
 *           says); --roles as-written takes the "role" fields (user, assistant, system);
 *   text:   the conversation rendered as ChatML (chat_template.h: mmc's template, or
 *           MiniMind2's when the tokenizer_config.json holds that one), then encoded with
 *           special tokens matched in the text and no bos/eos added around it;
 *   rows:   the ids cut to seq + 1 and padded with the pad id, the mask MiniMind's
 *           (sft_mask.h) computed on the padded row; --pack: each conversation whole with
 *           its own mask, back to back, cut into rows (MiniMind has no packing for SFT).
 * A conversation goes to the validation file when a hash of its line's bytes falls below
 * --val. Reading, threads, bad lines and --strict are `mmc data`'s (jsonl.h); the output
 * never depends on the thread count. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "chat_template.h"
#include "data_cli.h"
#include "defaults.h"
#include "sft_mask.h"
#include "tokens.h"

typedef struct Piece { /* what one chunk gives one file */
    uint16_t *ids;
    uint8_t *mask;
    size_t n, cap;
    uint64_t conversations, tokens, cut, padding;
} Piece;

static void piece_grow(Piece *p, size_t more) {
    if (p->n + more <= p->cap) return;
    while (p->n + more > p->cap) p->cap = p->cap ? 2 * p->cap : 65536;
    p->ids = xrealloc(p->ids, p->cap * sizeof *p->ids);
    p->mask = xrealloc(p->mask, p->cap);
}

/* what a file got, counted in file order: targets are every token but the first of a row */
typedef struct Tally {
    uint64_t conversations, tokens, cut, padding, targets, counted, empty_rows;
    bool row_counts; /* whether the current row has a counted target yet */
} Tally;

typedef struct Sft {
    const Tokenizer *t;
    uint32_t seq, row; /* row = seq + 1, MiniMind's max_length */
    uint16_t pad;
    uint16_t *bos, *eos; /* the ids of "<|im_start|>assistant" and "<|im_end|>" */
    size_t n_bos, n_eos;
    bool pack, as_written;
    ChatStyle style;
    double val;
    TokenWriter *out[2]; /* train, validation (NULL without --val) */
    Tally total[2];
} Sft;

typedef struct Worker {
    EncodeState *enc;
    IdVec ids;
    StrBuf text;
    ChatTurn *turns;
    size_t cap_turns;
    uint16_t *row;
    uint8_t *mask;
    size_t cap_row;
} Worker;

static void *worker_new(void *ctx) {
    Worker *w = xcalloc(1, sizeof *w);
    w->enc = encode_state_new(((Sft *)ctx)->t);
    return w;
}

static void worker_free(void *ctx, void *state) {
    Worker *w = state;
    encode_state_free(w->enc);
    free(w->ids.ids), sb_free(&w->text), free(w->turns), free(w->row), free(w->mask);
    free(w);
}

/* The turns of a line, or NULL with what is wrong (the content points into root). */
static const ChatTurn *read_turns(const Sft *d, Worker *w, json_t *root, size_t *n, char *err, size_t err_size) {
    json_t *conv = json_is_object(root) ? json_object_get(root, "conversations") : NULL;
    if (!json_is_array(conv)) {
        snprintf(err, err_size, "%s", !json_is_object(root) ? "not a JSON object"
                                      : conv             ? "\"conversations\" is not an array"
                                                         : "no \"conversations\" in the object");
        return NULL;
    }
    *n = json_array_size(conv);
    if (!*n) {
        snprintf(err, err_size, "an empty conversation (\"conversations\" is [])");
        return NULL;
    }
    if (*n > w->cap_turns) {
        w->cap_turns = *n;
        w->turns = xrealloc(w->turns, *n * sizeof *w->turns);
    }
    for (size_t i = 0; i < *n; i++) {
        json_t *e = json_array_get(conv, i), *content = json_object_get(e, "content");
        if (!json_is_object(e)) {
            snprintf(err, err_size, "conversations[%zu] is not an object", i);
            return NULL;
        }
        if (!json_is_string(content)) {
            snprintf(err, err_size, "conversations[%zu]: %s", i, content ? "\"content\" is not a string" : "no \"content\"");
            return NULL;
        }
        ChatTurn *t = &w->turns[i];
        t->content = json_string_value(content), t->len = json_string_length(content);
        if (!d->as_written) { /* MiniMind's _create_chat_prompt: the role field is not read */
            t->role = i % 2 ? CHAT_ASSISTANT : CHAT_USER;
            continue;
        }
        const char *role = json_string_value(json_object_get(e, "role"));
        if (!role) {
            snprintf(err, err_size, "conversations[%zu]: no \"role\" string (--roles as-written reads it)", i);
            return NULL;
        }
        if (!strcmp(role, "user")) t->role = CHAT_USER;
        else if (!strcmp(role, "assistant")) t->role = CHAT_ASSISTANT;
        else if (!strcmp(role, "system")) t->role = CHAT_SYSTEM;
        else {
            snprintf(err, err_size, "conversations[%zu]: unknown role \"%.40s\" (--roles as-written knows user, assistant and system)",
                     i, role);
            return NULL;
        }
    }
    return w->turns;
}

static void reserve_row(Worker *w, size_t n) {
    if (n <= w->cap_row) return;
    w->cap_row = n;
    w->row = xrealloc(w->row, n * sizeof *w->row);
    w->mask = xrealloc(w->mask, n);
}

/* The conversation's ids (w->ids) into p: MiniMind's row (cut to max_length = seq + 1,
 * padded, then masked), or with --pack the whole conversation masked on its own. */
static void add_conversation(const Sft *d, Worker *w, Piece *p) {
    size_t n = w->ids.n, len = d->pack ? n : d->row, kept = n < len ? n : len;
    reserve_row(w, len);
    for (size_t i = 0; i < kept; i++) w->row[i] = (uint16_t)w->ids.ids[i];
    for (size_t i = kept; i < len; i++) w->row[i] = d->pad;
    sft_loss_mask(w->row, len, d->bos, d->n_bos, d->eos, d->n_eos, w->mask);
    piece_grow(p, len);
    memcpy(p->ids + p->n, w->row, len * sizeof *w->row);
    memcpy(p->mask + p->n, w->mask, len);
    p->n += len;
    p->conversations++;
    p->tokens += kept;
    p->cut += n > kept;
    p->padding += len - kept;
}

static void work(void *ctx, void *state, JsonlChunk *c) {
    Sft *d = ctx;
    Worker *w = state;
    Piece *out = xcalloc(2, sizeof *out);
    JsonlCursor cur = {0};
    json_t *root;
    const char *bytes;
    size_t len, n;
    uint64_t line;
    char err[256];
    while (jsonl_next_json(c, &cur, &root, &bytes, &len, &line)) {
        const ChatTurn *turns = read_turns(d, w, root, &n, err, sizeof err);
        if (!turns) {
            jsonl_bad(c, line, "%s", err);
            continue;
        }
        w->text.len = 0;
        chat_render(d->style, turns, n, &w->text);
        w->ids.n = 0;
        tokenizer_encode(w->enc, w->text.s, w->text.len, &w->ids);
        add_conversation(d, w, &out[data_goes_to_val(d->val, bytes, len)]);
    }
    c->result = out;
}

/* appends to file k, counting targets and rows as they fall in the file */
static void append(Sft *d, int k, const uint16_t *ids, const uint8_t *mask, size_t n) {
    Tally *t = &d->total[k];
    uint64_t at = tokens_written(d->out[k]);
    for (size_t i = 0; i < n; i++) {
        if ((at + i) % d->row == 0) {
            if (at + i && !t->row_counts) t->empty_rows++;
            t->row_counts = false;
            continue;
        }
        t->targets++;
        if (mask[i]) t->counted++, t->row_counts = true;
    }
    tokens_append_masked(d->out[k], ids, mask, n);
}

static void consume(void *ctx, JsonlChunk *c) {
    Sft *d = ctx;
    Piece *out = c->result;
    for (int k = 0; k < 2; k++) {
        Piece *p = &out[k];
        if (p->n) append(d, k, p->ids, p->mask, p->n);
        Tally *t = &d->total[k];
        t->conversations += p->conversations, t->tokens += p->tokens, t->cut += p->cut, t->padding += p->padding;
        free(p->ids), free(p->mask);
    }
    free(out);
}

static void abort_output(void *ctx) {
    Sft *d = ctx;
    for (int k = 0; k < 2; k++)
        if (d->out[k]) tokens_abort(d->out[k]), d->out[k] = NULL;
}

/* If anything dies while the files are open (a full disk, say), their temp files go too. */
static Sft *writing;
static void remove_partial_output(void) {
    if (writing) abort_output(writing);
}

static void finish(Sft *d, int k, const char *path) {
    Tally *t = &d->total[k];
    uint8_t zero = 0;
    if (d->pack) /* pad the last row, padding that never counts */
        for (uint64_t i = tokens_written(d->out[k]) % d->row; i && i < d->row; i++) append(d, k, &d->pad, &zero, 1), t->padding++;
    uint64_t tokens = tokens_written(d->out[k]);
    if (tokens && !t->row_counts) t->empty_rows++;
    TokenWriter *w = d->out[k];
    d->out[k] = NULL; /* finished or failed, no longer ours to remove */
    tokens_finish(w);
    printf("%s: %llu rows of %u (seq %u), %llu conversations, %llu tokens, %.1f%% padding, %.1f%% of targets counted", path,
           (unsigned long long)(tokens / d->row), d->row, d->seq, (unsigned long long)t->conversations,
           (unsigned long long)t->tokens, tokens ? 100.0 * (double)t->padding / (double)tokens : 0.0,
           t->targets ? 100.0 * (double)t->counted / (double)t->targets : 0.0);
    if (!d->pack) printf(", %llu conversations cut to seq", (unsigned long long)t->cut);
    printf(", %llu rows with no counted target\n", (unsigned long long)t->empty_rows);
}

static uint16_t *encode_marker(const Tokenizer *t, const char *text, size_t *n) {
    EncodeState *s = encode_state_new(t);
    IdVec v = {0};
    tokenizer_encode(s, text, strlen(text), &v);
    encode_state_free(s);
    uint16_t *ids = xmalloc((v.n ? v.n : 1) * sizeof *ids);
    for (size_t i = 0; i < v.n; i++) ids[i] = (uint16_t)v.ids[i];
    *n = v.n;
    free(v.ids);
    return ids;
}

/* The template the rows are rendered with: --chat-template's, else that of a
 * tokenizer_config.json beside the tokenizer, else mmc's. Says which in *from. */
static ChatStyle pick_template(const char *chat_template, const char *tok_path, char **from) {
    ChatStyle style = CHAT_MMC;
    if (chat_template) {
        if (!chat_template_from_config(chat_template, &style)) die("%s: no \"chat_template\" in it", chat_template);
        *from = xasprintf("from %s", chat_template);
        return style;
    }
    char *dir = path_dirname(tok_path), *cfg = path_join(dir, "tokenizer_config.json");
    free(dir);
    if (strcmp(tok_path, "default") != 0 && access(cfg, F_OK) == 0) {
        if (chat_template_from_config(cfg, &style)) *from = xasprintf("from %s", cfg);
        else *from = xasprintf("%s has no chat_template", cfg);
    } else *from = xstrdup("no tokenizer_config.json beside the tokenizer");
    free(cfg);
    return style;
}

#define SFT_USAGE                                                                                                \
    "data --sft CONVERSATIONS.jsonl --tokenizer tokenizer.json [--seq 512] -o sft.bin [--val F] [--pack] "        \
    "[--roles positional|as-written] [--chat-template tokenizer_config.json] [--threads N] [--strict] [--quiet] " \
    "[--pad TOKEN]"

int cmd_data_sft(int argc, char **argv) {
    const char *input = NULL, *tok_path = NULL, *out = NULL, *pad = "<|endoftext|>", *chat_template = NULL;
    Sft d = {.seq = 512};
    JsonlJob job = {.label = "mmc data --sft"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool valued = !strcmp(a, "--tokenizer") || !strcmp(a, "--seq") || !strcmp(a, "-o") || !strcmp(a, "--val") ||
                      !strcmp(a, "--threads") || !strcmp(a, "--pad") || !strcmp(a, "--roles") || !strcmp(a, "--chat-template");
        if (valued && i + 1 >= argc) die("data --sft: %s needs a value", a);
        if (!strcmp(a, "--sft")) continue;
        else if (!strcmp(a, "--tokenizer")) tok_path = argv[++i];
        else if (!strcmp(a, "--seq")) d.seq = (uint32_t)arg_number("data", a, argv[++i], 1, 1 << 24);
        else if (!strcmp(a, "-o")) out = argv[++i];
        else if (!strcmp(a, "--threads")) job.threads = (int)arg_number("data", a, argv[++i], 1, 1024);
        else if (!strcmp(a, "--pad")) pad = argv[++i];
        else if (!strcmp(a, "--chat-template")) chat_template = argv[++i];
        else if (!strcmp(a, "--roles")) {
            const char *r = argv[++i];
            if (!strcmp(r, "as-written")) d.as_written = true;
            else if (strcmp(r, "positional") != 0) die("data --sft: --roles is positional or as-written, not '%s'", r);
        } else if (!strcmp(a, "--val")) {
            char *end;
            d.val = strtod(argv[++i], &end);
            if (*end || !(d.val >= 0 && d.val < 1)) die("data: --val wants a fraction in [0, 1), not '%s'", argv[i]);
        } else if (!strcmp(a, "--pack")) d.pack = true;
        else if (!strcmp(a, "--strict")) job.strict = true;
        else if (!strcmp(a, "--quiet")) job.quiet = true;
        else if (!strcmp(a, "--bos") || !strcmp(a, "--eos"))
            die("data --sft: %s: the chat template fixes the turn markers (<|im_start|>, <|im_end|>)", a);
        else if (!strcmp(a, "--default")) die("data --sft: there is no built-in conversation corpus (--tokenizer default is fine)");
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: mmc %s\n(the README's section on mmc data has every option)\n", SFT_USAGE);
            return 0;
        } else if (a[0] == '-' && a[1]) {
            static const char *const known[] = {"--sft", "--tokenizer", "--seq", "-o", "--val", "--pack", "--roles",
                                                "--chat-template", "--threads", "--pad", "--strict", "--quiet", NULL};
            die_unknown_option("data --sft", a, known);
        }
        else if (!input) input = a;
        else die("data --sft: one input at a time (got %s and %s)", input, a);
    }
    if (!input) die("data --sft: which conversations? usage: mmc %s", SFT_USAGE);
    if (!tok_path) die("data --sft: which tokenizer? (--tokenizer tokenizer.json)");
    if (!out) die("data --sft: where to? (-o sft.bin)");
    char *template_from = NULL;
    d.style = pick_template(chat_template, tok_path, &template_from);
    Tokenizer *t = tokenizer_open(tok_path);
    if (tokenizer_vocab_size(t) > 65536) die("data: token files hold 16-bit ids, and this tokenizer has %u", tokenizer_vocab_size(t));
    const char *markers[] = {"<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 2; i++)
        if (tokenizer_token_id(t, markers[i]) < 0)
            die("data --sft: %s has no token %s, which ChatML turns are marked with", tok_path, markers[i]);
    d.t = t;
    d.row = d.seq + 1;
    d.pad = data_special_id(t, "--pad", pad);
    /* MiniMind's bos_id and eos_id: tokenizer(f'{bos_token}assistant') and (eos_token) */
    d.bos = encode_marker(t, "<|im_start|>assistant", &d.n_bos);
    d.eos = encode_marker(t, "<|im_end|>", &d.n_eos);
    job.path = input;
    char *vpath = data_val_path(out);
    char sha[65];
    tokenizer_json_sha256(tok_path, sha); /* recorded, so runs can keep the tokenizer */
    d.out[0] = tokens_create_masked(out, tokenizer_vocab_size(t), d.row, d.pad, sha);
    if (d.val > 0) d.out[1] = tokens_create_masked(vpath, tokenizer_vocab_size(t), d.row, d.pad, sha);
    writing = &d;
    atexit(remove_partial_output);
    job.ctx = &d;
    job.worker_new = worker_new;
    job.worker_free = worker_free;
    job.work = work;
    job.consume = consume;
    job.abort = abort_output;
    JsonlStats st = jsonl_run(&job);
    printf("chat template: %s (%s), roles %s\n", chat_style_name(d.style), template_from,
           d.as_written ? "as written" : "positional (user, assistant, user, ...)");
    finish(&d, 0, out);
    if (d.out[1]) finish(&d, 1, vpath);
    writing = NULL;
    if (d.val > 0 && !d.total[1].conversations)
        fprintf(stderr, "mmc: warning: no conversation fell into the validation split (--val %g)\n", d.val);
    data_print_stats(&st);
    free(vpath), free(template_from), free(d.bos), free(d.eos);
    tokenizer_free(t);
    return 0;
}
