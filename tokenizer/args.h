/* args: what the tokenizer commands share in reading their command lines. */
#ifndef MMC_ARGS_H
#define MMC_ARGS_H

#include "tokenizer.h"

/* A whole number from lo to hi, or dies naming the command and flag. */
long arg_number(const char *command, const char *flag, const char *value, long lo, long hi);
/* Loads a tokenizer.json, or the built-in tokenizer for "default". */
Tokenizer *tokenizer_open(const char *path_or_default);

#endif
