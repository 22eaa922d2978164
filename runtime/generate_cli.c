/* generate_cli: `mmc generate RUN_DIR|W.safetensors --prompt TEXT`: text from a trained
 * model, a token at a time, streamed as it comes.
 *
 * The plan is the run's graph compiled again without a backward pass, at batch 1 (`mmc
 * compile --forward -D batch=1`): the run's config.json names the graph file, the policy
 * and every -D setting it was trained with. Its seq is the fewest multiple of 64 that holds
 * the prompt and the new tokens (at most the trained seq), since a causal model's output at
 * a position does not depend on what comes after it. Each new token is one forward pass over
 * the window (the last seq tokens), and the logits at the window's last token choose it:
 * greedy at --temperature 0, else a draw from softmax(logits / T) cut to the --top-k most
 * likely tokens and the smallest set of them whose probability reaches --top-p. The prompt
 * starts with the tokenizer's <|im_start|>, as every row of `mmc data` does.
 *
 * --chat TEXT is one user turn in ChatML as `mmc data --sft` renders conversations (the
 * default system turn, or --system's), then the assistant's opening, `<|im_start|>assistant\n`
 * (add_generation_prompt): the reply is generated from there, printed alone, and ends at
 * <|im_end|>, where a fine-tuned model closes its turn. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "chat_template.h"
#include "checkpoint.h"
#include "cli.h"
#include "defaults.h"
#include "init.h"
#include "plan.h"
#include "plan_remake.h"
#include "rng.h"
#include "tokenizer.h"
#include "train.h"
#include "util.h"

typedef struct GenerateOptions {
    const char *weights;   /* RUN_DIR or W.safetensors */
    const char *prompt;
    const char *chat;      /* a user turn, rendered with the chat template */
    const char *system;    /* the system turn of --chat, or NULL for the default one */
    const char *tokenizer; /* tokenizer.json; else the run's own; else the built-in one */
    const char *plan;      /* a plan folder to run instead of compiling one */
    const char *graph;     /* the graph file, when the run's config.json does not name one */
    const char *policy;    /* instead of the run's policy */
    const char *backend;   /* ref, cuda or auto */
    int64_t max_new;
    double temperature, top_p;
    int64_t top_k;
    uint64_t seed;
    int ignore_eos, print_ids, quiet;
    Define *defines;
    int n_defines, cap_defines;
} GenerateOptions;

/* ---- choosing the next token */

typedef struct Scored {
    float logit;
    uint32_t id;
} Scored;

static int by_logit_desc(const void *a, const void *b) {
    const Scored *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id; /* ties: the lower id first, as argmax takes it */
}

/* The next token from n logits. NaN logits are never chosen; all NaN is an error. */
static uint32_t choose_token(const float *logits, uint32_t n, const GenerateOptions *o, uint64_t *rng, Scored *work) {
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!isnan(logits[i])) work[m++] = (Scored){logits[i], i};
    if (!m) die("generate: every logit is NaN: the weights are broken (train diverged?)");
    if (o->temperature <= 0) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < m; i++)
            if (work[i].logit > work[best].logit) best = i;
        return work[best].id;
    }
    qsort(work, m, sizeof *work, by_logit_desc);
    if (o->top_k > 0 && (uint32_t)o->top_k < m) m = (uint32_t)o->top_k;
    double *p = xmalloc(m * sizeof *p), total = 0;
    for (uint32_t i = 0; i < m; i++) total += p[i] = exp(((double)work[i].logit - work[0].logit) / o->temperature);
    if (o->top_p < 1) { /* the smallest prefix whose probability reaches top_p */
        double c = 0;
        uint32_t keep = 0;
        while (keep < m && c < o->top_p * total) c += p[keep++];
        m = keep ? keep : 1;
        total = 0;
        for (uint32_t i = 0; i < m; i++) total += p[i];
    }
    double u = rng_uniform(rng) * total, c = 0;
    uint32_t pick = m - 1;
    for (uint32_t i = 0; i < m; i++) {
        c += p[i];
        if (u < c) {
            pick = i;
            break;
        }
    }
    free(p);
    return work[pick].id;
}

/* ---- the plan */

/* the run folder of a weights argument: the folder itself, or the folder of a .safetensors
 * file when a config.json lies beside it; NULL when there is none */
static char *run_dir_of(const char *weights) {
    struct stat st;
    if (stat(weights, &st) != 0) die("generate: %s: no such run folder or weights file", weights);
    char *dir = S_ISDIR(st.st_mode) ? xstrdup(weights) : path_dirname(weights);
    char *cfg = path_join(dir, "config.json");
    int ok = access(cfg, R_OK) == 0;
    free(cfg);
    if (ok) return dir;
    free(dir);
    return NULL;
}

