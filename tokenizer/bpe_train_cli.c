/* bpe_train_cli: `mmc tokenizer train`: counts the words of a jsonl corpus on every core, then
 * learns the merges (bpe_train.c) and writes tokenizer.json atomically. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bpe_train.h"
#include "defaults.h"
#include "jsonl.h"
#include "pretokenize.h"
#include "utf8.h"

static const char *minimind_special[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

typedef struct Counting {
    pthread_mutex_t lock;
    WordCounts **done; /* each worker's counts, handed over when it ends */
    int n_done;
    uint64_t docs;
} Counting;

static void *counter_new(void *ctx) { return xcalloc(1, sizeof(WordCounts)); }

static void count_chunk(void *ctx, void *state, JsonlChunk *c) {
    Counting *k = ctx;
    JsonlCursor cur = {0};
    const char *text;
    size_t len;
    uint64_t line, docs = 0;
    while (jsonl_next(c, &cur, &text, &len, &line)) {
        word_counts_add_text(state, text, len);
        docs++;
    }
    pthread_mutex_lock(&k->lock);
    k->docs += docs;
    pthread_mutex_unlock(&k->lock);
}

static void counter_done(void *ctx, void *state) {
    Counting *k = ctx;
    pthread_mutex_lock(&k->lock);
    k->done[k->n_done++] = state;
    pthread_mutex_unlock(&k->lock);
}

static void nothing(void *ctx, JsonlChunk *c) {}

int tokenizer_train_cmd(int argc, char **argv) {
    const char *corpus = NULL, *out = NULL;
    bool use_default = false;
    JsonlJob job = {.label = "mmc tokenizer train"};
    BpeTrainOptions opt = {.vocab_size = 0, .special = minimind_special, .n_special = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool valued = !strcmp(a, "--vocab") || !strcmp(a, "-o") || !strcmp(a, "--min-frequency") ||
                      !strcmp(a, "--special") || !strcmp(a, "--threads");
        if (valued && i + 1 >= argc) die("tokenizer train: %s needs a value", a);
        if (!strcmp(a, "--vocab")) opt.vocab_size = (uint32_t)arg_number("tokenizer train", a, argv[++i], 1, 1 << 24);
        else if (!strcmp(a, "-o")) out = argv[++i];
        else if (!strcmp(a, "--min-frequency")) opt.min_frequency = (uint64_t)arg_number("tokenizer train", a, argv[++i], 0, 1L << 40);
        else if (!strcmp(a, "--threads")) job.threads = (int)arg_number("tokenizer train", a, argv[++i], 1, 1024);
        else if (!strcmp(a, "--special")) {
            char *list = xstrdup(argv[++i]);
            opt.special = xcalloc(strlen(list) + 1, sizeof *opt.special);
            opt.n_special = 0;
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                if (!utf8_valid((const uint8_t *)tok, strlen(tok))) die("tokenizer train: --special '%s' is not UTF-8", tok);
                opt.special[opt.n_special++] = tok;
            }
        } else if (!strcmp(a, "--default")) use_default = true;
        else if (!strcmp(a, "--strict")) job.strict = true;
        else if (!strcmp(a, "--quiet")) job.quiet = opt.quiet = true;
        else if (a[0] == '-' && a[1]) die("tokenizer train: unknown option %s", a);
        else if (!corpus) corpus = a;
        else die("tokenizer train: one corpus at a time (got %s and %s)", corpus, a);
    }
    if (!corpus && !use_default) die("tokenizer train: which corpus? (CORPUS.jsonl, or --default for the built-in one)");
    if (corpus && use_default) die("tokenizer train: a corpus or --default, not both");
    if (!out) die("tokenizer train: where to? (-o tokenizer.json)");
    if (!opt.vocab_size) opt.vocab_size = DEFAULT_VOCAB;
    if (use_default) job.mem = default_corpus(&job.mem_len);
    else job.path = corpus;

    pretokenize_init();
    Counting k = {.done = xcalloc((size_t)(job.threads > 0 ? job.threads : default_threads()), sizeof(WordCounts *))};
    pthread_mutex_init(&k.lock, NULL);
    job.ctx = &k;
    job.worker_new = counter_new;
    job.worker_free = counter_done;
    job.work = count_chunk;
    job.consume = nothing;
    JsonlStats st = jsonl_run(&job);
    WordCounts *all = k.done[0];
    for (int i = 1; i < k.n_done; i++) {
        word_counts_merge(all, k.done[i]);
        word_counts_free(k.done[i]);
        free(k.done[i]);
    }
    BpeTrainResult r = bpe_train(all, &opt);
    write_file_atomic(out, r.json, strlen(r.json));
    if (!job.quiet) {
        printf("%s: vocabulary %u (%d special, 256 bytes, %u merges) from %llu documents, %zu distinct words, %.1f MB", out,
               r.vocab_size, opt.n_special, r.n_merges, (unsigned long long)k.docs, r.n_words, (double)st.bytes / 1e6);
        if (st.bad) printf(", %llu bad lines skipped (the first: line %llu)", (unsigned long long)st.bad, (unsigned long long)st.first_bad);
        putchar('\n');
    }
    if (r.vocab_size < opt.vocab_size && !job.quiet)
        fprintf(stderr, "mmc: warning: the corpus ran out of pairs to merge: vocabulary %u, not %u\n", r.vocab_size, opt.vocab_size);
    word_counts_free(all);
    free(all);
    free(k.done);
    free(r.json);
    return 0;
}
