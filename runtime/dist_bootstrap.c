/* dist_bootstrap: see dist_bootstrap.h. Rank 0 and the peers each run one poll() loop over
 * their sockets, moving each connection through its stages; nothing blocks but poll(), and
 * poll() never waits past the deadline. */
#include "dist_bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

#define MAGIC "mmcdist1"
enum { K_HELLO = 1, K_BYTES = 2, K_REFUSE = 3, K_ACK = 4, K_GO = 5, K_BYE = 6 };
enum { HEADER = 16, HELLO_PAYLOAD = 16, REFUSE_MAX = 1024 };
_Static_assert((int)HEADER == (int)DIST_BYE_BYTES, "bye is a frame header alone");
enum { MAX_STRANGERS = 64 };          /* connections rank 0 keeps open before they say who they are, beyond the ranks */
#define CONNECT_TRY_S 5.0             /* one connection attempt, before the next */
#define BACKOFF_FIRST_S 0.02
#define BACKOFF_MAX_S 1.0

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << 8 * i;
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << 8 * i;
    return v;
}

/* ---- one connection: a frame coming in, bytes going out ---- */

typedef struct Conn {
    int fd;
    char addr[96];     /* the other end, "10.0.0.5:41234" */
    int rank;          /* rank 0's view: the peer's rank once its hello is taken, else -1 */
    int stage;
    uint8_t head[HEADER];
    size_t head_have;
    uint8_t *payload;
    size_t payload_len, payload_have;
    uint8_t *out;
    size_t out_len, out_off;
} Conn;

static void conn_close(Conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    free(c->payload), free(c->out);
    c->payload = c->out = NULL;
}

static void frame_reset(Conn *c) {
    free(c->payload);
    c->payload = NULL;
    c->head_have = c->payload_len = c->payload_have = 0;
}

static void frame_queue(Conn *c, uint32_t kind, const void *payload, size_t n) {
    c->out = xrealloc(c->out, c->out_len + HEADER + n);
    uint8_t *p = c->out + c->out_len;
    memcpy(p, MAGIC, 8);
    put32(p + 8, kind);
    put32(p + 12, (uint32_t)n);
    if (n) memcpy(p + HEADER, payload, n);
    c->out_len += HEADER + n;
}

static int out_pending(const Conn *c) { return c->fd >= 0 && c->out_off < c->out_len; }

/* sends what the socket takes now; -1 (with err) when the connection is gone */
static int conn_flush(Conn *c, char *err, size_t errn) {
    while (out_pending(c)) {
        ssize_t k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        if (k < 0) {
            snprintf(err, errn, "%s", strerror(errno));
            return -1;
        }
        c->out_off += (size_t)k;
    }
    return 0;
}

/* Reads toward one frame, never past it (the other side sends one frame and then waits).
 * 1: a frame is in (head, payload); 0: more to come; -1: the connection closed or sent
 * what is no frame of ours (err says which). */
static int frame_read(Conn *c, size_t max_payload, char *err, size_t errn) {
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (c->head_have < HEADER) dst = c->head + c->head_have, want = HEADER - c->head_have;
        else if (c->payload_have < c->payload_len) dst = c->payload + c->payload_have, want = c->payload_len - c->payload_have;
        else return 1;
        ssize_t k = recv(c->fd, dst, want, 0);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        if (k < 0) {
            snprintf(err, errn, "%s", strerror(errno));
            return -1;
        }
        if (k == 0) {
            snprintf(err, errn, "closed the connection");
            return -1;
        }
        if (c->head_have < HEADER) {
            c->head_have += (size_t)k;
            if (c->head_have < HEADER) continue;
            if (memcmp(c->head, MAGIC, 8)) {
                snprintf(err, errn, "sent no %s frame", MAGIC);
                return -1;
            }
            c->payload_len = get32(c->head + 12);
            if (c->payload_len > max_payload) {
                snprintf(err, errn, "sent a frame of %zu bytes where at most %zu belong", c->payload_len, max_payload);
                return -1;
            }
            c->payload = xmalloc(c->payload_len ? c->payload_len : 1);
        } else c->payload_have += (size_t)k;
    }
}

static uint32_t frame_kind(const Conn *c) { return get32(c->head + 8); }

