/* args: see args.h. */
#include "args.h"

#include <stdlib.h>
#include <string.h>

#include "defaults.h"

long arg_number(const char *command, const char *flag, const char *value, long lo, long hi) {
    char *end;
    long n = strtol(value, &end, 10);
    if (!*value || *end || n < lo || n > hi)
        die("%s: %s wants a whole number from %ld to %ld, not '%s'", command, flag, lo, hi, value);
    return n;
}

Tokenizer *tokenizer_open(const char *path_or_default) {
    if (strcmp(path_or_default, "default") != 0) return tokenizer_load(path_or_default);
    const char *json = default_tokenizer_json();
    return tokenizer_parse(json, strlen(json), DEFAULT_TOKENIZER_NAME);
}
