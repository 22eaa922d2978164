/* test_tokenizer: the tokenizer's parts against their specifications, without Python
 * (tests/test_tokenizer_hf.sh compares the whole against Hugging Face):
 *   - the byte-level table is a bijection of 256 bytes onto printable characters;
 *   - invalid UTF-8 is repaired as Python's decode(errors="replace") repairs it;
 *   - the pre-tokenizer splits as the GPT-2 regex does, on hand-checked cases;
 *   - the heap-based BPE (with and without the word cache) gives the ids of a slow
 *     reference, the classic GPT-2 loop, on the built-in tokenizer and random text;
 *   - decode(encode(x)) == x for every document of the built-in corpus and random text;
 *   - one {"text": ...} line is parsed or rejected as jsonl promises. */
#include "byte_level.h"
#include "jsonl.h"
#include "pretokenize.h"
#include "test_util.h"
#include "tokenizer_internal.h"
#include "utf8.h"

static void test_byte_level(void) {
    int seen[0x200] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t c = byte_level_char((uint8_t)b);
        CHECK(c < 0x200 && !seen[c]++, "byte %d -> U+%04X twice", b, c);
        CHECK(byte_level_byte(c) == b, "U+%04X -> %d, not %d", c, byte_level_byte(c), b);
    }
    CHECK(byte_level_char(' ') == 0x120 && byte_level_char('\n') == 0x10A && byte_level_char('A') == 'A', "GPT-2's Ġ, Ċ");
    CHECK(byte_level_byte(0x144) == -1 && byte_level_byte(0xAD) == -1, "outside the 256");
}

