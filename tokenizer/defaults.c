/* defaults: see defaults.h. */
#include "defaults.h"

#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "util.h"

static const char *embedded(const char *path) {
    for (int i = 0; embedded_files[i].path; i++)
        if (strcmp(embedded_files[i].path, path) == 0) return embedded_files[i].text;
    die("internal error: %s is not built into this mmc (see tokenizer/tokenizer.mk)", path);
}

const char *default_corpus(size_t *len) {
    const char *text = embedded(DEFAULT_CORPUS_NAME);
    *len = strlen(text);
    return text;
}

const char *default_tokenizer_json(void) { return embedded(DEFAULT_TOKENIZER_NAME); }

char *tokenizer_json_text(const char *name, size_t *len) {
    if (!strcmp(name, "default")) {
        *len = strlen(default_tokenizer_json());
        return xstrdup(default_tokenizer_json());
    }
    return try_read_file(name, len);
}

void tokenizer_json_sha256(const char *name, char out[65]) {
    size_t len = 0;
    char *text = tokenizer_json_text(name, &len);
    if (!text) die("%s: cannot read the tokenizer", name);
    Sha256 h;
    sha256_init(&h);
    sha256_update(&h, text, len);
    sha256_hex(&h, out);
    free(text);
}
