/* nccl_loader: NCCL, loaded at run time with dlopen ("libnccl.so.2", then "libnccl.so"), so
 * that mmc links no NCCL and a machine without it still starts and trains on one GPU. The
 * types below are NCCL 2.x's ABI, declared here so this file needs neither nccl.h nor CUDA's
 * headers: ncclUniqueId is 128 bytes passed by value, ncclComm_t an opaque pointer,
 * ncclResult_t, ncclDataType_t and ncclRedOp_t int-sized enums, cudaStream_t a pointer
 * (void * here). tests/test_dist.c checks them against nccl.h where that header exists. */
#ifndef MMC_NCCL_LOADER_H
#define MMC_NCCL_LOADER_H

#include <stddef.h>

enum { NCCL_UNIQUE_ID_LEN = 128 };
typedef struct NcclUniqueId {
    char internal[NCCL_UNIQUE_ID_LEN];
} NcclUniqueId;
typedef struct NcclCommOpaque *NcclComm; /* ncclComm_t */
typedef int NcclResult;                  /* ncclResult_t */
enum { NCCL_RESULT_SUCCESS = 0, NCCL_RESULT_IN_PROGRESS = 7 };
typedef int NcclDataType;                /* ncclDataType_t */
enum { NCCL_DT_FLOAT16 = 6, NCCL_DT_FLOAT32 = 7, NCCL_DT_BFLOAT16 = 9 };
typedef int NcclRedOp;                   /* ncclRedOp_t */
enum { NCCL_OP_SUM = 0, NCCL_OP_AVG = 4 };

typedef struct NcclApi {
    void *lib;             /* dlopen's handle */
    char path[512];        /* the file it loaded, as the dynamic linker found it */
    int version;           /* ncclGetVersion's code: 22105 for 2.21.5 (2.8.x and before: 2805) */
    char version_text[24]; /* "2.21.5" */
    NcclResult (*GetVersion)(int *version);
    NcclResult (*GetUniqueId)(NcclUniqueId *id);
    NcclResult (*CommInitRank)(NcclComm *comm, int nranks, NcclUniqueId id, int rank);
    NcclResult (*CommDestroy)(NcclComm comm);
    NcclResult (*CommAbort)(NcclComm comm);
    NcclResult (*CommGetAsyncError)(NcclComm comm, NcclResult *async_error);
    const char *(*GetErrorString)(NcclResult result);
    NcclResult (*AllReduce)(const void *send, void *recv, size_t count, NcclDataType type, NcclRedOp op, NcclComm comm,
                            void *stream);
    NcclResult (*ReduceScatter)(const void *send, void *recv, size_t recv_count, NcclDataType type, NcclRedOp op,
                                NcclComm comm, void *stream);
    NcclResult (*AllGather)(const void *send, void *recv, size_t send_count, NcclDataType type, NcclComm comm,
                            void *stream);
    NcclResult (*GroupStart)(void);
    NcclResult (*GroupEnd)(void);
} NcclApi;

/* The API, loaded on the first call and kept for the process (not thread-safe: call it
 * from one thread first). NULL where NCCL cannot be used, with *why (the caller frees it):
 * no library found, a function missing, not a 2.x. Every call after a failure fails the
 * same way. */
const NcclApi *nccl_load(char **why);
/* "2.21.5" */
const char *nccl_version_text(const NcclApi *api);

#endif