static void test_utf8(void) {
    static const struct {
        const char *in, *out; /* out: what Python's bytes.decode("utf-8", "replace") gives */
    } cases[] = {
        {"abc", "abc"},
        {"\xff", "\xEF\xBF\xBD"},
        {"\xe4\xb8", "\xEF\xBF\xBD"},                      /* a truncated character: one U+FFFD */
        {"\xe4\xb8" "A", "\xEF\xBF\xBD" "A"},
        {"\xed\xa0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* a surrogate: three */
        {"\xf0\x9f\x98", "\xEF\xBF\xBD"},
        {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
        {"\xc0\xaf", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xf4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        StrBuf b = {0};
        utf8_append_lossy(&b, (const uint8_t *)cases[i].in, strlen(cases[i].in));
        CHECK(b.s && strcmp(b.s, cases[i].out) == 0, "case %zu: repaired to '%s'", i, b.s ? b.s : "");
        CHECK(utf8_valid((const uint8_t *)cases[i].in, strlen(cases[i].in)) == (strcmp(cases[i].in, cases[i].out) == 0), "case %zu: valid?", i);
        sb_free(&b);
    }
}

static void test_pretokenize(void) {
    static const struct {
        const char *text, *pieces; /* pieces joined by | */
    } cases[] = {
        {"Hello world", "Hello| world"},
        {"it's they're I'LL", "it|'s| they|'re| I|'|LL"},
        {"  a", " | a"},
        {"a  ", "a|  "},
        {"\n\na", "\n|\n|a"},
        {"a \n b", "a| \n| b"},
        {"x\t\ty", "x|\t|\t|y"},   /* only a space joins the word after it */
        {"123abc 45", "123|abc| 45"},
        {"!!'s", "!!'|s"},
        {" 's", " '|s"},
        {"床前明月光，疑是地上霜。", "床前明月光|，|疑是地上霜|。"},
        {"a\xe3\x80\x80" "b", "a|\xe3\x80\x80|b"},     /* U+3000 is white space */
        {"a\xe2\x80\x8b" "b", "a|\xe2\x80\x8b|b"},     /* U+200B is not: "other" */
        {"\xf0\x9f\x98\x80\xf0\x9f\x98\x80 x", "\xf0\x9f\x98\x80\xf0\x9f\x98\x80| x"},
    };
    pretokenize_init();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint8_t *s = (const uint8_t *)cases[i].text;
        size_t n = strlen(cases[i].text);
        StrBuf b = {0};
        for (size_t at = 0; at < n;) {
            size_t end = pretoken_end(s, n, at);
            if (at) sb_append(&b, "|");
            sb_appendn(&b, cases[i].text + at, end - at);
            at = end;
        }
        CHECK(strcmp(b.s, cases[i].pieces) == 0, "'%s' split as '%s', not '%s'", cases[i].text, b.s, cases[i].pieces);
        sb_free(&b);
    }
}

/* The classic GPT-2 loop: merge every occurrence of the lowest-ranked pair, left to right,
 * until no pair has a merge. Slow and obviously right. */
static void reference_bpe(const Tokenizer *t, const uint8_t *w, size_t n, IdVec *out) {
    uint32_t *sym = xmalloc((n + 1) * sizeof *sym);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) sym[len++] = (uint32_t)t->byte_id[w[i]];
    for (;;) {
        const Merge *best = NULL;
        for (size_t i = 0; i + 1 < len; i++) {
            const Merge *m = merges_get(&t->merges, sym[i], sym[i + 1]);
            if (m && (!best || m->rank < best->rank)) best = m;
        }
        if (!best) break;
        size_t k = 0;
        for (size_t i = 0; i < len; i++) {
            const Merge *m = i + 1 < len ? merges_get(&t->merges, sym[i], sym[i + 1]) : NULL;
            if (m == best) sym[k++] = best->new_id, i++;
            else sym[k++] = sym[i];
        }
        len = k;
    }
    for (size_t i = 0; i < len; i++) idvec_push(out, sym[i]);
    free(sym);
}

static void random_text(StrBuf *b, int chars) {
    static const uint32_t ranges[][2] = {{0x20, 0x7E}, {0x4E00, 0x9FFF}, {0x3000, 0x303F}, {0xA0, 0x24F}, {0x1F600, 0x1F64F}, {9, 13}};
    for (int i = 0; i < chars; i++) {
        const uint32_t *r = ranges[(int)(test_uniform() * 6)];
        char u[4];
        sb_appendn(b, u, utf8_put(r[0] + (uint32_t)(test_uniform() * (r[1] - r[0] + 1)), u));
    }
}

static void test_bpe_and_roundtrip(void) {
    Tokenizer *t = tokenizer_load("tokenizer/default/tokenizer.json");
    EncodeState *cached = encode_state_new(t), *fresh;
    size_t corpus_len;
    char *corpus = read_file("tokenizer/default/corpus.jsonl", &corpus_len);
    IdVec a = {0}, b = {0};
    StrBuf back = {0};
    int docs = 0, words = 0;
    for (char *line = corpus, *nl; (nl = strchr(line, '\n')); line = nl + 1, docs++) {
        const char *text;
        size_t len;
        void *doc;
        char err[256];
        CHECK(jsonl_line_text(line, (size_t)(nl - line), &text, &len, &doc, err, sizeof err) == 1, "corpus line: %s", err);
        a.n = 0, back.len = 0;
        tokenizer_encode(cached, text, len, &a);
        tokenizer_decode(t, a.ids, a.n, false, &back);
        CHECK(back.len == len && memcmp(back.s, text, len) == 0, "document %d does not come back", docs + 1);
        jsonl_text_free(doc);
    }
    for (int i = 0; i < 2000; i++) { /* random words: BPE against the reference */
        StrBuf w = {0};
        random_text(&w, 1 + (int)(test_uniform() * 12));
        a.n = 0, b.n = 0;
        fresh = encode_state_new(t);
        bpe_encode_word(fresh, (const uint8_t *)w.s, w.len, &a);
        encode_state_free(fresh);
        reference_bpe(t, (const uint8_t *)w.s, w.len, &b);
        CHECK(a.n == b.n && memcmp(a.ids, b.ids, a.n * sizeof *a.ids) == 0, "word '%s': heap BPE and reference differ", w.s);
        a.n = 0;
        bpe_encode_word(cached, (const uint8_t *)w.s, w.len, &a); /* twice: the second from the cache */
        bpe_encode_word(cached, (const uint8_t *)w.s, w.len, &a);
        CHECK(a.n == 2 * b.n && memcmp(a.ids + b.n, b.ids, b.n * sizeof *b.ids) == 0, "word '%s': cached ids differ", w.s);
        words++;
        sb_free(&w);
    }
    for (int i = 0; i < 300; i++) { /* random text: round trip */
        StrBuf text = {0};
        random_text(&text, 1 + (int)(test_uniform() * 200));
        a.n = 0, back.len = 0;
        tokenizer_encode(cached, text.s, text.len, &a);
        tokenizer_decode(t, a.ids, a.n, false, &back);
        CHECK(back.len == text.len && memcmp(back.s, text.s, text.len) == 0, "random text %d does not come back", i);
        sb_free(&text);
    }
    CHECK(docs == 5671 && words == 2000, "%d documents, %d words", docs, words);
    free(a.ids), free(b.ids), free(corpus);
    sb_free(&back);
    encode_state_free(cached);
    tokenizer_free(t);
}

static void test_jsonl_line(void) {
    static const struct {
        const char *line;
        int result;
        const char *text;
    } cases[] = {
        {"{\"text\": \"a\\nb\"}", 1, "a\nb"},
        {"{\"id\": 1, \"text\": \"\\u5e8a\"}\r", 1, "床"},
        {"{\"text\": \"\"}", 1, ""},
        {"   ", 0, NULL},
        {"", 0, NULL},
        {"{\"text\": 1}", -1, NULL},
        {"{\"txt\": \"a\"}", -1, NULL},
        {"[\"text\"]", -1, NULL},
        {"{\"text\": \"a\"", -1, NULL},
        {"{\"text\": \"\\ud800\"}", -1, NULL},
        {"{\"text\": \"\xff\"}", -1, NULL},
        {"{\"text\": \"a\"} {}", -1, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text;
        size_t len;
        void *doc;
        char err[256] = "";
        int r = jsonl_line_text(cases[i].line, strlen(cases[i].line), &text, &len, &doc, err, sizeof err);
        CHECK(r == cases[i].result, "line '%s': %d, not %d (%s)", cases[i].line, r, cases[i].result, err);
        if (r == 1 && cases[i].text) CHECK(len == strlen(cases[i].text) && !memcmp(text, cases[i].text, len), "line '%s': text", cases[i].line);
        if (r < 0) CHECK(err[0], "line '%s': no message", cases[i].line);
        jsonl_text_free(doc);
    }
}

int main(void) {
    test_byte_level();
    test_utf8();
    test_pretokenize();
    test_bpe_and_roundtrip();
    test_jsonl_line();
    return test_done("test_tokenizer");
}
