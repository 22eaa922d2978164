/* dist_watch: a data-parallel job stops when one of its ranks dies. After the rendezvous
 * each rank keeps its TCP link to rank 0, and rank 0 one to every rank (dist_bootstrap.h);
 * a thread watches them. A link that closes without the bye a rank sends when its run has
 * ended as it should means that rank is gone: killed, crashed, or ended on an error. Rank 0
 * then ends itself, which closes its links, so every other rank sees rank 0 go and ends
 * too: the job stops within moments instead of waiting in NCCL for its timeout. A rank ends
 * with one line on stderr and _exit(1), whatever it was doing: its last checkpoint, written
 * to a temporary file and renamed, stays whole. A rank that is stopping on a signal of its
 * own (*stopping nonzero: it finishes its update and writes its checkpoint) gets
 * DIST_WATCH_GRACE_S to end by itself first. */
#ifndef MMC_DIST_WATCH_H
#define MMC_DIST_WATCH_H

#include <signal.h>

#include "dist_bootstrap.h"

#define DIST_WATCH_GRACE_S 60.0

/* takes the links (a world of one has none: nothing to watch); stopping may be NULL */
void dist_watch_start(DistLinks *links, const volatile sig_atomic_t *stopping);
/* the run has ended as it should: bye on every link, and from now on nothing the links do
 * ends this process */
void dist_watch_end(void);

#endif
