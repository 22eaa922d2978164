/* test_tokenizer_fuzz: damaged input must give an error message or a working result, never
 * a crash. A bounded number of random mutations (fixed seed, so a failure repeats):
 *   - tokenizer.json: bit flips, cut/duplicated/inserted bytes, odd values spliced in, and
 *     random JSON values put in random places of the parsed document; each mutant that
 *     loads is used to encode random bytes and decode random ids;
 *   - jsonl: the same damage to a corpus, streamed through the whole `mmc data` pipeline
 *     (jsonl_run on 2 threads, encoding every document), which must skip what is bad.
 * Errors reach die(), which here jumps back to the loop instead of exiting. */
#include <jansson.h>
#include <setjmp.h>

#include "bpe_train.h"
#include "jsonl.h"
#include "test_util.h"
#include "tokenizer.h"

enum { JSON_MUTANTS = 4000, JSONL_MUTANTS = 100 };

static jmp_buf on_die;
static int died;
static void jump_back(const char *message) {
    died++;
    longjmp(on_die, 1);
}

static size_t below(size_t n) { return n ? (size_t)(test_uniform() * (double)n) : 0; }

static const char *odd[] = {"null", "true", "false", "-1", "0", "4294967296", "99999999999999999999", "1e309", "\"\"",
                            "\"\\u0000\"", "\"<|im_end|>\"", "\"a b\"", "\" \"", "[]", "{}", "[[", "}", ",", ":",
                            "\"\\ud800\"", "\"\xff\"", "\"Ġ\"", "\"type\"", "\"BPE\"", "\"ByteLevel\""};

/* One random textual change to text (a StrBuf holding len bytes). */
static void mutate_text(StrBuf *b) {
    size_t n = b->len;
    switch (below(6)) {
    case 0: /* flip bits */
        for (int k = 0; k < 1 + (int)below(8) && n; k++) b->s[below(n)] ^= (char)(1 << below(8));
        break;
    case 1: { /* cut a range */
        size_t at = below(n), len = below(n - at < 64 ? n - at : 64);
        memmove(b->s + at, b->s + at + len, n - at - len);
        b->len -= len;
        break;
    }
    case 2: { /* duplicate a range somewhere else */
        size_t at = below(n), len = below(n - at < 200 ? n - at : 200), to = below(n);
        char *piece = xstrndup(b->s + at, len);
        StrBuf c = {0};
        sb_appendn(&c, b->s, to), sb_appendn(&c, piece, len), sb_appendn(&c, b->s + to, n - to);
        free(piece), free(b->s);
        *b = c;
        break;
    }
    case 3: { /* splice in an odd value */
        const char *v = odd[below(sizeof odd / sizeof *odd)];
        size_t to = below(n);
        StrBuf c = {0};
        sb_appendn(&c, b->s, to), sb_append(&c, v), sb_appendn(&c, b->s + to, n - to);
        free(b->s);
        *b = c;
        break;
    }
    case 4: /* cut the end */
        b->len = below(n);
        break;
    default: { /* change a number */
        for (int tries = 0; tries < 50; tries++) {
            size_t at = below(n);
            if (b->s[at] >= '0' && b->s[at] <= '9') {
                b->s[at] = "0123456789-"[below(11)];
                break;
            }
        }
    }
    }
    if (b->s) b->s[b->len] = 0;
}