static void add_define(GenerateOptions *o, const char *key, const char *value) {
    for (int i = 0; i < o->n_defines; i++)
        if (!strcmp(o->defines[i].key, key)) return; /* the command line's -D comes first and wins */
    Define d = {xstrdup(key), xstrdup(value)};
    vec_push(o->defines, o->n_defines, o->cap_defines, d);
}

/* The run's graph forward-only at batch 1 and the seq generation needs, in a temp folder. */
static char *compile_generate_plan(GenerateOptions *o, const char *run_dir, int64_t *seq_io) {
    /* the trained seq bounds the window; the plan takes what the prompt and new tokens need */
    char *trained_s = run_dir ? run_setting(run_dir, "seq") : NULL;
    int64_t trained = trained_s ? strtoll(trained_s, NULL, 10) : 0;
    free(trained_s);
    for (int i = 0; i < o->n_defines; i++)
        if (!strcmp(o->defines[i].key, "seq")) trained = strtoll(o->defines[i].value, NULL, 10);
    int64_t seq = (*seq_io + 63) / 64 * 64;
    if (trained > 0 && seq > trained) seq = trained;
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)seq);
    add_define(o, "seq", num);
    add_define(o, "batch", "1");
    add_define(o, "accumulation", "1");
    *seq_io = seq;
    return plan_from_run("generate", run_dir, o->graph, o->policy, o->defines, o->n_defines, 1);
}

/* ---- streaming text */

/* Prints what the ids decode to beyond the `printed` bytes already out, holding back a
 * trailing U+FFFD: the bytes of a character split over two tokens decode as one later. */
static void stream_text(const Tokenizer *tok, const uint32_t *ids, size_t n, size_t *printed, int final) {
    StrBuf s = {0};
    tokenizer_decode(tok, ids, n, true, &s);
    size_t len = s.len;
    if (!final)
        while (len >= 3 && (unsigned char)s.s[len - 3] == 0xEF && (unsigned char)s.s[len - 2] == 0xBF &&
               (unsigned char)s.s[len - 1] == 0xBD)
            len -= 3;
    if (len > *printed) {
        fwrite(s.s + *printed, 1, len - *printed, stdout);
        fflush(stdout);
        *printed = len;
    }
    free(s.s);
}

static Tokenizer *open_tokenizer(const char *path, const char *run_dir) {
    char *kept = run_dir ? path_join(run_dir, "tokenizer.json") : NULL;
    Tokenizer *t;
    if (path && strcmp(path, "default")) t = tokenizer_load(path);
    else if (!path && kept && access(kept, R_OK) == 0) t = tokenizer_load(kept);
    else {
        const char *json = default_tokenizer_json();
        t = tokenizer_parse(json, strlen(json), "the built-in tokenizer");
    }
    free(kept);
    return t;
}

static const char *value_of(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) die("generate: %s needs a value", argv[*i]);
    return argv[++*i];
}

