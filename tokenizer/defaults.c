/* defaults: see defaults.h. */
#include "defaults.h"

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