static json_t *random_value(int depth) {
    switch (below(depth > 1 ? 6 : 8)) {
    case 0: return json_null();
    case 1: return json_boolean(below(2));
    case 2: return json_integer((json_int_t)below(70000) - 5);
    case 3: return json_string(odd[below(sizeof odd / sizeof *odd)] + 1);
    case 4: return json_string("<|im_start|>");
    case 5: return json_real(0.5);
    case 6: {
        json_t *a = json_array();
        for (size_t i = below(4); i > 0; i--) json_array_append_new(a, random_value(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        static const char *keys[] = {"type", "content", "id", "special", "lstrip", "rstrip", "normalized", "single_word", "vocab", "merges"};
        for (size_t i = below(4); i > 0; i--) json_object_set_new(o, keys[below(10)], random_value(depth + 1));
        return o;
    }
    }
}

/* One random change to the parsed document: a value replaced, a key removed, or a list
 * entry added. */
static void mutate_tree(json_t *root) {
    json_t *node = root;
    for (int depth = 0; depth < 4; depth++) {
        json_t *next = NULL;
        if (json_is_object(node) && json_object_size(node)) {
            size_t k = below(json_object_size(node));
            void *it = json_object_iter(node);
            while (k--) it = json_object_iter_next(node, it);
            next = json_object_iter_value(it);
            if (below(3) == 0 || !(json_is_object(next) || json_is_array(next))) {
                if (below(4) == 0) json_object_del(node, json_object_iter_key(it));
                else json_object_iter_set_new(node, it, random_value(0));
                return;
            }
        } else if (json_is_array(node) && json_array_size(node)) {
            size_t i = below(json_array_size(node));
            if (below(3) == 0) {
                if (below(2)) json_array_set_new(node, i, random_value(0));
                else json_array_insert_new(node, i, random_value(0));
                return;
            }
            next = json_array_get(node, i);
        }
        if (!next) return;
        node = next;
    }
}

static void use(Tokenizer *t) {
    EncodeState *s = encode_state_new(t);
    IdVec ids = {0};
    StrBuf text = {0};
    for (int i = 0; i < 8; i++) {
        StrBuf in = {0};
        for (size_t k = below(60); k > 0; k--) {
            char c = (char)below(256);
            if (below(4) == 0) sb_append(&in, odd[below(sizeof odd / sizeof *odd)]);
            else sb_appendn(&in, &c, 1);
        }
        ids.n = 0;
        tokenizer_encode(s, in.s ? in.s : "", in.len, &ids);
        for (size_t k = 0; k < ids.n; k++) CHECK(ids.ids[k] < tokenizer_vocab_size(t), "id %u >= vocab %u", ids.ids[k], tokenizer_vocab_size(t));
        for (size_t k = below(20); k > 0; k--) idvec_push(&ids, (uint32_t)below(tokenizer_vocab_size(t) + 10));
        text.len = 0;
        tokenizer_decode(t, ids.ids, ids.n, below(2), &text);
        sb_free(&in);
    }
    free(ids.ids);
    sb_free(&text);
    encode_state_free(s);
}

static char *small_tokenizer(void) {
    size_t len;
    char *corpus = read_file("tokenizer/default/corpus.jsonl", &len);
    WordCounts wc = {0};
    int docs = 0;
    for (char *line = corpus, *nl; (nl = strchr(line, '\n')) && docs < 150; line = nl + 1, docs++) {
        const char *text;
        size_t n;
        void *doc;
        char err[256];
        if (jsonl_line_text(line, (size_t)(nl - line), &text, &n, &doc, err, sizeof err) == 1) word_counts_add_text(&wc, text, n);
        jsonl_text_free(doc);
    }
    const char *extra = "hello world, it's 2024 <|im_end|> 😀";
    word_counts_add_text(&wc, extra, strlen(extra));
    static const char *special[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    BpeTrainOptions opt = {.vocab_size = 420, .special = special, .n_special = 3, .quiet = true};
    BpeTrainResult r = bpe_train(&wc, &opt);
    word_counts_free(&wc);
    free(corpus);
    /* and the parts of the format the trainer does not write */
    json_t *root = json_loads(r.json, 0, NULL);
    free(r.json);
    json_t *added = json_object_get(root, "added_tokens"), *model = json_object_get(root, "model");
    json_array_append_new(added, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", 420, "content", "<tool>", "single_word", 0,
                                           "lstrip", 1, "rstrip", 1, "normalized", 0, "special", 1));
    json_array_append_new(added, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", 421, "content", "hello", "single_word", 0,
                                           "lstrip", 0, "rstrip", 0, "normalized", 1, "special", 0));
    json_object_set_new(model, "unk_token", json_string("<|endoftext|>"));
    json_object_set_new(model, "byte_fallback", json_true());
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return text;
}

static void fuzz_tokenizer_json(void) {
    char *base = small_tokenizer();
    int loaded = 0, rejected = 0;
    for (int i = 0; i < JSON_MUTANTS; i++) {
        StrBuf b = {0};
        if (i % 2) { /* damage the text */
            sb_append(&b, base);
            for (size_t k = 1 + below(3); k > 0; k--) mutate_text(&b);
        } else { /* damage the document */
            json_t *root = json_loads(base, 0, NULL);
            for (size_t k = 1 + below(3); k > 0; k--) mutate_tree(root);
            char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
            sb_append(&b, text ? text : "");
            free(text);
            json_decref(root);
        }
        if (setjmp(on_die) == 0) {
            Tokenizer *t = tokenizer_parse(b.s ? b.s : "", b.len, "fuzzed tokenizer.json");
            loaded++;
            use(t);
            tokenizer_free(t);
        } else rejected++;
        sb_free(&b);
    }
    printf("tokenizer.json: %d mutants loaded and used, %d rejected with a message\n", loaded, rejected);
    CHECK(loaded > JSON_MUTANTS / 10 && rejected > JSON_MUTANTS / 10, "the mutations should both keep and break files");
    free(base);
}

/* ---- jsonl through the data pipeline */

typedef struct Run {
    const Tokenizer *t;
    uint64_t docs, tokens;
} Run;

static void *run_worker_new(void *ctx) { return encode_state_new(((Run *)ctx)->t); }
static void run_worker_free(void *ctx, void *state) { encode_state_free(state); }
static void run_work(void *ctx, void *state, JsonlChunk *c) {
    JsonlCursor cur = {0};
    const char *text;
    size_t len;
    uint64_t line;
    IdVec ids = {0};
    uint64_t *counts = xcalloc(2, sizeof *counts);
    while (jsonl_next(c, &cur, &text, &len, &line)) {
        ids.n = 0;
        tokenizer_encode(state, text, len, &ids);
        counts[0]++, counts[1] += ids.n;
    }
    free(ids.ids);
    c->result = counts;
}
static void run_consume(void *ctx, JsonlChunk *c) {
    Run *r = ctx;
    uint64_t *counts = c->result;
    r->docs += counts[0], r->tokens += counts[1];
    free(counts);
}

static void fuzz_jsonl(void) {
    size_t len;
    char *corpus = read_file("tokenizer/default/corpus.jsonl", &len);
    char *end = corpus;
    for (int k = 0; k < 300; k++) end = strchr(end, '\n') + 1;
    Tokenizer *t = tokenizer_load("tokenizer/default/tokenizer.json");
    uint64_t bad = 0, docs = 0;
    for (int i = 0; i < JSONL_MUTANTS; i++) {
        StrBuf b = {0};
        sb_appendn(&b, corpus, (size_t)(end - corpus));
        for (size_t k = 1 + below(30); k > 0; k--) mutate_text(&b);
        Run r = {t, 0, 0};
        JsonlJob job = {.mem = b.s ? b.s : "", .mem_len = b.len, .label = "fuzz", .threads = 2, .quiet = true, .ctx = &r,
                        .worker_new = run_worker_new, .worker_free = run_worker_free, .work = run_work, .consume = run_consume};
        if (setjmp(on_die) == 0) {
            fflush(stderr);
            FILE *saved = stderr; /* the warnings about bad lines are expected; keep them out of the log */
            stderr = fopen("/dev/null", "w");
            JsonlStats st = jsonl_run(&job);
            fclose(stderr);
            stderr = saved;
            bad += st.bad;
            docs += r.docs;
            CHECK(r.docs + st.bad <= st.lines, "%llu documents and %llu bad lines in %llu lines", (unsigned long long)r.docs,
                  (unsigned long long)st.bad, (unsigned long long)st.lines);
        } else CHECK(0, "mutant %d: jsonl_run died without --strict", i);
        sb_free(&b);
    }
    printf("jsonl: %d damaged corpora streamed, %llu documents encoded, %llu bad lines skipped\n", JSONL_MUTANTS,
           (unsigned long long)docs, (unsigned long long)bad);
    CHECK(bad > 0 && docs > 0, "the damage should make some lines bad and leave others");
    tokenizer_free(t);
    free(corpus);
}

int main(void) {
    set_die_hook(jump_back);
    fuzz_tokenizer_json();
    fuzz_jsonl();
    set_die_hook(NULL);
    return test_done("test_tokenizer_fuzz");
}
