/* progress: one status line on stderr for long runs: MB done, MB/s, lines, ETA. On a
 * terminal it is redrawn in place a few times a second; otherwise a line every 30 s. */
#ifndef MMC_PROGRESS_H
#define MMC_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct Progress {
    const char *label;    /* "mmc data" */
    uint64_t total_bytes; /* 0: unknown (a pipe), no ETA */
    bool quiet, tty;
    double start, last;
    bool drawn;
} Progress;

void progress_start(Progress *p, const char *label, uint64_t total_bytes, bool quiet);
void progress_update(Progress *p, uint64_t bytes, uint64_t lines);
void progress_finish(Progress *p, uint64_t bytes, uint64_t lines); /* final line, ends it */

#endif
