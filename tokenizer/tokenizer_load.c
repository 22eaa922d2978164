/* tokenizer_load: reads tokenizer.json (jansson) into a Tokenizer. Added tokens get their
 * ids the way Hugging Face assigns them on loading (the id written in the file is only a
 * hint there too), and anything that would make our ids differ from theirs - a normalizer,
 * truncation, another pre-tokenizer - is refused with a message rather than ignored. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "byte_level.h"
#include "pretokenize.h"
#include "tokenizer_internal.h"

typedef struct Loader {
    const char *name;
    json_t *vocab;    /* the model's vocabulary object */
    size_t n_vocab;
} Loader;

static MMC_NORETURN MMC_PRINTF(2, 3) void fail(const Loader *L, const char *fmt, ...) {
    StrBuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    die_at(L->name, "%s", b.s);
}

/* A member that is absent or null reads as NULL. */
static json_t *member(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static bool flag(const Loader *L, json_t *obj, const char *what, const char *key, bool dflt) {
    json_t *v = member(obj, key);
    if (!v) return dflt;
    if (!json_is_boolean(v)) fail(L, "%s.%s must be true or false", what, key);
    return json_is_true(v);
}

static const char *text_member(const Loader *L, json_t *obj, const char *what, const char *key) {
    json_t *v = member(obj, key);
    if (v && !json_is_string(v)) fail(L, "%s.%s must be a string", what, key);
    return v ? json_string_value(v) : NULL;
}

static const char *type_of(const Loader *L, json_t *obj, const char *what) {
    if (!json_is_object(obj)) fail(L, "%s must be an object or null", what);
    const char *type = text_member(L, obj, what, "type");
    return type ? type : "";
}

static int64_t vocab_id(const Loader *L, const char *s, size_t n) {
    json_t *v = json_object_getn(L->vocab, s, n);
    return v ? (int64_t)json_integer_value(v) : -1;
}

/* ---- the parts around the model */

static void read_pipeline(const Loader *L, json_t *root, Tokenizer *t) {
    const char *version = text_member(L, root, "tokenizer", "version");
    if (version && strcmp(version, "1.0") != 0) fail(L, "tokenizer.json version \"%s\" (Hugging Face reads \"1.0\")", version);
    if (member(root, "truncation") || member(root, "padding"))
        fail(L, "\"truncation\" and \"padding\" must be null: mmc cuts and pads rows itself (mmc data --seq)");
    if (member(root, "normalizer"))
        fail(L, "normalizer \"%s\" is not supported (byte-level BPE such as GPT-2's and MiniMind's has none)",
             type_of(L, member(root, "normalizer"), "normalizer"));
    json_t *pre = member(root, "pre_tokenizer");
    if (!pre || strcmp(type_of(L, pre, "pre_tokenizer"), "ByteLevel") != 0)
        fail(L, "pre_tokenizer must be ByteLevel (got %s): mmc reads byte-level BPE tokenizers only",
             pre ? type_of(L, pre, "pre_tokenizer") : "null");
    t->add_prefix_space = flag(L, pre, "pre_tokenizer", "add_prefix_space", true);
    t->use_regex = flag(L, pre, "pre_tokenizer", "use_regex", true);
    json_t *post = member(root, "post_processor");
    if (post && strcmp(type_of(L, post, "post_processor"), "ByteLevel") != 0)
        fail(L, "post_processor \"%s\" is not supported (it would add tokens; mmc data adds bos and eos itself)",
             type_of(L, post, "post_processor"));
    json_t *dec = member(root, "decoder");
    if (dec && strcmp(type_of(L, dec, "decoder"), "ByteLevel") != 0)
        fail(L, "decoder \"%s\" is not supported (only ByteLevel)", type_of(L, dec, "decoder"));
    t->decoder = dec ? DECODER_BYTE_LEVEL : DECODER_NONE;
}

/* ---- added tokens */

typedef struct AddedSpec {
    const char *content;
    size_t len;
    bool special, single_word, lstrip, rstrip, normalized;
} AddedSpec;

static bool same_spec(const AddedSpec *a, const AddedSpec *b) {
    return a->len == b->len && memcmp(a->content, b->content, a->len) == 0 && a->special == b->special &&
           a->single_word == b->single_word && a->lstrip == b->lstrip && a->rstrip == b->rstrip &&
           a->normalized == b->normalized;
}

typedef struct Added {
    AddedSpec *specs; /* as listed */
    int n;
    int *by_id_spec;  /* Hugging Face's added_tokens_map_r: id -> the spec that last took it */
    uint32_t *by_id_ids;
    int n_by_id;
    ByteMap ids;      /* content -> id */
    int *special;     /* Hugging Face's special_tokens list: matched first */
    int *plain;       /* and its added_tokens list: matched after them */
    int n_special, n_plain;
} Added;

static int by_id_find(const Added *a, uint32_t id) {
    for (int i = 0; i < a->n_by_id; i++)
        if (a->by_id_ids[i] == id) return i;
    return -1;
}

/* Hugging Face's AddedVocabulary::add_tokens, one token at a time as its loader calls it. */
static void add_token(const Loader *L, Added *a, int k, ByteMap *specials) {
    const AddedSpec *s = &a->specs[k];
    uint64_t h = bytes_hash(s->content, s->len);
    if (s->special && s->len && !bytemap_get(specials, s->content, s->len, h)) {
        bytemap_put(specials, s->content, s->len, h, NULL);
        a->special[a->n_special++] = k;
    }
    if (!s->len) return;
    for (int i = 0; i < a->n_by_id; i++)
        if (same_spec(&a->specs[a->by_id_spec[i]], s)) return;
    uint32_t *known = bytemap_get(&a->ids, s->content, s->len, h);
    int64_t id = known ? *known : vocab_id(L, s->content, s->len);
    if (id < 0) {
        int64_t max = -1;
        for (int i = 0; i < a->n_by_id; i++)
            if ((int64_t)a->by_id_ids[i] > max) max = a->by_id_ids[i];
        if (max < 0) id = (int64_t)L->n_vocab;
        else id = (max >= (int64_t)L->n_vocab || L->n_vocab == 0) ? max + 1 : (int64_t)L->n_vocab;
    }
    if (id >= MAX_IDS) fail(L, "added token \"%s\" would get id %lld (mmc handles ids below %d)", s->content, (long long)id, MAX_IDS);
    *bytemap_put(&a->ids, s->content, s->len, h, NULL) = (uint32_t)id;
    int r = by_id_find(a, (uint32_t)id);
    if (r < 0) {
        r = a->n_by_id++;
        a->by_id_ids[r] = (uint32_t)id;
    }
    a->by_id_spec[r] = k;
    if (!bytemap_get(specials, s->content, s->len, h)) a->plain[a->n_plain++] = k;
}

static void read_added(const Loader *L, json_t *root, Added *a, ByteMap *specials) {
    json_t *list = member(root, "added_tokens");
    if (list && !json_is_array(list)) fail(L, "added_tokens must be a list");
    size_t n = list ? json_array_size(list) : 0;
    if (n > MAX_IDS) fail(L, "%zu added tokens", n);
    a->specs = xcalloc(n + 1, sizeof *a->specs);
    a->by_id_spec = xcalloc(n + 1, sizeof *a->by_id_spec);
    a->by_id_ids = xcalloc(n + 1, sizeof *a->by_id_ids);
    a->special = xcalloc(n + 1, sizeof *a->special);
    a->plain = xcalloc(n + 1, sizeof *a->plain);
    for (size_t i = 0; i < n; i++) {
        json_t *tok = json_array_get(list, i);
        char what[64];
        snprintf(what, sizeof what, "added_tokens[%zu]", i);
        if (!json_is_object(tok)) fail(L, "%s must be an object", what);
        json_t *content = json_object_get(tok, "content");
        if (!json_is_string(content)) fail(L, "%s.content must be a string", what);
        AddedSpec *s = &a->specs[a->n++];
        s->content = json_string_value(content);
        s->len = json_string_length(content);
        s->special = flag(L, tok, what, "special", false);
        s->single_word = flag(L, tok, what, "single_word", false);
        s->lstrip = flag(L, tok, what, "lstrip", false);
        s->rstrip = flag(L, tok, what, "rstrip", false);
        s->normalized = flag(L, tok, what, "normalized", !s->special);
        add_token(L, a, (int)i, specials);
    }
}

/* Sorts patterns by first byte, longest first, and indexes them by first byte. */
static int pattern_order(const void *x, const void *y) {
    const AddedPattern *a = x, *b = y;
    if ((uint8_t)a->content[0] != (uint8_t)b->content[0]) return (uint8_t)a->content[0] - (uint8_t)b->content[0];
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return 0;
}

static void build_sets(Tokenizer *t, const Added *a) {
    for (int set = 0; set < 2; set++) {
        AddedSet *as = &t->added[set];
        as->patterns = xcalloc((size_t)(a->n_special + a->n_plain) + 1, sizeof *as->patterns);
        for (int i = 0; i < a->n_special + a->n_plain; i++) {
            const AddedSpec *s = &a->specs[i < a->n_special ? a->special[i] : a->plain[i - a->n_special]];
            if (s->normalized != (set == 1)) continue;
            as->patterns[as->n++] = (AddedPattern){s->content, s->len, *bytemap_get(&a->ids, s->content, s->len, bytes_hash(s->content, s->len))};
        }
        /* stable for equal keys: the first listed wins, as in Aho-Corasick */
        for (int i = 1; i < as->n; i++)
            for (int j = i; j > 0 && pattern_order(&as->patterns[j - 1], &as->patterns[j]) > 0; j--) {
                AddedPattern tmp = as->patterns[j];
                as->patterns[j] = as->patterns[j - 1];
                as->patterns[j - 1] = tmp;
            }
        for (int b = 0, i = 0; b <= 256; b++) {
            while (i < as->n && (uint8_t)as->patterns[i].content[0] < b) i++;
            as->first[b] = i;
        }
    }
}

/* ---- the model */

static void read_vocab(const Loader *L, Tokenizer *t, const Added *a, const ByteMap *specials) {
    int64_t max = -1;
    const char *key;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach(L->vocab, key, klen, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= MAX_IDS)
            fail(L, "vocab[\"%s\"] must be an id from 0 to %d", key, MAX_IDS - 1);
        if (json_integer_value(v) > max) max = json_integer_value(v);
    }
    for (int i = 0; i < a->n_by_id; i++)
        if ((int64_t)a->by_id_ids[i] > max) max = a->by_id_ids[i];
    t->n_ids = (uint32_t)(max + 1);
    t->pieces = xcalloc(t->n_ids ? t->n_ids : 1, sizeof *t->pieces);
    json_object_keylen_foreach(L->vocab, key, klen, v) {
        uint32_t id = (uint32_t)json_integer_value(v);
        if (t->pieces[id].text) fail(L, "vocab gives id %u to both \"%s\" and \"%s\"", id, t->pieces[id].text, key);
        t->pieces[id].text = xstrndup(key, klen);
        t->pieces[id].text_len = (uint32_t)klen;
        *bytemap_put(&t->vocab, key, klen, bytes_hash(key, klen), NULL) = id;
    }
    for (int i = 0; i < a->n_by_id; i++) {
        const AddedSpec *s = &a->specs[a->by_id_spec[i]];
        TokenPiece *p = &t->pieces[a->by_id_ids[i]];
        if (s->single_word) fail(L, "added token \"%s\" is single_word, which mmc does not support", s->content);
        free(p->text);
        p->text = xstrndup(s->content, s->len);
        p->text_len = (uint32_t)s->len;
        p->lstrip = s->lstrip, p->rstrip = s->rstrip;
        *bytemap_put(&t->vocab, s->content, s->len, bytes_hash(s->content, s->len), NULL) = a->by_id_ids[i];
    }
    /* What decoding yields: ByteLevel maps a token's characters back to bytes if all of them
     * are among the 256, else keeps its text as it is. */
    for (uint32_t id = 0; id < t->n_ids; id++) {
        TokenPiece *p = &t->pieces[id];
        if (!p->text) continue;
        p->special = bytemap_get(specials, p->text, p->text_len, bytes_hash(p->text, p->text_len)) != NULL;
        StrBuf b = {0};
        if (t->decoder == DECODER_BYTE_LEVEL && p->text_len && byte_level_unspell(&b, p->text, p->text_len)) {
            p->bytes = b.s;
            p->len = (uint32_t)b.len;
        } else {
            sb_free(&b);
            p->bytes = xstrndup(p->text, p->text_len);
            p->len = p->text_len;
        }
    }
}