int cmd_generate(int argc, char **argv) {
    GenerateOptions o = {0};
    o.backend = "auto", o.max_new = 64, o.temperature = 1.0, o.top_p = 1.0, o.seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--prompt")) o.prompt = value_of(argc, argv, &i);
        else if (!strcmp(a, "--chat")) o.chat = value_of(argc, argv, &i);
        else if (!strcmp(a, "--system")) o.system = value_of(argc, argv, &i);
        else if (!strcmp(a, "--tokenizer")) o.tokenizer = value_of(argc, argv, &i);
        else if (!strcmp(a, "--plan")) o.plan = value_of(argc, argv, &i);
        else if (!strcmp(a, "--graph")) o.graph = value_of(argc, argv, &i);
        else if (!strcmp(a, "--policy")) o.policy = value_of(argc, argv, &i);
        else if (!strcmp(a, "--backend")) o.backend = value_of(argc, argv, &i);
        else if (!strcmp(a, "--max-new-tokens")) o.max_new = option_int("generate", a, value_of(argc, argv, &i), 1);
        else if (!strcmp(a, "--temperature")) o.temperature = option_double("generate", a, value_of(argc, argv, &i));
        else if (!strcmp(a, "--top-k")) o.top_k = option_int("generate", a, value_of(argc, argv, &i), 0);
        else if (!strcmp(a, "--top-p")) o.top_p = option_double("generate", a, value_of(argc, argv, &i));
        else if (!strcmp(a, "--seed")) o.seed = (uint64_t)option_range("generate", a, value_of(argc, argv, &i), 0, INT64_MAX);
        else if (!strcmp(a, "--greedy")) o.temperature = 0;
        else if (!strcmp(a, "--ignore-eos")) o.ignore_eos = 1;
        else if (!strcmp(a, "--ids")) o.print_ids = 1;
        else if (!strcmp(a, "--quiet")) o.quiet = 1;
        else if (!strcmp(a, "-D") || (!strncmp(a, "-D", 2) && a[2])) {
            const char *kv = !strcmp(a, "-D") ? value_of(argc, argv, &i) : a + 2;
            const char *eq = strchr(kv, '=');
            if (!eq || eq == kv) die("generate: -D needs key=value, got '%s'", kv);
            Define d = {xstrndup(kv, (size_t)(eq - kv)), xstrdup(eq + 1)};
            vec_push(o.defines, o.n_defines, o.cap_defines, d);
        } else if (a[0] == '-') {
            static const char *const known[] = {"--prompt", "--chat", "--system", "--tokenizer", "--plan", "--graph", "--policy", "--backend",
                                                "--max-new-tokens", "--temperature", "--top-k", "--top-p", "--seed",
                                                "--greedy", "--ignore-eos", "--ids", "--quiet", "-D", NULL};
            die_unknown_option("generate", a, known);
        } else if (!o.weights) o.weights = a;
        else die("generate: one run folder or weights file (got %s and %s)", o.weights, a);
    }
    if (!o.weights || !o.prompt == !o.chat)
        die("generate: usage: mmc generate RUN_DIR|W.safetensors --prompt TEXT | --chat TEXT [--system TEXT] "
            "[--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--greedy] [--tokenizer FILE] "
            "[--backend ref|cuda]");
    if (o.system && !o.chat) die("generate: --system is the system turn of --chat");
    if (o.temperature < 0 || !isfinite(o.temperature)) die("generate: --temperature %g: 0 (greedy) or more", o.temperature);
    if (!(o.top_p > 0 && o.top_p <= 1)) die("generate: --top-p %g: in (0, 1]", o.top_p);

    char *run_dir = run_dir_of(o.weights);
    struct stat st;
    stat(o.weights, &st);
    char *weights = S_ISDIR(st.st_mode) ? path_join(o.weights, "model.safetensors") : xstrdup(o.weights);
    Tokenizer *tok = open_tokenizer(o.tokenizer, run_dir);
    IdVec text = {0}, prompt = {0};
    StrBuf chat = {0};
    int64_t turn_end = -1; /* --chat: the id that closes the assistant's turn */
    if (o.chat) {
        ChatTurn turns[2];
        size_t n = 0;
        if (o.system) turns[n++] = (ChatTurn){CHAT_SYSTEM, o.system, strlen(o.system)};
        turns[n++] = (ChatTurn){CHAT_USER, o.chat, strlen(o.chat)};
        chat_render(CHAT_MMC, turns, n, &chat); /* one user turn: MiniMind2's template renders the same */
        sb_append(&chat, "<|im_start|>assistant\n");
        turn_end = tokenizer_token_id(tok, "<|im_end|>");
        if (turn_end < 0 || tokenizer_token_id(tok, "<|im_start|>") < 0)
            die("generate: --chat needs a tokenizer with <|im_start|> and <|im_end|> (ChatML), which this one lacks");
    }
    const char *source = o.chat ? chat.s : o.prompt;
    EncodeState *es = encode_state_new(tok);
    tokenizer_encode(es, source, strlen(source), &text);
    encode_state_free(es);

    int64_t seq = (int64_t)text.n + 1 + o.max_new; /* room for the start id, if the model has one */
    char *tmp_plan = o.plan ? NULL : compile_generate_plan(&o, run_dir, &seq);
    Plan *pl = plan_load(o.plan ? o.plan : tmp_plan);
    const Node *ids_leaf = train_role(pl, ROLE_TOKENS), *labels_leaf = train_role(pl, ROLE_TARGETS);
    /* a text starts with the model's start id and ends at its end id, as model{} declares them */
    const ModelInfo *mi = &pl->g->model;
    int64_t bos = model_has(mi, MF_BOS_ID) ? mi->value[MF_BOS_ID] : -1, eos = model_has(mi, MF_EOS_ID) ? mi->value[MF_EOS_ID] : -1;
    if (bos >= 0 && !o.chat) idvec_push(&prompt, (uint32_t)bos); /* a chat starts with <|im_start|> itself */
    for (size_t i = 0; i < text.n; i++) idvec_push(&prompt, text.ids[i]);
    free(text.ids);
    const Node *loss = pl->g->loss, *logits = loss->n_in ? loss->in[0] : NULL;
    if (loss->op != OP_CROSS_ENTROPY || !logits || !logits->materialized || logits->buffer != BUF_ARENA)
        die("generate: %s keeps no logits to read (compile it with --forward, as generate does itself)", pl->path);
    int64_t T = ids_leaf->shape.dim[1], V = logits->shape.dim[logits->shape.rank - 1];
    uint32_t vocab = train_vocab(pl), usable = tokenizer_vocab_size(tok) < vocab ? tokenizer_vocab_size(tok) : vocab;
    for (size_t i = 0; i < prompt.n; i++)
        if (prompt.ids[i] >= vocab)
            die("generate: the prompt has token %u, past the model's vocabulary of %u: give the tokenizer the run was "
                "trained with (--tokenizer FILE)", prompt.ids[i], vocab);

    Backend *b = NULL;
    if (!strcmp(o.backend, "auto")) {
        char *why = NULL;
        b = cuda_backend_create(pl, &why);
        if (!b) {
            if (!o.quiet) fprintf(stderr, "mmc: generate: no GPU (%s); on the CPU\n", why);
            b = ref_backend_create(pl);
        }
    } else b = backend_open(pl, o.backend, "generate");
    init_consts(b);
    checkpoint_load_weights(b, weights);
    MmcStepState state = init_state(pl, 1);
    b->write(b, BUF_STATE, 0, &state, sizeof state);

    /* the window past the text: its logits do not depend on what fills it (causal), so any id
     * does where the model has no pad id */
    int64_t pad = model_has(&pl->g->model, MF_PAD_ID) ? pl->g->model.value[MF_PAD_ID] : 0;
    int32_t *ids = xmalloc((size_t)T * sizeof *ids), *labels = xmalloc((size_t)T * sizeof *labels);
    for (int64_t t = 0; t < T; t++) labels[t] = (int32_t)loss->a.ignore_index; /* no loss is wanted */
    b->write(b, BUF_IO, labels_leaf->offset, labels, T * (int64_t)sizeof *labels);
    size_t esize = dtype_size(logits->dtype);
    unsigned char *raw = xmalloc((size_t)V * esize);
    float *row = xmalloc((size_t)V * sizeof *row);
    Scored *work = xmalloc((size_t)V * sizeof *work);
    uint64_t rng = o.seed * 0x9E3779B97F4A7C15ull + 1;

    size_t n_prompt = prompt.n, printed = 0;
    if (!o.chat) fwrite(o.prompt, 1, strlen(o.prompt), stdout); /* a chat prints the reply alone */
    fflush(stdout);
    double t0 = now_seconds();
    int64_t made = 0;
    for (; made < o.max_new; made++) {
        size_t n = prompt.n, start = n > (size_t)T ? n - (size_t)T : 0, len = n - start;
        for (int64_t t = 0; t < T; t++) ids[t] = t < (int64_t)len ? (int32_t)prompt.ids[start + (size_t)t] : (int32_t)pad;
        b->write(b, BUF_IO, ids_leaf->offset, ids, T * (int64_t)sizeof *ids);
        b->run_phase(b, PHASE_MICRO);
        b->read(b, logits->buffer, logits->offset + (int64_t)(len - 1) * V * (int64_t)esize, raw, V * (int64_t)esize);
        for (int64_t j = 0; j < V; j++) row[j] = (float)dtype_load(logits->dtype, raw, j);
        uint32_t next = choose_token(row, usable, &o, &rng, work);
        if (!o.ignore_eos && ((eos >= 0 && next == (uint32_t)eos) || (turn_end >= 0 && next == (uint32_t)turn_end))) break;
        idvec_push(&prompt, next);
        stream_text(tok, prompt.ids + n_prompt, prompt.n - n_prompt, &printed, 0);
    }
    stream_text(tok, prompt.ids + n_prompt, prompt.n - n_prompt, &printed, 1);
    double secs = now_seconds() - t0;
    fputc('\n', stdout);
    if (o.print_ids) {
        printf("ids:");
        for (size_t i = 0; i < prompt.n; i++) printf(" %u", prompt.ids[i]);
        printf("\n");
    }
    fflush(stdout);
    if (!o.quiet)
        fprintf(stderr, "mmc: generate: %lld tokens in %.2f s, %.1f tokens/s (%s, window of %lld)\n", (long long)made, secs,
                secs > 0 ? (double)made / secs : 0.0, b->name ? b->name : o.backend, (long long)T);
    b->destroy(b);
    if (tmp_plan) plan_remove_temp(tmp_plan);
    free(ids), free(labels), free(raw), free(row), free(work), free(weights), free(run_dir), free(tmp_plan);
    free(prompt.ids);
    sb_free(&chat);
    tokenizer_free(tok);
    return 0;
}
