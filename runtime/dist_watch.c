/* dist_watch: see dist_watch.h. One thread per process polls the links; the main thread
 * only says bye at the end. */
#include "dist_watch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

typedef struct Watch {
    DistLinks links;
    const volatile sig_atomic_t *stopping;
    unsigned char (*got)[DIST_BYE_BYTES]; /* by link: what came in so far */
    int *have;                            /* by link: how many bytes of it */
    char *done;                           /* by link: its bye came (the thread's own) */
} Watch;

static Watch watch;
static atomic_int ended; /* dist_watch_end was called */
static int started;

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* link k closed before its bye: this rank ends, unless it is already on its way out */
static void gone(const Watch *w, int k) {
    if (atomic_load(&ended)) return;
    if (w->links.rank == 0)
        fprintf(stderr, "mmc train: rank 0 of %d: rank %d stopped before the end of the run (its link to rank 0 closed): "
                        "stopping the job\n", w->links.world, k);
    else
        fprintf(stderr, "mmc train: rank %d of %d: rank 0 stopped before the end of the run (the link to it closed): "
                        "stopping this rank\n", w->links.rank, w->links.world);
    if (w->stopping && *w->stopping)
        for (double t = 0; t < DIST_WATCH_GRACE_S; t += 0.1) {
            if (atomic_load(&ended)) return;
            sleep_s(0.1);
        }
    _exit(1);
}

static void *watch_thread(void *arg) {
    Watch *w = arg;
    const int n = w->links.world;
    struct pollfd *pf = xcalloc((size_t)n, sizeof *pf);
    for (;;) {
        int live = 0;
        for (int k = 0; k < n; k++) {
            int fd = w->done[k] ? -1 : w->links.fd[k]; /* poll skips -1 */
            pf[k] = (struct pollfd){.fd = fd, .events = POLLIN};
            live += fd >= 0;
        }
        if (!live) break; /* every other rank said bye */
        if (poll(pf, (nfds_t)n, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int k = 0; k < n; k++) {
            if (pf[k].fd < 0 || !pf[k].revents) continue;
            ssize_t got = recv(w->links.fd[k], w->got[k] + w->have[k], (size_t)(DIST_BYE_BYTES - w->have[k]), 0);
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
            if (got <= 0) { /* closed, or reset: the rank is gone */
                gone(w, k);
                return NULL;
            }
            w->have[k] += (int)got;
            if (w->have[k] < DIST_BYE_BYTES) continue;
            if (!dist_is_bye(w->got[k])) { /* nothing else is sent after the rendezvous */
                gone(w, k);
                return NULL;
            }
            w->done[k] = 1; /* its run has ended: its closing is no news (the socket stays open for our bye) */
        }
    }
    free(pf);
    return NULL;
}

void dist_watch_start(DistLinks *links, const volatile sig_atomic_t *stopping) {
    if (!links->fd || started) return;
    watch = (Watch){*links, stopping, xcalloc((size_t)links->world, DIST_BYE_BYTES), xcalloc((size_t)links->world, sizeof(int)),
                    xcalloc((size_t)links->world, 1)};
    links->fd = NULL;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    if (pthread_create(&th, &attr, watch_thread, &watch)) die("train: cannot start the thread that watches the other ranks");
    pthread_attr_destroy(&attr);
    started = 1;
}

void dist_watch_end(void) {
    if (!started || atomic_exchange(&ended, 1)) return;
    unsigned char bye[DIST_BYE_BYTES];
    dist_bye_frame(bye);
    for (int k = 0; k < watch.links.world; k++) {
        int fd = watch.links.fd[k];
        if (fd < 0) continue;
        size_t off = 0;
        for (int tries = 0; off < sizeof bye && tries < 1000; tries++) { /* 16 bytes fit any socket buffer */
            ssize_t s = send(fd, bye + off, sizeof bye - off, MSG_NOSIGNAL);
            if (s > 0) off += (size_t)s;
            else if (s < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
            else sleep_s(0.001);
        }
    }
}
