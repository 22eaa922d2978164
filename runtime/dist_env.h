/* dist_env: who this process is in a data-parallel job (one process per GPU), read from the
 * variables its launcher set: torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
 * MASTER_PORT), else Open MPI's (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
 * OMPI_COMM_WORLD_LOCAL_RANK), else another MPI's PMI ones (PMI_RANK, PMI_SIZE,
 * MPI_LOCALRANKID), else a world of 1. MPI gives no rendezvous address, so a world of more
 * than 1 needs MASTER_ADDR (and MASTER_PORT, 29500 when left out) whatever the launcher:
 * rank 0's host and a port free there, as torchrun's. */
#ifndef MMC_DIST_ENV_H
#define MMC_DIST_ENV_H

enum { DIST_MAX_WORLD = 4096, DIST_DEFAULT_PORT = 29500 };

typedef enum DistSource {
    DIST_SOURCE_NONE,     /* no launcher's variables: a world of 1 */
    DIST_SOURCE_TORCHRUN, /* RANK, WORLD_SIZE, LOCAL_RANK */
    DIST_SOURCE_OMPI,     /* OMPI_COMM_WORLD_* */
    DIST_SOURCE_PMI,      /* PMI_RANK, PMI_SIZE, MPI_LOCALRANKID (MPICH, Intel MPI, Slurm's PMI) */
} DistSource;

typedef struct DistEnv {
    int rank, world;
    int local_rank;          /* the GPU of this host to take; the rank where the launcher does not say */
    DistSource source;
    char master_addr[256];   /* rank 0's host, "" in a world of 1 without MASTER_ADDR */
    int master_port;         /* 0 in a world of 1 without MASTER_ADDR/MASTER_PORT */
    char error[512];         /* "" when the environment is sound, else one line naming the variables */
} DistEnv;

/* Never dies: an environment that does not make sense (a value that is not a whole number,
 * a rank not below the world size, a world above DIST_MAX_WORLD, RANK without WORLD_SIZE, a
 * world of more than 1 without MASTER_ADDR, a port outside 1..65535) leaves its reason in
 * `error` and the rest as a world of 1; a caller that goes on dies with it. */
DistEnv dist_env_read(void);
/* "torchrun (RANK, WORLD_SIZE, LOCAL_RANK)", "Open MPI (OMPI_COMM_WORLD_*)", ... */
const char *dist_source_name(DistSource s);

#endif
