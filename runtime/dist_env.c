/* dist_env: see dist_env.h. */
#include "dist_env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* each launcher's names for the rank, the world size and the rank on this host */
typedef struct Names {
    DistSource source;
    const char *rank, *world, *local;
} Names;

static const Names SOURCES[] = {
    {DIST_SOURCE_TORCHRUN, "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {DIST_SOURCE_OMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {DIST_SOURCE_PMI, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
};

const char *dist_source_name(DistSource s) {
    switch (s) {
    case DIST_SOURCE_TORCHRUN: return "torchrun (RANK, WORLD_SIZE, LOCAL_RANK)";
    case DIST_SOURCE_OMPI: return "Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK)";
    case DIST_SOURCE_PMI: return "PMI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID)";
    default: return "no launcher (a world of 1)";
    }
}

/* the error of e, and a world of 1 for the rest, so that a caller that ignores it runs alone */
static DistEnv fail(DistEnv e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.error, sizeof e.error, fmt, ap);
    va_end(ap);
    e.rank = 0, e.world = 1, e.local_rank = 0;
    return e;
}

/* A whole decimal number, sign allowed, nothing around it (" 1" and "1x" are typos, not 1). */
static int parse_int(const char *s, long *out) {
    if (!s || !*s || !(*s == '-' || (*s >= '0' && *s <= '9'))) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno == ERANGE) return -1;
    *out = v;
    return 0;
}

DistEnv dist_env_read(void) {
    DistEnv e = {.rank = 0, .world = 1, .local_rank = 0, .source = DIST_SOURCE_NONE};
    const Names *n = NULL;
    for (size_t i = 0; i < sizeof SOURCES / sizeof *SOURCES && !n; i++)
        if (getenv(SOURCES[i].rank) || getenv(SOURCES[i].world) || getenv(SOURCES[i].local)) n = &SOURCES[i];
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    if (n) {
        e.source = n->source;
        const char *r = getenv(n->rank), *w = getenv(n->world), *l = getenv(n->local);
        if (!r || !w) {
            const char *set = r ? n->rank : w ? n->world : n->local;
            const char *val = r ? r : w ? w : l;
            if (!r && !w)
                return fail(e, "%s=%s is set but not %s and %s: set all three (as torchrun or mpirun do) or none", set, val,
                            n->rank, n->world);
            return fail(e, "%s=%s is set but not %s: set both (as torchrun or mpirun do) or neither", set, val,
                        r ? n->world : n->rank);
        }
        long rank, world, local;
        if (parse_int(w, &world)) return fail(e, "%s=%s is not a whole number", n->world, w);
        if (parse_int(r, &rank)) return fail(e, "%s=%s is not a whole number", n->rank, r);
        if (world < 1 || world > DIST_MAX_WORLD)
            return fail(e, "%s=%s: the world size must be from 1 to %d", n->world, w, DIST_MAX_WORLD);
        if (rank < 0 || rank >= world)
            return fail(e, "%s=%s with %s=%s: the rank must be from 0 to %ld", n->rank, r, n->world, w, world - 1);
        local = rank; /* one host: the rank is the local rank */
        if (l && parse_int(l, &local)) return fail(e, "%s=%s is not a whole number", n->local, l);
        if (local < 0 || local >= world)
            return fail(e, "%s=%s with %s=%s: the local rank must be from 0 to %ld", n->local, l, n->world, w, world - 1);
        e.rank = (int)rank, e.world = (int)world, e.local_rank = (int)local;
        if (world > 1 && !addr && !port)
            return fail(e, "%s=%s but no MASTER_ADDR/MASTER_PORT: set them to rank 0's host and a free port, as torchrun does",
                        n->world, w);
        if (world > 1 && !addr)
            return fail(e, "%s=%s and MASTER_PORT=%s but no MASTER_ADDR: set it to rank 0's host, as torchrun does", n->world,
                        w, port);
    }
    if (addr) {
        if (!*addr) return fail(e, "MASTER_ADDR is empty: set it to rank 0's host");
        if (strlen(addr) >= sizeof e.master_addr)
            return fail(e, "MASTER_ADDR is %zu characters long: a host name has at most %zu", strlen(addr),
                        sizeof e.master_addr - 1);
        snprintf(e.master_addr, sizeof e.master_addr, "%s", addr);
        e.master_port = DIST_DEFAULT_PORT;
    }
    if (port) {
        long p;
        if (parse_int(port, &p)) return fail(e, "MASTER_PORT=%s is not a whole number", port);
        if (p < 1 || p > 65535) return fail(e, "MASTER_PORT=%s: a port is from 1 to 65535", port);
        if (addr) e.master_port = (int)p;
    }
    return e;
}