static int set_nonblocking(int fd) {
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* "host:port", with brackets around an IPv6 literal and IPv4 in IPv6 shown as IPv4 */
static void format_addr(char *out, size_t n, const char *host, const char *port) {
    if (!strncmp(host, "::ffff:", 7) && strchr(host + 7, '.')) host += 7;
    snprintf(out, n, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
}

static int poll_ms(double left) {
    double ms = ceil(left * 1000.0);
    return ms < 0 ? 0 : ms > 1000 ? 1000 : (int)ms; /* at most a second, so the clock is read again */
}

static char *errorf(const char *fmt, ...) MMC_PRINTF(1, 2);
static char *errorf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    StrBuf b = {0};
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    return b.s;
}

/* ---- rank 0 ---- */

enum { R_HELLO, R_ARRIVED, R_ACK, R_ACKED, R_GO };  /* a connection's stage */
enum { PH_GATHER, PH_ACKS, PH_GO };                 /* rank 0's */

typedef struct Root {
    const DistEnv *e;
    int lfd, phase;
    Conn **conns;      /* each on its own, so that by_rank's pointers stay put */
    int n, cap;
    Conn **by_rank;
    int arrived, acked;
    int strangers;
    char stranger_addr[96], stranger_why[160];
} Root;

/* a socket of the family bound to the port on every interface, or -1 with errno */
static int bind_any(int family, int port) {
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, zero = 0;
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* a previous run's TIME_WAIT is no obstacle */
    int rc;
    if (family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero); /* IPv4 peers too */
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_any};
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY)};
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    }
    if (rc == 0 && listen(fd, SOMAXCONN) == 0 && set_nonblocking(fd) == 0) return fd;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

static int root_listen(Root *r, char *err, size_t errn) {
    int port = r->e->master_port;
    /* IPv6 and IPv4 on one socket where the host has IPv6, else IPv4 alone */
    int fd = bind_any(AF_INET6, port);
    if (fd < 0 && errno != EADDRINUSE && errno != EACCES) fd = bind_any(AF_INET, port);
    if (fd < 0) {
        snprintf(err, errn, "cannot listen on port %d: %s%s", port, strerror(errno),
                 errno == EADDRINUSE ? " (another job on this host? set MASTER_PORT to a free port)" : "");
        return -1;
    }
    r->lfd = fd;
    return 0;
}

/* a descriptor for every rank: raise the soft limit toward the hard one where need be */
static int root_fd_limit(int world, char *err, size_t errn) {
    struct rlimit rl;
    rlim_t need = (rlim_t)world + MAX_STRANGERS + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= need) return 0;
    rlim_t had = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    if (!setrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur >= need) return 0;
    snprintf(err, errn, "%d ranks need %llu open files here but the limit is %llu (ulimit -n)", world,
             (unsigned long long)need, (unsigned long long)had);
    return -1;
}

