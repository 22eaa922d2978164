/* progress: see progress.h. */
#include "progress.h"

#include "util.h"

#include <stdio.h>
#include <unistd.h>

void progress_start(Progress *p, const char *label, uint64_t total_bytes, bool quiet) {
    *p = (Progress){label, total_bytes, quiet, isatty(2) != 0, now_seconds(), now_seconds(), false};
}

static void draw(Progress *p, uint64_t bytes, uint64_t lines, double t, const char *end) {
    double secs = t - p->start, mb = (double)bytes / 1e6, rate = secs > 0 ? mb / secs : 0;
    char eta[32] = "";
    if (p->total_bytes && rate > 0 && bytes <= p->total_bytes) {
        long left = (long)(((double)p->total_bytes / 1e6 - mb) / rate + 0.5);
        snprintf(eta, sizeof eta, "  ETA %ld:%02ld", left / 60, left % 60);
    }
    char total[32] = "";
    if (p->total_bytes) snprintf(total, sizeof total, " / %.1f", (double)p->total_bytes / 1e6);
    fprintf(stderr, "%s%s: %.1f%s MB  %.1f MB/s  %llu lines  %.1f s%s   %s", p->tty ? "\r" : "", p->label, mb, total,
            rate, (unsigned long long)lines, secs, eta, end);
    fflush(stderr);
    p->drawn = true;
}

void progress_update(Progress *p, uint64_t bytes, uint64_t lines) {
    if (p->quiet) return;
    double t = now_seconds();
    if (t - p->last < (p->tty ? 0.25 : 30)) return;
    p->last = t;
    draw(p, bytes, lines, t, p->tty ? "" : "\n");
}

void progress_finish(Progress *p, uint64_t bytes, uint64_t lines) {
    if (p->quiet || !p->drawn) return; /* short runs print only their summary */
    draw(p, bytes, lines, now_seconds(), "\n");
}
