/* defaults: the built-in corpus and tokenizer (tokenizer/default/, embedded in ./mmc at
 * build time), so a new user can train without downloading anything. */
#ifndef MMC_DEFAULTS_H
#define MMC_DEFAULTS_H

#include <stddef.h>

#define DEFAULT_CORPUS_NAME "tokenizer/default/corpus.jsonl"
#define DEFAULT_TOKENIZER_NAME "tokenizer/default/tokenizer.json"
#define DEFAULT_VOCAB 6400

const char *default_corpus(size_t *len);
const char *default_tokenizer_json(void);
/* the text of a tokenizer.json by name: a path, or "default" for the built-in one (caller frees;
 * NULL if the file cannot be read), and its SHA-256 in hex (dies if it cannot be read) */
char *tokenizer_json_text(const char *name, size_t *len);
void tokenizer_json_sha256(const char *name, char out[65]);

#endif
