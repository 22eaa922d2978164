/* test_dist: the groundwork of data-parallel training, on the CPU. dist_env_read over a
 * table of launchers' environments; the TCP rendezvous between forked processes on
 * 127.0.0.1 (rank 0 late, a rank missing, a peer of another world size, a rank twice, a
 * stranger on the port, no rank 0 at all); the watch over the ranks' links after it (a rank
 * that dies stops the others; a run that ends says bye; a rank stopping on its own signal
 * ends by itself); nccl_load on this machine; and the batcher's rank slices, whose union
 * over the ranks is a world of 1's batch at the same position. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "data.h"
#include "dist_bootstrap.h"
#include "dist_env.h"
#include "dist_watch.h"
#include "nccl_loader.h"
#include "rng.h"
#include "test_util.h"
#include "tokens.h"

#if defined(__has_include)
#if __has_include(<nccl.h>) && __has_include(<cuda_runtime.h>)
#include <nccl.h>
/* the loader's own declarations are NCCL's ABI */
_Static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId), "ncclUniqueId");
_Static_assert(sizeof(ncclComm_t) == sizeof(NcclComm), "ncclComm_t");
_Static_assert(sizeof(ncclResult_t) == sizeof(NcclResult) && (int)ncclSuccess == NCCL_RESULT_SUCCESS &&
                   (int)ncclInProgress == NCCL_RESULT_IN_PROGRESS, "ncclResult_t");
_Static_assert(sizeof(ncclDataType_t) == sizeof(NcclDataType) && (int)ncclFloat32 == NCCL_DT_FLOAT32 &&
                   (int)ncclFloat16 == NCCL_DT_FLOAT16 && (int)ncclBfloat16 == NCCL_DT_BFLOAT16, "ncclDataType_t");
_Static_assert(sizeof(ncclRedOp_t) == sizeof(NcclRedOp) && (int)ncclSum == NCCL_OP_SUM && (int)ncclAvg == NCCL_OP_AVG, "ncclRedOp_t");
_Static_assert(sizeof(cudaStream_t) == sizeof(void *), "cudaStream_t");
#define CHECKED_AGAINST_NCCL_H 1
#endif
#endif

/* ---- dist_env_read ---- */

