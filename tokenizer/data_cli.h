/* data_cli: what `mmc data` (data_cli.c) and `mmc data --sft` (sft_data.c) share. */
#ifndef MMC_DATA_CLI_H
#define MMC_DATA_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonl.h"
#include "tokenizer.h"

/* whether a document (its text, or an SFT line's bytes) goes to the validation split: a
 * hash of the bytes below `val`, so the same on every run and for copies of it */
bool data_goes_to_val(double val, const char *bytes, size_t len);
/* train.bin -> train.val.bin (a name not ending in .bin gets .val appended) */
char *data_val_path(const char *out);
/* the id of a token spelled `content`, or dies suggesting `flag` to pick another */
uint16_t data_special_id(const Tokenizer *t, const char *flag, const char *content);
/* the last line of a run: MB, lines, seconds, bad lines */
void data_print_stats(const JsonlStats *st);

int cmd_data_sft(int argc, char **argv); /* sft_data.c */

#endif
