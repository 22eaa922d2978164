/* dist_bootstrap: the rendezvous of a data-parallel job over TCP, before NCCL exists: rank 0
 * hands its bytes (the NCCL unique id) to every other rank. Rank 0 listens on MASTER_PORT
 * on every interface; each other rank connects to MASTER_ADDR:MASTER_PORT, retrying with
 * backoff while rank 0 is not there yet, and says hello (magic "mmcdist1", its rank, its
 * world size, the length it expects). Once every rank has said hello, rank 0 checks them
 * (a rank twice, another world size, another length: the job is refused on every rank
 * connected, naming the rank and its address; a connection that is no mmc rank is dropped),
 * sends the bytes to all, and waits for every rank's ack before it tells them all to go:
 * a barrier, so that when dist_bootstrap returns 0 on any rank, every rank has the bytes.
 * Sockets are non-blocking under poll() with one deadline for the whole exchange.
 *
 * Frames, little-endian: magic "mmcdist1" (8 bytes), u32 kind, u32 payload length, payload.
 *   hello   peer -> 0   payload u32 rank, u32 world, u64 length
 *   bytes   0 -> peer   payload the bytes
 *   refuse  0 -> peer   payload a message (no NUL)
 *   ack     peer -> 0   no payload
 *   go      0 -> peer   no payload
 *   bye     either way  no payload, after the run (dist_watch.h) */
#ifndef MMC_DIST_BOOTSTRAP_H
#define MMC_DIST_BOOTSTRAP_H

#include <stddef.h>

#include "dist_env.h"

enum { DIST_BLOB_MAX = 65536 }; /* the most bytes a bootstrap hands out */

/* On rank 0, blob holds the `len` bytes to hand out; on the others it receives them. A
 * world of 1 returns 0 at once. Returns 0 when every rank of e->world has the bytes, else
 * -1 with *why (the caller frees it), one line that starts with "rank R: ", e.g.
 *   rank 0: 1 of 2 ranks did not arrive within 60 s at port 29500 (ranks missing: 1)
 *   rank 1: no answer from rank 0 at host0:29500 within 60 s (connection refused)
 * Writes to a closed socket raise no SIGPIPE (MSG_NOSIGNAL). */
int dist_bootstrap(const DistEnv *e, void *blob, size_t len, double timeout_s, char **why);

/* The rendezvous's sockets, kept open after it for dist_watch.h: on rank 0 fd[k] is the
 * socket to rank k (fd[0] is -1), on another rank fd[0] is its socket to rank 0 (the rest
 * -1). world entries; fd is NULL for a world of one. */
typedef struct DistLinks {
    int world, rank;
    int *fd;
} DistLinks;

/* dist_bootstrap, keeping the sockets in *links when it returns 0 */
int dist_bootstrap_links(const DistEnv *e, void *blob, size_t len, double timeout_s, DistLinks *links, char **why);

/* The frame a rank sends on its links when its run has ended as it should: "bye" (kind 6,
 * no payload). */
enum { DIST_BYE_BYTES = 16 };
void dist_bye_frame(unsigned char out[DIST_BYE_BYTES]);
int dist_is_bye(const unsigned char in[DIST_BYE_BYTES]);

#endif