static const char *const VARS[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                   "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                   "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", NULL};

static void env_clear(void) {
    for (int i = 0; VARS[i]; i++) unsetenv(VARS[i]);
}

/* sets "NAME=value" entries (value may be empty or hold spaces) */
static void env_set(const char *const *kv) {
    env_clear();
    for (int i = 0; kv[i]; i++) {
        const char *eq = strchr(kv[i], '=');
        char *name = xstrndup(kv[i], (size_t)(eq - kv[i]));
        setenv(name, eq + 1, 1);
        free(name);
    }
}

typedef struct EnvCase {
    const char *env[8];
    int rank, world, local;
    DistSource source;
    const char *addr;
    int port;
    const char *error; /* NULL: sound; else a part of the message (an exact one when it starts with '=') */
} EnvCase;

static const EnvCase ENV_CASES[] = {
    {{NULL}, 0, 1, 0, DIST_SOURCE_NONE, "", 0, NULL},
    {{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=host0", "MASTER_PORT=1234"}, 1, 2, 1, DIST_SOURCE_TORCHRUN,
     "host0", 1234, NULL},
    {{"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=3", "MASTER_ADDR=10.0.0.1"}, 3, 8, 3, DIST_SOURCE_TORCHRUN, "10.0.0.1", 29500,
     NULL},
    {{"RANK=2", "WORLD_SIZE=4", "MASTER_ADDR=h"}, 2, 4, 2, DIST_SOURCE_TORCHRUN, "h", 29500, NULL},
    {{"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, NULL},
    {{"RANK=4095", "WORLD_SIZE=4096", "LOCAL_RANK=7", "MASTER_ADDR=n0"}, 4095, 4096, 7, DIST_SOURCE_TORCHRUN, "n0", 29500,
     NULL},
    {{"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0", "MASTER_ADDR=n0",
      "MASTER_PORT=40000"},
     2, 4, 0, DIST_SOURCE_OMPI, "n0", 40000, NULL},
    {{"PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MASTER_ADDR=n0"}, 1, 2, 1, DIST_SOURCE_PMI, "n0", 29500, NULL},
    /* torchrun's variables come first, whatever MPI's say */
    {{"RANK=1", "WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", "MASTER_ADDR=h"}, 1, 2, 1,
     DIST_SOURCE_TORCHRUN, "h", 29500, NULL},
    /* inconsistent */
    {{"RANK=1"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "=RANK=1 is set but not WORLD_SIZE: set both (as torchrun or mpirun do) or neither"},
    {{"WORLD_SIZE=2", "LOCAL_RANK=0"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "WORLD_SIZE=2 is set but not RANK"},
    {{"LOCAL_RANK=0"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "LOCAL_RANK=0 is set but not RANK and WORLD_SIZE"},
    {{"OMPI_COMM_WORLD_RANK=1"}, 0, 1, 0, DIST_SOURCE_OMPI, "", 0, "OMPI_COMM_WORLD_RANK=1 is set but not OMPI_COMM_WORLD_SIZE"},
    /* bad values */
    {{"RANK=abc", "WORLD_SIZE=2", "MASTER_ADDR=h"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "=RANK=abc is not a whole number"},
    {{"RANK=1", "WORLD_SIZE=2x", "MASTER_ADDR=h"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "=WORLD_SIZE=2x is not a whole number"},
    {{"RANK= 1", "WORLD_SIZE=2", "MASTER_ADDR=h"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "RANK= 1 is not a whole number"},
    {{"RANK=", "WORLD_SIZE=2", "MASTER_ADDR=h"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "RANK= is not a whole number"},
    {{"RANK=0", "WORLD_SIZE=99999999999999999999"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "is not a whole number"},
    {{"RANK=2", "WORLD_SIZE=2", "MASTER_ADDR=h"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0,
     "=RANK=2 with WORLD_SIZE=2: the rank must be from 0 to 1"},
    {{"RANK=-1", "WORLD_SIZE=2", "MASTER_ADDR=h"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "RANK=-1 with WORLD_SIZE=2"},
    {{"RANK=0", "WORLD_SIZE=0"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "=WORLD_SIZE=0: the world size must be from 1 to 4096"},
    {{"RANK=0", "WORLD_SIZE=4097", "MASTER_ADDR=h"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "WORLD_SIZE=4097: the world size must be from 1 to 4096"},
    {{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=2", "MASTER_ADDR=h"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0,
     "LOCAL_RANK=2 with WORLD_SIZE=2: the local rank must be from 0 to 1"},
    {{"PMI_RANK=3", "PMI_SIZE=2", "MASTER_ADDR=h"}, 0, 1, 0, DIST_SOURCE_PMI, "", 0, "PMI_RANK=3 with PMI_SIZE=2"},
    /* the rendezvous */
    {{"RANK=1", "WORLD_SIZE=2"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0,
     "=WORLD_SIZE=2 but no MASTER_ADDR/MASTER_PORT: set them to rank 0's host and a free port, as torchrun does"},
    {{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"}, 0, 1, 0, DIST_SOURCE_OMPI, "", 0,
     "=OMPI_COMM_WORLD_SIZE=2 but no MASTER_ADDR/MASTER_PORT: set them to rank 0's host and a free port, as torchrun does"},
    {{"RANK=1", "WORLD_SIZE=2", "MASTER_PORT=1234"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0,
     "WORLD_SIZE=2 and MASTER_PORT=1234 but no MASTER_ADDR"},
    {{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=70000"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0,
     "=MASTER_PORT=70000: a port is from 1 to 65535"},
    {{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=http"}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0,
     "=MASTER_PORT=http is not a whole number"},
    {{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR="}, 0, 1, 0, DIST_SOURCE_TORCHRUN, "", 0, "MASTER_ADDR is empty"},
};

static void test_env(void) {
    for (size_t i = 0; i < sizeof ENV_CASES / sizeof *ENV_CASES; i++) {
        const EnvCase *c = &ENV_CASES[i];
        env_set(c->env);
        DistEnv e = dist_env_read();
        const char *first = c->env[0] ? c->env[0] : "(none)";
        if (!c->error) CHECK(!e.error[0], "env case %zu (%s...): unexpected error: %s", i, first, e.error);
        else if (c->error[0] == '=')
            CHECK(!strcmp(e.error, c->error + 1), "env case %zu (%s...): error\n  got  %s\n  want %s", i, first, e.error,
                  c->error + 1);
        else CHECK(strstr(e.error, c->error), "env case %zu (%s...): error \"%s\" lacks \"%s\"", i, first, e.error, c->error);
        CHECK(e.rank == c->rank && e.world == c->world && e.local_rank == c->local,
              "env case %zu (%s...): rank %d world %d local %d, want %d %d %d", i, first, e.rank, e.world, e.local_rank,
              c->rank, c->world, c->local);
        CHECK(e.source == c->source, "env case %zu (%s...): source %s, want %s", i, first, dist_source_name(e.source),
              dist_source_name(c->source));
        if (!c->error)
            CHECK(!strcmp(e.master_addr, c->addr) && e.master_port == c->port, "env case %zu (%s...): %s:%d, want %s:%d", i,
                  first, e.master_addr, e.master_port, c->addr, c->port);
    }
    env_clear();
    printf("dist_env_read: %zu environments\n", sizeof ENV_CASES / sizeof *ENV_CASES);
}

/* ---- the rendezvous, between forked processes ---- */

enum { BLOB = NCCL_UNIQUE_ID_LEN };

typedef struct Child {
    pid_t pid;
    int fd;             /* the read end of its report */
    int rc;             /* dist_bootstrap's, or 99 when no report came */
    uint8_t blob[BLOB];
    char why[1200];
} Child;

/* a port nothing listens on now: the kernel's pick for port 0 */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &sl))
        die("free_port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k <= 0) _exit(98);
        c += k, n -= (size_t)k;
    }
}

/* a forked rank's torchrun environment on 127.0.0.1, and what dist_env_read makes of it */
static DistEnv rank_env(int rank, int world, int port) {
    char r[16], w[16], pt[16];
    snprintf(r, sizeof r, "%d", rank), snprintf(w, sizeof w, "%d", world), snprintf(pt, sizeof pt, "%d", port);
    env_clear();
    setenv("RANK", r, 1), setenv("WORLD_SIZE", w, 1), setenv("LOCAL_RANK", r, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1), setenv("MASTER_PORT", pt, 1);
    return dist_env_read();
}

/* A rank as its own process: after delay_ms, the torchrun environment of (rank, world, port),
 * then dist_bootstrap; it reports rc, the bytes and the reason on a pipe. Rank 0's bytes
 * are `blob`, the others' start zero. */
static Child spawn_rank(int rank, int world, int port, int delay_ms, double timeout_s, const uint8_t *blob) {
    int p[2];
    if (pipe(p)) die("pipe: %s", strerror(errno));
    Child c = {.fd = p[0], .rc = 99};
    fflush(NULL);
    c.pid = fork();
    if (c.pid < 0) die("fork: %s", strerror(errno));
    if (c.pid == 0) {
        close(p[0]);
        sleep_ms(delay_ms);
        DistEnv e = rank_env(rank, world, port);
        uint8_t mine[BLOB] = {0};
        if (rank == 0) memcpy(mine, blob, BLOB);
        char *why = NULL;
        int rc = dist_bootstrap(&e, mine, BLOB, timeout_s, &why);
        uint32_t n = why ? (uint32_t)strlen(why) : 0;
        write_all(p[1], &rc, sizeof rc), write_all(p[1], mine, BLOB), write_all(p[1], &n, sizeof n);
        if (n) write_all(p[1], why, n);
        _exit(0);
    }
    close(p[1]);
    return c;
}

/* Every child's report, or a kill when none came within limit_s: no test waits for ever. */
static void collect(Child *cs, int n, double limit_s) {
    double end = now_seconds() + limit_s;
    for (int i = 0; i < n; i++) {
        Child *c = &cs[i];
        uint8_t buf[sizeof c->rc + BLOB + 4 + sizeof c->why];
        size_t have = 0;
        for (;;) {
            double left = end - now_seconds();
            struct pollfd pf = {.fd = c->fd, .events = POLLIN};
            if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) == 0) {
                fprintf(stderr, "child %d (pid %d) sent no report within %g s: killed\n", i, (int)c->pid, limit_s);
                kill(c->pid, SIGKILL);
                break;
            }
            ssize_t k = read(c->fd, buf + have, sizeof buf - have);
            if (k <= 0) break;
            have += (size_t)k;
        }
        close(c->fd);
        waitpid(c->pid, NULL, 0);
        if (have < sizeof c->rc + BLOB + 4) continue;
        uint32_t len;
        memcpy(&c->rc, buf, sizeof c->rc);
        memcpy(c->blob, buf + sizeof c->rc, BLOB);
        memcpy(&len, buf + sizeof c->rc + BLOB, 4);
        if (len >= sizeof c->why) len = sizeof c->why - 1;
        memcpy(c->why, buf + sizeof c->rc + BLOB + 4, len);
        c->why[len] = 0;
    }
}

/* a process on the port that is no mmc rank: it sends an HTTP request and waits a moment */
static pid_t spawn_stranger(int port) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid) return pid;
    for (int i = 0; i < 200; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            const char req[] = "GET / HTTP/1.0\r\n\r\n";
            write_all(fd, req, sizeof req - 1);
            sleep_ms(300);
            _exit(0);
        }
        if (fd >= 0) close(fd);
        sleep_ms(10);
    }
    _exit(1);
}

static void test_bootstrap(void) {
    uint8_t blob[BLOB];
    uint64_t s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    for (int i = 0; i < BLOB; i++) blob[i] = (uint8_t)rng_next(&s);

    { /* 3 ranks; rank 0 starts 600 ms after the others, which retry until it listens */
        int port = free_port();
        Child cs[3] = {spawn_rank(1, 3, port, 0, 10, blob), spawn_rank(2, 3, port, 0, 10, blob),
                       spawn_rank(0, 3, port, 600, 10, blob)};
        double t0 = now_seconds();
        collect(cs, 3, 20);
        for (int i = 0; i < 3; i++) {
            CHECK(cs[i].rc == 0, "late rank 0: child %d: rc %d: %s", i, cs[i].rc, cs[i].why);
            CHECK(!memcmp(cs[i].blob, blob, BLOB), "late rank 0: child %d does not hold rank 0's bytes", i);
        }
        printf("bootstrap: 3 ranks on port %d, rank 0 600 ms late: every rank has rank 0's 128 bytes (%.2f s)\n", port,
               now_seconds() - t0);
    }
    { /* a world of 3 with rank 2 never started: rank 0 and rank 1 give up after 2 s */
        int port = free_port();
        Child cs[2] = {spawn_rank(0, 3, port, 0, 2, blob), spawn_rank(1, 3, port, 100, 2, blob)};
        collect(cs, 2, 20);
        char want[128];
        snprintf(want, sizeof want, "rank 0: 1 of 3 ranks did not arrive within 2 s at port %d (ranks missing: 2)", port);
        CHECK(cs[0].rc == -1 && !strcmp(cs[0].why, want), "a rank missing: rank 0 says\n  %s\n  want %s", cs[0].why, want);
        CHECK(cs[1].rc == -1 && !strncmp(cs[1].why, "rank 1: ", 8) &&
                  (strstr(cs[1].why, "ranks missing: 2") || strstr(cs[1].why, "within 2 s")),
              "a rank missing: rank 1 says: %s", cs[1].why);
        printf("bootstrap: a rank missing:\n  %s\n  %s\n", cs[0].why, cs[1].why);
    }
    { /* a peer that says the world has 3 ranks, where rank 0 has 2: both refuse */
        int port = free_port();
        Child cs[2] = {spawn_rank(0, 2, port, 0, 5, blob), spawn_rank(1, 3, port, 0, 5, blob)};
        collect(cs, 2, 20);
        CHECK(cs[0].rc == -1 && strstr(cs[0].why, "rank 1 at 127.0.0.1:") &&
                  strstr(cs[0].why, "says the world has 3 ranks, rank 0 that it has 2"),
              "another world size: rank 0 says: %s", cs[0].why);
        CHECK(cs[1].rc == -1 && strstr(cs[1].why, "rank 1: rank 0 at 127.0.0.1:") && strstr(cs[1].why, "called the job off") &&
                  strstr(cs[1].why, "says the world has 3 ranks"),
              "another world size: rank 1 says: %s", cs[1].why);
        printf("bootstrap: another world size:\n  %s\n  %s\n", cs[0].why, cs[1].why);
    }
    { /* two processes given rank 1 */
        int port = free_port();
        Child cs[3] = {spawn_rank(1, 3, port, 0, 5, blob), spawn_rank(1, 3, port, 0, 5, blob),
                       spawn_rank(0, 3, port, 500, 5, blob)};
        collect(cs, 3, 20);
        CHECK(cs[2].rc == -1 && strstr(cs[2].why, "rank 1 twice: at 127.0.0.1:"), "a rank twice: rank 0 says: %s", cs[2].why);
        CHECK(cs[0].rc == -1 && cs[1].rc == -1 && strstr(cs[0].why, "called the job off") && strstr(cs[1].why, "called the job off"),
              "a rank twice: the peers say: %s / %s", cs[0].why, cs[1].why);
        printf("bootstrap: a rank twice:\n  %s\n", cs[2].why);
    }
    { /* a stranger on the port first: it is dropped and the job goes on */
        int port = free_port();
        Child root = spawn_rank(0, 2, port, 0, 10, blob);
        pid_t stranger = spawn_stranger(port);
        sleep_ms(150);
        Child cs[2] = {root, spawn_rank(1, 2, port, 0, 10, blob)};
        collect(cs, 2, 20);
        int st = 0;
        waitpid(stranger, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the stranger could not connect");
        for (int i = 0; i < 2; i++)
            CHECK(cs[i].rc == 0 && !memcmp(cs[i].blob, blob, BLOB), "a stranger: child %d: rc %d: %s", i, cs[i].rc, cs[i].why);
        printf("bootstrap: a stranger on the port is dropped, the 2 ranks go on\n");
    }
    { /* no rank 0 at all */
        int port = free_port();
        Child cs[1] = {spawn_rank(1, 2, port, 0, 1, blob)};
        collect(cs, 1, 20);
        char want[128];
        snprintf(want, sizeof want, "rank 1: no answer from rank 0 at 127.0.0.1:%d within 1 s (last try: ", port);
        CHECK(cs[0].rc == -1 && !strncmp(cs[0].why, want, strlen(want)), "no rank 0: %s", cs[0].why);
        printf("bootstrap: no rank 0:\n  %s\n", cs[0].why);
    }
    { /* a world of 1 needs no rendezvous; a bad environment is refused, not waited on */
        DistEnv one = {.rank = 0, .world = 1};
        char *why = NULL;
        CHECK(dist_bootstrap(&one, blob, BLOB, 1, &why) == 0 && !why, "a world of 1");
        DistEnv bad = {.rank = 0, .world = 1};
        snprintf(bad.error, sizeof bad.error, "RANK=1 is set but not WORLD_SIZE");
        CHECK(dist_bootstrap(&bad, blob, BLOB, 1, &why) == -1 && why && strstr(why, "RANK=1 is set"), "a bad environment");
        free(why);
    }
}

/* ---- NCCL ---- */

static void test_nccl(void) {
    char *why = NULL;
    const NcclApi *a = nccl_load(&why);
    if (a) {
        CHECK(strchr(nccl_version_text(a), '.') && a->version > 0, "NCCL's version: %s", nccl_version_text(a));
        CHECK(a->GetErrorString(NCCL_RESULT_SUCCESS) != NULL, "ncclGetErrorString");
        printf("nccl_load: NCCL %s from %s\n", nccl_version_text(a), a->path);
    } else {
        CHECK(why && why[0], "nccl_load gave NULL without a reason");
        printf("nccl_load: none here: %s\n", why ? why : "");
    }
    char *why2 = NULL;
    CHECK(nccl_load(&why2) == a, "a second nccl_load gives the first one's answer");
    free(why), free(why2);
#ifdef CHECKED_AGAINST_NCCL_H
    printf("nccl_loader.h: its types checked against nccl.h %d.%d.%d\n", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#endif
}

/* ---- the batcher's rank slices ---- */

enum { SEQ = 4, ROWS = 37, GLOBAL = 8, UPDATES = 12 };

/* the batcher before ranks: position p's row, in file order or the shuffle of its epoch */
static int64_t old_row_at(int64_t position, uint64_t shuffle) {
    int64_t epoch = position / ROWS, r = position % ROWS;
    if (!shuffle) return r;
    int64_t perm[ROWS];
    for (int64_t i = 0; i < ROWS; i++) perm[i] = i;
    uint64_t s = shuffle * 0x9e3779b97f4a7c15ull + (uint64_t)epoch;
    for (int64_t i = ROWS - 1; i > 0; i--) {
        int64_t j = (int64_t)(rng_next(&s) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    return perm[r];
}

static uint16_t token_of(int64_t i) { return (uint16_t)(1 + (i * 7 + i / 5) % 299); }

static void test_batcher(void) {
    make_dirs("build/tests/tmp");
    const char *path = "build/tests/tmp/dist_rows.bin";
    TokenWriter *w = tokens_create(path, 300, SEQ + 1, 0, NULL);
    for (int64_t i = 0; i < ROWS * (SEQ + 1); i++) {
        uint16_t t = token_of(i);
        tokens_append(w, &t, 1);
    }
    tokens_finish(w);
    int32_t gids[GLOBAL * SEQ], glab[GLOBAL * SEQ], ids[GLOBAL * SEQ], lab[GLOBAL * SEQ];
    const uint64_t shuffles[] = {0, 3};
    const int64_t starts[] = {0, 13}; /* a fresh run and a resumed one */
    int checked = 0;
    for (int si = 0; si < 2; si++)
        for (int pi = 0; pi < 2; pi++) {
            uint64_t shuffle = shuffles[si];
            /* a world of 1 is the batcher it was: the rows of the old order, set_rank(0, 1) or not */
            Batcher *one = batcher_open(path, GLOBAL, SEQ, 300, shuffle, BATCHER_PAD_ID);
            Batcher *one_set = batcher_open(path, GLOBAL, SEQ, 300, shuffle, BATCHER_PAD_ID);
            batcher_set_rank(one_set, 0, 1);
            one->position = one_set->position = starts[pi];
            for (int u = 0; u < UPDATES; u++) {
                int64_t pos = one->position;
                batcher_next(one, gids, glab);
                batcher_next(one_set, ids, lab);
                CHECK(!memcmp(gids, ids, sizeof ids) && !memcmp(glab, lab, sizeof lab) && one->position == one_set->position,
                      "world 1: set_rank(0, 1) changes the batch");
                CHECK(one->position == pos + GLOBAL, "world 1: the position");
                for (int i = 0; i < GLOBAL; i++)
                    for (int t = 0; t < SEQ; t++) {
                        int64_t tok = old_row_at(pos + i, shuffle) * (SEQ + 1) + t;
                        CHECK(gids[i * SEQ + t] == token_of(tok) && glab[i * SEQ + t] == token_of(tok + 1),
                              "world 1, shuffle %llu, update %d, row %d: not the old batcher's", (unsigned long long)shuffle,
                              u, i);
                    }
            }
            batcher_close(one), batcher_close(one_set);
            /* world 2 and 4 at B = 8 / world: the ranks' batches, end to end, are the world of 1's */
            for (int world = 1; world <= 4; world *= 2) {
                int B = GLOBAL / world;
                Batcher *g = batcher_open(path, GLOBAL, SEQ, 300, shuffle, BATCHER_PAD_ID);
                Batcher *rk[4];
                g->position = starts[pi];
                for (int r = 0; r < world; r++) {
                    rk[r] = batcher_open(path, B, SEQ, 300, shuffle, BATCHER_PAD_ID);
                    rk[r]->position = starts[pi]; /* a resume's position, then the rank: the order does not matter */
                    batcher_set_rank(rk[r], r, world);
                }
                for (int u = 0; u < UPDATES; u++) {
                    batcher_next(g, gids, glab);
                    for (int r = 0; r < world; r++) batcher_next(rk[r], ids + r * B * SEQ, lab + r * B * SEQ);
                    CHECK(!memcmp(gids, ids, sizeof ids) && !memcmp(glab, lab, sizeof lab),
                          "world %d, shuffle %llu, start %lld, update %d: the ranks' rows are not the world of 1's", world,
                          (unsigned long long)shuffle, (long long)starts[pi], u);
                    for (int r = 0; r < world; r++)
                        CHECK(rk[r]->position == g->position, "world %d, update %d, rank %d: position %lld, world 1 %lld",
                              world, u, r, (long long)rk[r]->position, (long long)g->position);
                    checked++;
                }
                for (int r = 0; r < world; r++) batcher_close(rk[r]);
                batcher_close(g);
            }
        }
    /* a rank not below the world dies, naming the file */
    fflush(NULL);
    int err[2];
    if (pipe(err)) die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        dup2(err[1], 2);
        Batcher *b = batcher_open(path, 2, SEQ, 300, 0, BATCHER_PAD_ID);
        batcher_set_rank(b, 2, 2);
        _exit(0);
    }
    close(err[1]);
    char msg[512] = "";
    struct pollfd pf = {.fd = err[0], .events = POLLIN};
    ssize_t k = poll(&pf, 1, 10000) > 0 ? read(err[0], msg, sizeof msg - 1) : 0;
    msg[k > 0 ? k : 0] = 0;
    close(err[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0 && strstr(msg, "dist_rows.bin: rank 2 of a world of 2"),
          "batcher_set_rank(2, 2): %s", msg);
    printf("batcher: worlds 1, 2, 4 at a global batch of %d rows, with and without shuffle, fresh and resumed: %d updates "
           "equal a world of 1's, positions too\n",
           GLOBAL, checked);
}

/* ---- the watch over the ranks, between forked processes ---- */

typedef struct Watcher {
    pid_t pid;
    int err;    /* the read end of its stderr */
    int status; /* its exit status, or -1 */
    double exited_after; /* seconds from the start */
    char said[2048];
} Watcher;

/* A rank that joins the rendezvous and the watch, then: dies at die_ms without a bye (if
 * die_ms > 0), or says bye at end_ms and exits 0 a moment later; `stopping` marks it as
 * stopping on a signal of its own from the start. */
static Watcher spawn_watcher(int rank, int world, int port, int die_ms, int end_ms, int stopping) {
    int p[2];
    if (pipe(p)) die("pipe: %s", strerror(errno));
    Watcher w = {.err = p[0], .status = -1};
    fflush(NULL);
    w.pid = fork();
    if (w.pid < 0) die("fork: %s", strerror(errno));
    if (w.pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        DistEnv e = rank_env(rank, world, port);
        uint8_t blob[BLOB] = {1};
        char *why = NULL;
        DistLinks links;
        if (dist_bootstrap_links(&e, blob, BLOB, 10, &links, &why)) {
            fprintf(stderr, "bootstrap: %s\n", why);
            _exit(90);
        }
        static volatile sig_atomic_t flag;
        flag = stopping;
        dist_watch_start(&links, &flag);
        if (die_ms > 0) {
            sleep_ms(die_ms);
            _exit(7); /* gone without a word, as a killed process is */
        }
        sleep_ms(end_ms);
        dist_watch_end();
        sleep_ms(200);
        _exit(0);
    }
    close(p[1]);
    return w;
}

static void reap(Watcher *ws, int n, double t0, double limit_s) {
    for (int i = 0; i < n; i++) {
        Watcher *w = &ws[i];
        size_t have = 0;
        for (;;) { /* its stderr until it closes: the process is gone */
            double left = t0 + limit_s - now_seconds();
            struct pollfd pf = {.fd = w->err, .events = POLLIN};
            if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) == 0) {
                kill(w->pid, SIGKILL);
                break;
            }
            ssize_t k = read(w->err, w->said + have, sizeof w->said - 1 - have);
            if (k <= 0) break;
            have += (size_t)k;
        }
        w->said[have] = 0;
        close(w->err);
        int st = 0;
        waitpid(w->pid, &st, 0);
        w->exited_after = now_seconds() - t0;
        w->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
}

static void test_watch(void) {
    { /* rank 2 dies 300 ms in; rank 0 sees its link close and ends, then rank 1 sees rank 0 go */
        int port = free_port();
        double t0 = now_seconds();
        Watcher ws[3] = {spawn_watcher(0, 3, port, 0, 20000, 0), spawn_watcher(1, 3, port, 0, 20000, 0),
                         spawn_watcher(2, 3, port, 300, 0, 0)};
        reap(ws, 3, t0, 30);
        CHECK(ws[2].status == 7, "a rank dies: rank 2 exited %d", ws[2].status);
        for (int i = 0; i < 2; i++)
            CHECK(ws[i].status == 1 && ws[i].exited_after < 10, "a rank dies: rank %d exited %d after %.1f s (want 1, soon)", i,
                  ws[i].status, ws[i].exited_after);
        CHECK(strstr(ws[0].said, "mmc train: rank 0 of 3: rank 2 stopped before the end of the run (its link to rank 0 closed): "
                                 "stopping the job\n") != NULL, "a rank dies: rank 0 said: %s", ws[0].said);
        CHECK(strstr(ws[1].said, "mmc train: rank 1 of 3: rank 0 stopped before the end of the run") != NULL,
              "a rank dies: rank 1 said: %s", ws[1].said);
        printf("watch: rank 2 died; rank 0 ended after %.2f s, rank 1 after %.2f s:\n  %s  %s", ws[0].exited_after,
               ws[1].exited_after, ws[0].said, ws[1].said);
    }
    { /* a run that ends as it should: every rank says bye, at different moments, and exits 0 */
        int port = free_port();
        double t0 = now_seconds();
        Watcher ws[3] = {spawn_watcher(0, 3, port, 0, 300, 0), spawn_watcher(1, 3, port, 0, 900, 0),
                         spawn_watcher(2, 3, port, 0, 600, 0)};
        reap(ws, 3, t0, 30);
        for (int i = 0; i < 3; i++)
            CHECK(ws[i].status == 0 && !ws[i].said[0], "the end of a run: rank %d exited %d, saying '%s'", i, ws[i].status,
                  ws[i].said);
    }
    { /* rank 0 stops on a signal of its own as rank 2 dies: it ends by itself, within the grace */
        int port = free_port();
        double t0 = now_seconds();
        Watcher ws[3] = {spawn_watcher(0, 3, port, 0, 1500, 1), spawn_watcher(1, 3, port, 0, 2000, 0),
                         spawn_watcher(2, 3, port, 300, 0, 0)};
        reap(ws, 3, t0, 30);
        CHECK(ws[0].status == 0, "a rank stopping on its own: rank 0 exited %d (%s)", ws[0].status, ws[0].said);
        CHECK(ws[1].status == 0 && !ws[1].said[0], "a rank stopping on its own: rank 1 exited %d (%s)", ws[1].status, ws[1].said);
    }
}

int main(void) {
    /* SIGPIPE keeps its default: a write of the bootstrap to a closed socket would end the rank */
    test_env();
    test_nccl();
    test_batcher();
    test_bootstrap();
    test_watch();
    return test_done("test_dist");
}