static void read_model(const Loader *L, json_t *model, Tokenizer *t) {
    const char *type = type_of(L, model, "model");
    if (*type && strcmp(type, "BPE") != 0) fail(L, "model type \"%s\" is not supported (only BPE)", type);
    json_t *dropout = member(model, "dropout");
    if (dropout && !(json_is_number(dropout) && json_number_value(dropout) == 0))
        fail(L, "model.dropout must be null: BPE dropout is random, mmc's ids are not");
    const char *prefix = text_member(L, model, "model", "continuing_subword_prefix");
    const char *suffix = text_member(L, model, "model", "end_of_word_suffix");
    if ((prefix && *prefix) || (suffix && *suffix))
        fail(L, "continuing_subword_prefix and end_of_word_suffix are not supported (byte-level BPE has none)");
    t->fuse_unk = flag(L, model, "model", "fuse_unk", false);
    t->ignore_merges = flag(L, model, "model", "ignore_merges", false);
    bool byte_fallback = flag(L, model, "model", "byte_fallback", false);
    const char *unk = text_member(L, model, "model", "unk_token");
    t->unk_id = unk ? vocab_id(L, unk, strlen(unk)) : -1;
    if (unk && t->unk_id < 0) fail(L, "unk_token \"%s\" is not in the vocabulary", unk);

    for (int b = 0; b < 256; b++) {
        StrBuf s = {0};
        uint8_t byte = (uint8_t)b;
        byte_level_spell(&s, &byte, 1);
        t->byte_id[b] = vocab_id(L, s.s, s.len);
        for (size_t k = 0; byte_fallback && k < s.len; k++) {
            char code[8];
            snprintf(code, sizeof code, "<0x%02X>", (uint8_t)s.s[k]);
            int64_t id = vocab_id(L, code, strlen(code));
            t->fallback_ids[b][k] = id < 0 ? 0 : (uint32_t)id;
            if (id < 0) break;
            if (k + 1 == s.len) t->n_fallback[b] = (uint8_t)s.len;
        }
        sb_free(&s);
    }
    if (t->ignore_merges) {
        const char *key;
        size_t klen;
        json_t *v;
        json_object_keylen_foreach(L->vocab, key, klen, v) {
            StrBuf b = {0};
            if (byte_level_unspell(&b, key, klen) && b.len)
                *bytemap_put(&t->vocab_bytes, b.s, b.len, bytes_hash(b.s, b.len), NULL) = (uint32_t)json_integer_value(v);
            sb_free(&b);
        }
    }

    json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges)) fail(L, "model.merges must be a list");
    for (size_t rank = 0; rank < json_array_size(merges); rank++) {
        json_t *m = json_array_get(merges, rank);
        const char *left, *right;
        size_t left_len, right_len;
        if (json_is_string(m)) { /* "left right", split on its one space */
            left = json_string_value(m);
            const char *space = memchr(left, ' ', json_string_length(m));
            if (!space || memchr(space + 1, ' ', json_string_length(m) - (size_t)(space + 1 - left)))
                fail(L, "merges[%zu] \"%s\" must be two tokens separated by one space", rank, left);
            left_len = (size_t)(space - left);
            right = space + 1;
            right_len = json_string_length(m) - left_len - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            left = json_string_value(json_array_get(m, 0)), left_len = json_string_length(json_array_get(m, 0));
            right = json_string_value(json_array_get(m, 1)), right_len = json_string_length(json_array_get(m, 1));
        } else fail(L, "merges[%zu] must be \"left right\" or [\"left\", \"right\"]", rank);
        char *joined = xmalloc(left_len + right_len + 1);
        memcpy(joined, left, left_len);
        memcpy(joined + left_len, right, right_len);
        int64_t a = vocab_id(L, left, left_len), b = vocab_id(L, right, right_len);
        int64_t c = vocab_id(L, joined, left_len + right_len);
        if (a < 0 || b < 0 || c < 0)
            fail(L, "merges[%zu]: \"%.*s\" is not in the vocabulary", rank, (int)(a < 0 ? left_len : b < 0 ? right_len : left_len + right_len),
                 a < 0 ? left : b < 0 ? right : joined);
        free(joined);
        merges_put(&t->merges, (uint32_t)a, (uint32_t)b, (Merge){(uint32_t)rank, (uint32_t)c});
    }
}

