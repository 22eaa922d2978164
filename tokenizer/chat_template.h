/* chat_template: the ChatML templates mmc knows, written in C rather than run as Jinja:
 *   mmc's own (what `mmc export --format hf` writes into tokenizer_config.json): a system
 *     turn (the first message's when it is one, else "You are a helpful assistant"), then
 *     <|im_start|>ROLE\nCONTENT<|im_end|>\n for every other message;
 *   MiniMind2's (its tokenizer_config.json before tools and <think>): the same system turn,
 *     then a user turn as <|im_start|>user\nC<|im_end|>\n<|im_start|>assistant\n, an
 *     assistant turn as C<|im_end|>\n, and any later system turn dropped.
 * For alternating user/assistant conversations the two give the same text; they differ for
 * a trailing user turn and for two users in a row. A tokenizer_config.json's template is
 * checked to be one of them, up to white space outside string literals (and inside the
 * template text where Hugging Face's trim_blocks/lstrip_blocks and the - markers remove it);
 * any other is refused, naming what differs. */
#ifndef MMC_CHAT_TEMPLATE_H
#define MMC_CHAT_TEMPLATE_H

#include <stddef.h>

#include "util.h"

typedef enum { CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT } ChatRole;

typedef struct ChatTurn {
    ChatRole role;
    const char *content; /* may hold NULs */
    size_t len;
} ChatTurn;

typedef enum { CHAT_MMC, CHAT_MINIMIND2 } ChatStyle;

/* the Jinja texts, as Hugging Face reads them */
extern const char chat_template_mmc[];
extern const char chat_template_minimind2[];

const char *chat_style_name(ChatStyle style); /* "mmc's ChatML" or "MiniMind2's ChatML" */
/* 0 with *style when tmpl[0..len) is one of the two, else -1 with why it is not (what the
 * template does that they do not, and the byte of the first difference) */
int chat_template_check(const char *tmpl, size_t len, ChatStyle *style, char *why, size_t why_size);
/* The chat_template of a tokenizer_config.json: 1 with *style, 0 when the file has none;
 * dies naming the file for an unreadable file or a template that is not one of the two. */
int chat_template_from_config(const char *path, ChatStyle *style);
/* Appends the text the template renders for turns[0..n) (add_generation_prompt false). */
void chat_render(ChatStyle style, const ChatTurn *turns, size_t n, StrBuf *out);

#endif
