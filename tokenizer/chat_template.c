/* chat_template: see chat_template.h. */
#include "chat_template.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ChatML as MiniMind renders it: a default system turn when the first turn is not one, then
 * <|im_start|>ROLE\nCONTENT<|im_end|>\n a turn, and the assistant's opening on request.
 * (tests/sft_reference.py reads this text from here, to run it through jinja2.) */
const char chat_template_mmc[] =
    "{%- if messages[0]['role'] == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if not (loop.first and message['role'] == 'system') -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

/* MiniMind2's tokenizer_config.json, byte for byte */
const char chat_template_minimind2[] =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = messages[0]['content'] %}"
    "{{ '<|im_start|>system\\n' + system_message + '<|im_end|>\\n' }}"
    "{% else %}{{ '<|im_start|>system\\nYou are a helpful assistant<|im_end|>\\n' }}{% endif %}"
    "{% for message in messages %}{% set content = message['content'] %}"
    "{% if message['role'] == 'user' %}{{ '<|im_start|>user\\n' + content + '<|im_end|>\\n<|im_start|>assistant\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ content + '<|im_end|>' + '\\n' }}{% endif %}{% endfor %}";

const char *chat_style_name(ChatStyle style) { return style == CHAT_MMC ? "mmc's ChatML" : "MiniMind2's ChatML"; }

/* ---- rendering */

static void turn(StrBuf *out, const char *role, const ChatTurn *t) {
    sb_append(out, "<|im_start|>");
    sb_append(out, role);
    sb_append(out, "\n");
    sb_appendn(out, t->content, t->len);
    sb_append(out, "<|im_end|>\n");
}

void chat_render(ChatStyle style, const ChatTurn *turns, size_t n, StrBuf *out) {
    static const char *const role_name[] = {"system", "user", "assistant"};
    size_t first = 0;
    if (n && turns[0].role == CHAT_SYSTEM) turn(out, "system", &turns[first++]);
    else sb_append(out, "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n");
    for (size_t i = first; i < n; i++) {
        const ChatTurn *t = &turns[i];
        if (style == CHAT_MMC) turn(out, role_name[t->role], t);
        else if (t->role == CHAT_USER) { /* MiniMind2 opens the reply in the user's turn */
            sb_append(out, "<|im_start|>user\n");
            sb_appendn(out, t->content, t->len);
            sb_append(out, "<|im_end|>\n<|im_start|>assistant\n");
        } else if (t->role == CHAT_ASSISTANT) {
            sb_appendn(out, t->content, t->len);
            sb_append(out, "<|im_end|>\n");
        } /* and a system turn after the first renders nothing there */
    }
}

/* ---- the template check */

/* A template reduced to what decides its output: tags without white space outside their
 * string literals and without their -/+ markers, comments gone, and only the template text
 * that Jinja (with Hugging Face's trim_blocks and lstrip_blocks) would output. at[i] is the
 * byte of the template that s[i] comes from, to say where a difference is. */
typedef struct Norm {
    StrBuf s;
    size_t *at, cap;
} Norm;

static void put(Norm *n, char c, size_t at) {
    if (n->s.len == n->cap) {
        n->cap = n->cap ? 2 * n->cap : 256;
        n->at = xrealloc(n->at, n->cap * sizeof *n->at);
    }
    n->at[n->s.len] = at;
    sb_appendn(&n->s, &c, 1);
}

static bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static bool opens_tag(const char *t, size_t len, size_t i) {
    return i + 1 < len && t[i] == '{' && (t[i + 1] == '{' || t[i + 1] == '%' || t[i + 1] == '#');
}

/* the template text [a, b) between two tags, less what the tags around it trim */
static void text_between(Norm *n, const char *t, size_t len, size_t a, size_t b, bool trim_after, bool after_block) {
    if (trim_after) while (a < b && space(t[a])) a++;
    else if (after_block) { /* trim_blocks: the first newline after a block tag */
        if (a < b && t[a] == '\n') a++;
        else if (a + 1 < b && t[a] == '\r' && t[a + 1] == '\n') a += 2;
    }
    if (b < len) {
        char kind = t[b + 1], mark = b + 2 < len ? t[b + 2] : 0;
        if (mark == '-') while (b > a && space(t[b - 1])) b--;
        else if (kind != '{' && mark != '+') { /* lstrip_blocks: blanks from a line's start to a block tag */
            size_t k = b;
            while (k > a && (t[k - 1] == ' ' || t[k - 1] == '\t')) k--;
            if (k == 0 || t[k - 1] == '\n') b = k;
        }
    }
    for (size_t k = a; k < b; k++) put(n, t[k], k);
}