/* ---- loading */

Tokenizer *tokenizer_parse(const char *text, size_t len, const char *name) {
    pretokenize_init();
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_ALLOW_NUL, &err);
    if (!root) die_at(name, "line %d, column %d: %s", err.line, err.column, err.text);
    Loader L = {name, NULL, 0};
    if (!json_is_object(root)) fail(&L, "a tokenizer.json holds one JSON object");
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) fail(&L, "no \"model\" object");
    L.vocab = json_object_get(model, "vocab");
    if (!json_is_object(L.vocab)) fail(&L, "model.vocab must be an object of token: id");
    L.n_vocab = json_object_size(L.vocab);

    Tokenizer *t = xcalloc(1, sizeof *t);
    t->name = xstrdup(name);
    read_pipeline(&L, root, t);
    Added a = {0};
    ByteMap specials = {0};
    read_added(&L, root, &a, &specials);
    read_model(&L, model, t);
    read_vocab(&L, t, &a, &specials);
    build_sets(t, &a);
    /* the patterns point into the JSON document; keep copies instead */
    for (int set = 0; set < 2; set++)
        for (int i = 0; i < t->added[set].n; i++)
            t->added[set].patterns[i].content = xstrndup(t->added[set].patterns[i].content, t->added[set].patterns[i].len);
    free(a.specs), free(a.by_id_spec), free(a.by_id_ids), free(a.special), free(a.plain);
    bytemap_free(&a.ids);
    bytemap_free(&specials);
    json_decref(root);
    return t;
}

Tokenizer *tokenizer_load(const char *path) {
    size_t len;
    char *text = read_file(path, &len);
    Tokenizer *t = tokenizer_parse(text, len, path);
    free(text);
    return t;
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    for (uint32_t i = 0; i < t->n_ids; i++) free(t->pieces[i].text), free(t->pieces[i].bytes);
    for (int set = 0; set < 2; set++) {
        for (int i = 0; i < t->added[set].n; i++) free((char *)t->added[set].patterns[i].content);
        free(t->added[set].patterns);
    }
    free(t->pieces);
    bytemap_free(&t->vocab);
    bytemap_free(&t->vocab_bytes);
    merges_free(&t->merges);
    free(t->name);
    free(t);
}

uint32_t tokenizer_vocab_size(const Tokenizer *t) { return t->n_ids; }

int64_t tokenizer_token_id(const Tokenizer *t, const char *content) {
    size_t n = strlen(content);
    uint32_t *id = bytemap_get(&t->vocab, content, n, bytes_hash(content, n));
    return id ? (int64_t)*id : -1;
}

const char *tokenizer_token_text(const Tokenizer *t, uint32_t id) { return id < t->n_ids ? t->pieces[id].text : NULL; }