static void root_accept(Root *r) {
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int fd = accept4(r->lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return; /* EAGAIN, or a connection gone before it was taken */
        int waiting = 0;
        for (int i = 0; i < r->n; i++) waiting += r->conns[i]->stage == R_HELLO;
        if (waiting >= r->e->world - 1 - r->arrived + MAX_STRANGERS) {
            close(fd); /* a flood of strangers: the ranks still get in */
            continue;
        }
        Conn *c = xcalloc(1, sizeof *c);
        c->fd = fd, c->rank = -1, c->stage = R_HELLO;
        char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
        getnameinfo((struct sockaddr *)&sa, sl, host, sizeof host, port, sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
        format_addr(c->addr, sizeof c->addr, host, port);
        vec_push(r->conns, r->n, r->cap, c);
    }
}

/* Tells every process connected that the job is off (best effort: a small frame, one try),
 * and returns rank 0's own message. What a connection sent and was not read is read first,
 * so that its close is a FIN that leaves the frame to be read, not a reset. */
static int root_fail(Root *r, char **why, const char *msg) {
    size_t n = strlen(msg) < REFUSE_MAX ? strlen(msg) : REFUSE_MAX;
    root_accept(r); /* the ranks still in the listen backlog hear it too, rather than a reset */
    for (int i = 0; i < r->n; i++) {
        Conn *c = r->conns[i];
        if (c->fd < 0) continue;
        uint8_t sink[512];
        while (recv(c->fd, sink, sizeof sink, 0) > 0) {}
        c->out_off = c->out_len; /* what was queued no longer matters */
        frame_queue(c, K_REFUSE, msg, n);
        char ignored[64];
        conn_flush(c, ignored, sizeof ignored);
        shutdown(c->fd, SHUT_WR);
    }
    *why = errorf("rank 0: %s", msg);
    return -1;
}

/* up to 16 ranks of a list, then how many in all */
static void rank_list(StrBuf *b, const int *ranks, int n) {
    for (int i = 0; i < n && i < 16; i++) sb_printf(b, "%s%d", i ? ", " : "", ranks[i]);
    if (n > 16) sb_printf(b, ", ... (%d in all)", n);
}

static int root_timeout(Root *r, double timeout_s, char **why) {
    int world = r->e->world, *late = xmalloc((size_t)world * sizeof *late), n = 0;
    StrBuf b = {0};
    for (int k = 1; k < world; k++) {
        const Conn *c = r->by_rank[k];
        if (r->phase == PH_GATHER ? !c : r->phase == PH_ACKS ? c->stage != R_ACKED : out_pending(c)) late[n++] = k;
    }
    if (r->phase == PH_GATHER)
        sb_printf(&b, "%d of %d ranks did not arrive within %g s at port %d (ranks missing: ", n, world, timeout_s,
                  r->e->master_port);
    else if (r->phase == PH_ACKS)
        sb_printf(&b, "%d of %d ranks did not acknowledge the id within %g s at port %d (ranks silent: ", n, world,
                  timeout_s, r->e->master_port);
    else
        sb_printf(&b, "could not tell %d of %d ranks to go within %g s at port %d (ranks: ", n, world, timeout_s,
                  r->e->master_port);
    rank_list(&b, late, n);
    sb_append(&b, ")");
    if (r->phase == PH_GATHER && r->strangers)
        sb_printf(&b, "; %d connection%s that %s no mmc rank dropped, the last from %s (it %s)", r->strangers,
                  r->strangers == 1 ? "" : "s", r->strangers == 1 ? "was" : "were", r->stranger_addr, r->stranger_why);
    free(late);
    int rc = root_fail(r, why, b.s);
    sb_free(&b);
    return rc;
}

static void root_drop_stranger(Root *r, Conn *c, const char *why) {
    r->strangers++;
    snprintf(r->stranger_addr, sizeof r->stranger_addr, "%s", c->addr);
    snprintf(r->stranger_why, sizeof r->stranger_why, "%s", why);
    conn_close(c);
}

/* A hello frame has come in on c: NULL when it is taken, else why the job cannot go on. A
 * connection that is no mmc rank is dropped and counted. */
static char *root_hello(Root *r, Conn *c, size_t len) {
    if (frame_kind(c) != K_HELLO || c->payload_len != HELLO_PAYLOAD) {
        char why[64];
        snprintf(why, sizeof why, "sent a frame of kind %u, not a hello", frame_kind(c));
        root_drop_stranger(r, c, why);
        return NULL;
    }
    uint32_t rank = get32(c->payload), world = get32(c->payload + 4);
    uint64_t want = get64(c->payload + 8);
    int W = r->e->world;
    if (world != (uint32_t)W)
        return errorf("rank %u at %s says the world has %u ranks, rank 0 that it has %d: start every rank with the same "
                      "world size",
                      rank, c->addr, world, W);
    if (rank == 0) return errorf("a second rank 0 at %s: two processes were given rank 0", c->addr);
    if (rank >= (uint32_t)W) return errorf("a process at %s says it is rank %u of a world of %d", c->addr, rank, W);
    if (r->by_rank[rank])
        return errorf("rank %u twice: at %s and at %s (two processes were given the same rank)", rank,
                      r->by_rank[rank]->addr, c->addr);
    if (want != len)
        return errorf("rank %u at %s expects %llu bytes, rank 0 hands out %zu (another mmc build?)", rank, c->addr,
                      (unsigned long long)want, len);
    c->rank = (int)rank, c->stage = R_ARRIVED;
    r->by_rank[rank] = c;
    r->arrived++;
    frame_reset(c);
    return NULL;
}

/* what came in on c, or its closing: NULL, or why the job cannot go on */
static char *root_input(Root *r, Conn *c, size_t len) {
    char err[160];
    int got = frame_read(c, c->stage == R_HELLO ? HELLO_PAYLOAD : 0, err, sizeof err);
    if (got == 0) return NULL;
    if (c->stage == R_HELLO) {
        if (got > 0) return root_hello(r, c, len);
        if (c->head_have || strcmp(err, "closed the connection")) root_drop_stranger(r, c, err);
        else conn_close(c); /* a silent connect-and-close (a port probe) is worth no word */
        return NULL;
    }
    if (got < 0 && c->stage == R_ARRIVED)
        return errorf("rank %d at %s %s before every rank had arrived", c->rank, c->addr, err);
    if (got < 0 && c->stage == R_ACK) return errorf("rank %d at %s %s before it acknowledged the id", c->rank, c->addr, err);
    if (got < 0) return errorf("rank %d at %s %s before every rank had acknowledged the id", c->rank, c->addr, err);
    if (c->stage == R_ACK && frame_kind(c) == K_ACK) {
        c->stage = R_ACKED;
        r->acked++;
        frame_reset(c);
        return NULL;
    }
    return errorf("rank %d at %s sent a frame of kind %u out of turn", c->rank, c->addr, frame_kind(c));
}

static int root_run(const DistEnv *e, const void *blob, size_t len, double deadline, double timeout_s, DistLinks *keep,
                    char **why) {
    char err[256];
    if (root_fd_limit(e->world, err, sizeof err)) {
        *why = errorf("rank 0: %s", err);
        return -1;
    }
    Root r = {.e = e, .lfd = -1, .phase = PH_GATHER};
    if (root_listen(&r, err, sizeof err)) {
        *why = errorf("rank 0: %s", err);
        return -1;
    }
    r.by_rank = xcalloc((size_t)e->world, sizeof *r.by_rank);
    struct pollfd *fds = NULL;
    int rc = 1;
    char *fatal = NULL;
    for (;;) {
        if (r.phase == PH_GATHER && r.arrived == e->world - 1) {
            for (int k = 1; k < e->world; k++) { /* every rank is here: the bytes to all */
                frame_queue(r.by_rank[k], K_BYTES, blob, len);
                r.by_rank[k]->stage = R_ACK;
            }
            r.phase = PH_ACKS;
        }
        if (r.phase == PH_ACKS && r.acked == e->world - 1) {
            for (int k = 1; k < e->world; k++) { /* every rank has them: go */
                frame_queue(r.by_rank[k], K_GO, NULL, 0);
                r.by_rank[k]->stage = R_GO;
            }
            r.phase = PH_GO;
        }
        if (r.phase == PH_GO) {
            int pending = 0;
            for (int k = 1; k < e->world; k++) pending += out_pending(r.by_rank[k]);
            if (!pending) {
                rc = 0;
                break;
            }
        }
        double left = deadline - now_seconds();
        if (left <= 0) {
            rc = root_timeout(&r, timeout_s, why);
            break;
        }
        fds = xrealloc(fds, (size_t)(r.n + 1) * sizeof *fds);
        int nf = 0;
        if (r.phase == PH_GATHER) fds[nf++] = (struct pollfd){.fd = r.lfd, .events = POLLIN};
        const int first = nf;
        for (int i = 0; i < r.n; i++) {
            Conn *c = r.conns[i];
            /* a rank told to go has nothing more to say: its closing is no news (poll skips fd -1) */
            int done = c->stage == R_GO && !out_pending(c);
            fds[nf++] = (struct pollfd){.fd = done ? -1 : c->fd,
                                        .events = (short)((c->stage != R_GO ? POLLIN : 0) | (out_pending(c) ? POLLOUT : 0))};
        }
        if (poll(fds, (nfds_t)nf, poll_ms(left)) < 0 && errno != EINTR) {
            fatal = errorf("poll: %s", strerror(errno));
            break;
        }
        const int polled = r.n; /* root_accept adds connections after these */
        for (int i = 0; i < polled && !fatal; i++) {
            Conn *c = r.conns[i];
            short ev = fds[first + i].revents;
            if (c->fd < 0 || !ev) continue;
            if ((ev & POLLOUT) && conn_flush(c, err, sizeof err))
                fatal = errorf("rank %d at %s: %s while sending to it", c->rank, c->addr, err);
            else if (c->stage != R_GO && (ev & (POLLIN | POLLHUP | POLLERR)))
                fatal = root_input(&r, c, len);
        }
        if (fatal) break;
        if (first && fds[0].revents) root_accept(&r);
        for (int i = 0; i < r.n;) /* the strangers dropped: none of them is in by_rank */
            if (r.conns[i]->fd < 0) {
                free(r.conns[i]);
                r.conns[i] = r.conns[--r.n];
            } else i++;
    }
    if (fatal) {
        rc = root_fail(&r, why, fatal);
        free(fatal);
    }
    if (rc == 0 && keep)
        for (int k = 1; k < e->world; k++) keep->fd[k] = r.by_rank[k]->fd, r.by_rank[k]->fd = -1;
    for (int i = 0; i < r.n; i++) conn_close(r.conns[i]), free(r.conns[i]);
    close(r.lfd);
    free(r.conns), free(r.by_rank), free(fds);
    return rc;
}

/* ---- the other ranks ---- */

enum { P_IDLE, P_CONNECTING, P_REPLY, P_GO };

static int peer_run(const DistEnv *e, void *blob, size_t len, double deadline, double timeout_s, DistLinks *keep,
                    char **why) {
    char port[16], where[300], err[512] = "no try yet";
    snprintf(port, sizeof port, "%d", e->master_port);
    format_addr(where, sizeof where, e->master_addr, port);
    uint8_t hello[HELLO_PAYLOAD];
    put32(hello, (uint32_t)e->rank), put32(hello + 4, (uint32_t)e->world), put64(hello + 8, len);
    struct addrinfo *ai = NULL;
    int tries = 0, stage = P_IDLE;
    double next_try = 0, try_end = 0, backoff = BACKOFF_FIRST_S;
    Conn c = {.fd = -1, .rank = e->rank};
    int rc = 1;
    while (rc > 0) {
        double now = now_seconds(), left = deadline - now;
        if (left <= 0) {
            if (stage <= P_CONNECTING)
                *why = errorf("rank %d: no answer from rank 0 at %s within %g s (last try: %s)", e->rank, where, timeout_s, err);
            else if (stage == P_REPLY)
                *why = errorf("rank %d: rank 0 at %s took the hello but sent no id within %g s (it waits for every rank: "
                              "is one missing?)",
                              e->rank, where, timeout_s);
            else
                *why = errorf("rank %d: rank 0 at %s sent the id but no go within %g s (it waits for every rank's ack)",
                              e->rank, where, timeout_s);
            rc = -1;
            break;
        }
        if (stage == P_IDLE && now >= next_try) {
            if (!ai) { /* a host name may not resolve yet where the cluster's DNS lags its nodes */
                struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
                int g = getaddrinfo(e->master_addr, port, &hints, &ai);
                if (g) {
                    ai = NULL;
                    snprintf(err, sizeof err, "cannot resolve %s: %s", e->master_addr,
                             g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
                }
            }
            if (ai) {
                struct addrinfo *a = ai;
                int n = 0;
                for (struct addrinfo *p = ai; p; p = p->ai_next) n++;
                for (int k = tries % n; k > 0; k--) a = a->ai_next; /* each try the next address of the host */
                c.fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
                if (c.fd < 0) snprintf(err, sizeof err, "socket: %s", strerror(errno));
                else if (connect(c.fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS)
                    stage = P_CONNECTING, try_end = now + CONNECT_TRY_S;
                else snprintf(err, sizeof err, "%s", strerror(errno)), conn_close(&c);
            }
            tries++;
            if (stage == P_IDLE) { /* rank 0 may start later: back off, a little differently on each rank */
                next_try = now + backoff * (1.0 + (e->rank % 16) / 32.0);
                backoff = backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : backoff * 2;
                continue;
            }
        }
        struct pollfd pf = {.fd = c.fd, .events = (short)(stage == P_CONNECTING ? POLLOUT
                                                          : POLLIN | (out_pending(&c) ? POLLOUT : 0))};
        double wait = stage == P_IDLE ? next_try - now : stage == P_CONNECTING && try_end - now < left ? try_end - now : left;
        if (poll(stage == P_IDLE ? NULL : &pf, stage == P_IDLE ? 0 : 1, poll_ms(wait)) < 0 && errno != EINTR) {
            *why = errorf("rank %d: poll: %s", e->rank, strerror(errno));
            rc = -1;
            break;
        }
        if (stage == P_IDLE) continue;
        if (stage == P_CONNECTING) {
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (!pf.revents && now_seconds() < try_end) continue;
            if (!pf.revents) soerr = ETIMEDOUT;
            else if (getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl)) soerr = errno;
            if (soerr) {
                snprintf(err, sizeof err, "%s", strerror(soerr));
                conn_close(&c);
                stage = P_IDLE;
                next_try = now_seconds() + backoff;
                backoff = backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : backoff * 2;
                continue;
            }
            frame_queue(&c, K_HELLO, hello, sizeof hello);
            stage = P_REPLY;
        }
        if (conn_flush(&c, err, sizeof err)) {
            *why = errorf("rank %d: sending to rank 0 at %s: %s", e->rank, where, err);
            rc = -1;
            break;
        }
        if (!(pf.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        int got = frame_read(&c, len > REFUSE_MAX ? len : REFUSE_MAX, err, sizeof err);
        if (got == 0) continue;
        if (got < 0) {
            *why = errorf("rank %d: rank 0 at %s %s before %s", e->rank, where, err,
                          stage == P_REPLY ? "it sent the id" : "every rank had acknowledged the id");
            rc = -1;
        } else if (frame_kind(&c) == K_REFUSE) {
            *why = errorf("rank %d: rank 0 at %s called the job off: %.*s", e->rank, where, (int)c.payload_len,
                          (const char *)c.payload);
            rc = -1;
        } else if (stage == P_REPLY && frame_kind(&c) == K_BYTES && c.payload_len == len) {
            memcpy(blob, c.payload, len);
            frame_reset(&c);
            frame_queue(&c, K_ACK, NULL, 0);
            stage = P_GO;
        } else if (stage == P_GO && frame_kind(&c) == K_GO) rc = 0;
        else {
            *why = errorf("rank %d: rank 0 at %s sent a frame of kind %u and %zu bytes out of turn", e->rank, where,
                          frame_kind(&c), c.payload_len);
            rc = -1;
        }
    }
    if (rc == 0 && keep) keep->fd[0] = c.fd, c.fd = -1;
    conn_close(&c);
    if (ai) freeaddrinfo(ai);
    return rc;
}

static int bootstrap(const DistEnv *e, void *blob, size_t len, double timeout_s, DistLinks *keep, char **why) {
    *why = NULL;
    if (e->error[0]) {
        *why = errorf("rank %d: %s", e->rank, e->error);
        return -1;
    }
    if (e->world <= 1) return 0;
    if (!e->master_addr[0] || e->master_port < 1 || e->master_port > 65535) {
        *why = errorf("rank %d: a world of %d needs rank 0's host and port (MASTER_ADDR, MASTER_PORT)", e->rank, e->world);
        return -1;
    }
    if (len < 1 || len > DIST_BLOB_MAX || !(timeout_s > 0)) {
        *why = errorf("rank %d: dist_bootstrap of %zu bytes within %g s: from 1 to %d bytes, within more than 0 s",
                      e->rank, len, timeout_s, DIST_BLOB_MAX);
        return -1;
    }
    double deadline = now_seconds() + timeout_s;
    if (keep) {
        keep->world = e->world, keep->rank = e->rank;
        keep->fd = xmalloc((size_t)e->world * sizeof *keep->fd);
        for (int k = 0; k < e->world; k++) keep->fd[k] = -1;
    }
    int rc = e->rank == 0 ? root_run(e, blob, len, deadline, timeout_s, keep, why)
                          : peer_run(e, blob, len, deadline, timeout_s, keep, why);
    if (rc && keep) free(keep->fd), keep->fd = NULL;
    return rc;
}

int dist_bootstrap(const DistEnv *e, void *blob, size_t len, double timeout_s, char **why) {
    return bootstrap(e, blob, len, timeout_s, NULL, why);
}

int dist_bootstrap_links(const DistEnv *e, void *blob, size_t len, double timeout_s, DistLinks *links, char **why) {
    *links = (DistLinks){e->world, e->rank, NULL};
    return bootstrap(e, blob, len, timeout_s, links, why);
}

void dist_bye_frame(unsigned char out[DIST_BYE_BYTES]) {
    memcpy(out, MAGIC, 8);
    put32(out + 8, K_BYE), put32(out + 12, 0);
}

int dist_is_bye(const unsigned char in[DIST_BYE_BYTES]) {
    return !memcmp(in, MAGIC, 8) && get32(in + 8) == K_BYE && get32(in + 12) == 0;
}