static void normalise(const char *t, size_t len, Norm *n) {
    size_t i = 0;
    bool trim_after = false, after_block = false;
    while (i <= len) {
        size_t j = i;
        while (j < len && !opens_tag(t, len, j)) j++;
        text_between(n, t, len, i, j, trim_after, after_block);
        if (j >= len) break;
        char kind = t[j + 1];
        const char close0 = kind == '{' ? '}' : kind; /* }} %} #} */
        size_t p = j + 2;
        if (p < len && (t[p] == '-' || t[p] == '+')) p++;
        if (kind != '#') put(n, '{', j), put(n, kind, j + 1);
        bool closed = false, minus = false, plus = false;
        while (p < len) {
            if (kind != '#' && (t[p] == '\'' || t[p] == '"')) { /* a string literal, verbatim */
                char q = t[p];
                put(n, t[p], p), p++;
                while (p < len && t[p] != q) {
                    if (t[p] == '\\' && p + 1 < len) put(n, t[p], p), p++;
                    put(n, t[p], p), p++;
                }
                if (p < len) put(n, t[p], p), p++;
                continue;
            }
            bool marked = (t[p] == '-' || t[p] == '+') && p + 2 < len && t[p + 1] == close0 && t[p + 2] == '}';
            if (marked || (p + 1 < len && t[p] == close0 && t[p + 1] == '}')) {
                minus = marked && t[p] == '-', plus = marked && t[p] == '+';
                if (kind != '#') put(n, close0, p + marked), put(n, '}', p + marked + 1);
                p += 2 + marked;
                closed = true;
                break;
            }
            if (kind != '#' && !space(t[p])) put(n, t[p], p);
            p++;
        }
        if (!closed) { /* an unterminated tag: keep the rest as it is, it differs anyway */
            for (size_t k = j; k < len; k++) put(n, t[k], k);
            break;
        }
        trim_after = minus;
        after_block = kind != '{' && !plus;
        i = p;
    }
}

/* what a template does that the two known ones do not, by its features, for the message */
static void features(const char *t, size_t len, StrBuf *out) {
    struct {
        bool has;
        const char *what;
    } f[] = {
        {memmem(t, len, "<think>", 7) || memmem(t, len, "</think>", 8) || memmem(t, len, "reasoning_content", 17),
         "renders <think> reasoning blocks in assistant turns"},
        {memmem(t, len, "tools", 5) || memmem(t, len, "tool_call", 9), "renders tool definitions (tools)"},
        {!memmem(t, len, "You are a helpful assistant", 27), "has no default system turn (\"You are a helpful assistant\")"},
        {!memmem(t, len, "<|im_start|>", 12) || !memmem(t, len, "<|im_end|>", 10),
         "uses other turn markers than <|im_start|>/<|im_end|>"},
    };
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].has) sb_printf(out, "%s%s", out->len ? ", " : "", f[i].what);
}

#define ONLY_KNOWN                                                                                              \
    ": mmc data --sft renders mmc's ChatML template (the one mmc export writes) and MiniMind2's, and no other (give "  \
    "one of them with --chat-template FILE)"

int chat_template_check(const char *tmpl, size_t len, ChatStyle *style, char *why, size_t why_size) {
    const char *known[] = {chat_template_mmc, chat_template_minimind2};
    Norm cand = {0};
    normalise(tmpl, len, &cand);
    size_t best = 0, best_at = 0;
    int found = -1;
    for (int k = 0; k < 2 && found < 0; k++) {
        Norm ref = {0};
        normalise(known[k], strlen(known[k]), &ref);
        size_t i = 0;
        while (i < ref.s.len && i < cand.s.len && ref.s.s[i] == cand.s.s[i]) i++;
        if (i == ref.s.len && i == cand.s.len) found = k;
        else if (k == 0 || i > best) best = i, best_at = k;
        sb_free(&ref.s), free(ref.at);
    }
    size_t byte = best < cand.s.len ? cand.at[best] : len;
    free(cand.at);
    sb_free(&cand.s);
    if (found >= 0) {
        *style = found == 0 ? CHAT_MMC : CHAT_MINIMIND2;
        return 0;
    }
    StrBuf f = {0};
    features(tmpl, len, &f);
    const char *nearest = best_at == 0 ? "mmc's" : "MiniMind2's";
    if (f.len)
        snprintf(why, why_size, "its chat_template %s (the first difference from %s ChatML template is at byte %zu)%s", f.s,
                 nearest, byte, ONLY_KNOWN);
    else
        snprintf(why, why_size, "its chat_template differs from both known ChatML templates at byte %zu (nearest: %s)%s", byte,
                 nearest, ONLY_KNOWN);
    sb_free(&f);
    return -1;
}

int chat_template_from_config(const char *path, ChatStyle *style) {
    size_t len;
    char *text = read_file(path, &len);
    json_error_t e;
    json_t *root = json_loadb(text, len, 0, &e);
    free(text);
    if (!root) die("%s:%d: invalid JSON (byte %d): %s", path, e.line, e.position, e.text);
    json_t *t = json_is_object(root) ? json_object_get(root, "chat_template") : NULL;
    if (json_is_array(t)) { /* named templates: Hugging Face's apply_chat_template takes "default" */
        size_t i;
        json_t *v, *chosen = NULL;
        json_array_foreach(t, i, v) {
            const char *name = json_string_value(json_object_get(v, "name"));
            if (name && !strcmp(name, "default")) chosen = json_object_get(v, "template");
        }
        if (!chosen) die("%s: chat_template is a list of named templates without a \"default\" one", path);
        t = chosen;
    }
    if (!t) {
        json_decref(root);
        return 0;
    }
    if (!json_is_string(t)) die("%s: chat_template is not a string", path);
    char why[1024];
    if (chat_template_check(json_string_value(t), json_string_length(t), style, why, sizeof why) != 0) {
        json_decref(root);
        die("%s: %s", path, why);
    }
    json_decref(root);
    return 1;
}
