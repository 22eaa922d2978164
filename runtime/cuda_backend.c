/* cuda_backend: runs a plan on a GPU. At creation it checks the plan against its kernels.cu
 * (whose SHA-256 the plan keeps), compiles kernels.cu with NVRTC for this GPU's arch
 * (through the disk cache), loads the cubin with the runtime's library API (so mmc needs no
 * libcuda at link time and starts on machines without a driver), allocates every buffer
 * once and builds a cuBLASLt matmul for each GEMM: fp16/bf16 inputs, fp32 compute, no
 * reduction in a reduced precision. Each GEMM shape takes the fastest of the algorithms
 * cuBLASLt's heuristic offers, timed on its first run on the step's own data and kept in
 * the kernel cache, so later runs on the machine (and resumed runs) use the same algorithm
 * and repeat bit for bit. A phase is its kernels and GEMMs launched in order on one stream,
 * but for the plan's stream=1 kernels (one-block kernels that read only the step's inputs):
 * those go on a side stream forked at the phase's start and joined before their first
 * consumer, so they run beside the others; after a first run each phase is captured as a
 * CUDA graph (the side stream joins the capture through the fork event) and replayed.
 * kernels.cu compiles as several translation units at once (runtime/nvrtc_compile.c), one
 * cubin and one library each; a kernel is looked up in the library of its unit. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "nvrtc_compile.h"
#include "tensor_map.h"
#include "util.h"

#define CUDA_CHECK(call, what)                                                                   \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) die("cuda: %s: %s (%s)", what, cudaGetErrorString(e_), #call);   \
    } while (0)
#define LT_CHECK(call, what)                                                                   \
    do {                                                                                       \
        cublasStatus_t s_ = (call);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) die("cublasLt: %s: status %d (%s)", what, (int)s_, #call); \
    } while (0)

enum { WORKSPACE_BYTES = 32 << 20, FENCES = 64, MARKS = 256, GEMM_CANDIDATES = 16 };
/* a split-K algorithm whose partial sums a kernel of its own adds up is taken only when it is
 * this much faster than the fastest one-kernel algorithm: the extra kernel is a launch more
 * in every step's graph and another pass over the output */
#define SPLIT_K_MARGIN 0.9f

typedef struct Gemm {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    const Node *out, *in_a, *in_b; /* in the column-major call: A = in_a, B = in_b */
    int f64;
    int add;       /* beta = 1: the product is added to what the output holds (linear_dw_add) */
    int tuned;     /* the algorithm is chosen (from the cache, or timed on the first run) */
    char key[65];  /* hash of everything the choice depends on: the cache file's name */
} Gemm;

typedef struct Cuda {
    Backend base;
    struct cudaDeviceProp prop;
    cudaStream_t stream;
    cudaStream_t side;     /* the stream=1 groups, forked from `stream` at a phase's start */
    cudaEvent_t fork;      /* recorded on `stream` at the start of a phase with side groups */
    cudaEvent_t *side_done; /* by group: recorded on `side` after a stream=1 group; else NULL */
    char *unjoined;         /* by group: a side group `stream` has not waited for yet */
    char *buf[BUF_COUNT]; /* device memory; also the kernels' MmcBuffers argument, in order */
    cudaLibrary_t *lib;   /* by translation unit of kernels.cu */
    int n_lib;
    cudaKernel_t *kernel; /* by group; NULL for GEMMs without an epilogue */
    int sm90a;            /* kernels.cu is compiled for sm_90a: a GEMM with an epilogue is one
                             kernel (templates/gemm_sm90.cuh), else cuBLASLt and the epilogue */
    Gemm *gemm;           /* by group */
    TensorMap (*maps)[3]; /* by group: A's, B's and the product's tensor maps, for a GEMM with an epilogue */
    cublasLtHandle_t lt;
    void *workspace;
    cudaGraphExec_t graph[2]; /* by phase, once captured */
    int runs[2];
    int debug;            /* MMC_SYNC=1: synchronise after every launch and name the failing one */
    cudaEvent_t fence[FENCES]; /* a ring: ticket t is event t % FENCES */
    int next_fence;
    void **pinned;
    int n_pinned, cap_pinned;
    /* measurement */
    cudaEvent_t mark[MARKS]; /* a ring of timing events */
    int next_mark;
    cudaEvent_t *around;      /* [groups + 1] for profile_phase, made on first use */
    int launches[2];          /* kernel nodes of each phase's graph, -1 before capture */
    size_t free_at_start;     /* device memory free once the context existed */
} Cuda;

static cudaDataType_t cuda_type(DType t) {
    switch (t) {
    case DT_F16: return CUDA_R_16F;
    case DT_BF16: return CUDA_R_16BF;
    case DT_F32: return CUDA_R_32F;
    case DT_F64: return CUDA_R_64F;
    default: die("cuda: no GEMM type for %s", dtype_name(t));
    }
}

static void *dptr(Cuda *c, const Node *n) { return c->buf[n->buffer] + n->offset; }

/* Up to `max` algorithms cuBLASLt's heuristic offers for the GEMM, best first: the workspace
 * of the backend, and partial sums of a split reduction kept in the compute type, never in
 * fp16. */
static int heuristic(Cuda *c, const Gemm *g, int max, cublasLtMatmulHeuristicResult_t *res) {
    cublasLtMatmulPreference_t pref;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref), "preference");
    uint64_t ws = WORKSPACE_BYTES;
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "workspace");
    uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes),
             "reduction schemes");
    int found = 0;
    LT_CHECK(cublasLtMatmulAlgoGetHeuristic(c->lt, g->desc, g->a, g->b, g->c, g->c, pref, max, res, &found), "heuristic");
    cublasLtMatmulPreferenceDestroy(pref);
    return found;
}

/* Row-major C[m,n] = op(A) op(B) is column-major C^T[n,m] = op(B)^T op(A)^T: cuBLASLt's
 * first operand is our B, its second our A, and each keeps its own transpose flag. */
static void make_gemm(Cuda *c, Gemm *g, const Node *n) {
    GemmShape s = gemm_shape(n);
    g->out = n;
    g->in_a = s.b, g->in_b = s.a;
    g->f64 = n->compute == DT_F64;
    g->add = n->op == OP_LINEAR_DW_ADD;
    cublasComputeType_t compute = g->f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    cudaDataType_t scale = g->f64 ? CUDA_R_64F : CUDA_R_32F;
    LT_CHECK(cublasLtMatmulDescCreate(&g->desc, compute, scale), "matmul descriptor");
    /* column-major: the first operand is our B stored [n,k] (trans_b) or [k,n] */
    cublasOperation_t op_first = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_second = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first), "transa");
    LT_CHECK(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second), "transb");
    /* our B as stored: [n,k] row-major = k x n column-major (ld k), or [k,n] = n x k (ld n);
     * the leading dimension is a row-major row's stride, wider for a strided view (a
     * projection's columns of a merged GEMM's output, or its gradient's of a concat) */
    uint64_t b_rows = s.trans_b ? (uint64_t)s.k : (uint64_t)s.n, b_cols = s.trans_b ? (uint64_t)s.n : (uint64_t)s.k;
    uint64_t a_rows = s.trans_a ? (uint64_t)s.m : (uint64_t)s.k, a_cols = s.trans_a ? (uint64_t)s.k : (uint64_t)s.m;
    int64_t ld_b = node_row_stride(s.b), ld_a = node_row_stride(s.a), ld_c = node_row_stride(n);
    LT_CHECK(cublasLtMatrixLayoutCreate(&g->a, cuda_type(s.b->dtype), b_rows, b_cols, ld_b), "layout B");
    LT_CHECK(cublasLtMatrixLayoutCreate(&g->b, cuda_type(s.a->dtype), a_rows, a_cols, ld_a), "layout A");
    LT_CHECK(cublasLtMatrixLayoutCreate(&g->c, cuda_type(n->dtype), (uint64_t)s.n, (uint64_t)s.m, ld_c), "layout C");
    cublasLtMatmulHeuristicResult_t result;
    if (!heuristic(c, g, 1, &result))
        die("cublasLt: no algorithm for %s (m=%lld n=%lld k=%lld)", node_label(n), (long long)s.m, (long long)s.n, (long long)s.k);
    g->algo = result.algo;
    char *what = xasprintf("gemm %s sm_%d%d cublasLt %zu m=%lld n=%lld k=%lld t=%d%d types=%d,%d,%d compute=%d ws=%d%s choice=one-kernel",
                           c->prop.name, c->prop.major, c->prop.minor, cublasLtGetVersion(), (long long)s.m, (long long)s.n,
                           (long long)s.k, s.trans_a, s.trans_b, (int)s.a->dtype, (int)s.b->dtype, (int)n->dtype, (int)compute,
                           (int)WORKSPACE_BYTES, g->add ? " beta=1" : "");
    if (ld_a != (int64_t)a_rows || ld_b != (int64_t)b_rows || ld_c != s.n) { /* strided: another choice of algorithm */
        char *dense = what;
        what = xasprintf("%s ld=%lld,%lld,%lld", dense, (long long)ld_a, (long long)ld_b, (long long)ld_c);
        free(dense);
    }
    Sha256 h;
    sha256_init(&h);
    sha256_update(&h, what, strlen(what));
    sha256_hex(&h, g->key);
    free(what);
}

static void run_gemm(Cuda *c, Gemm *g, cudaStream_t s);

/* ms of one call of the GEMM with `algo`: one run, then the best of five between events */
static float time_gemm(Cuda *c, Gemm *g, cublasLtMatmulAlgo_t algo) {
    cublasLtMatmulAlgo_t in_use = g->algo;
    g->algo = algo;
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0), "timing event");
    CUDA_CHECK(cudaEventCreate(&e1), "timing event");
    run_gemm(c, g, c->stream);
    float best = INFINITY;
    for (int r = 0; r < 5; r++) {
        CUDA_CHECK(cudaEventRecord(e0, c->stream), "timing event");
        run_gemm(c, g, c->stream);
        CUDA_CHECK(cudaEventRecord(e1, c->stream), "timing event");
        CUDA_CHECK(cudaEventSynchronize(e1), "a GEMM");
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1), "elapsed time");
        if (t < best) best = t;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    g->algo = in_use;
    return best;
}

static int kernel_nodes(cudaGraph_t graph);

/* the kernels one call of the GEMM with `algo` launches, counted in a captured graph: two
 * for a split-K algorithm that reduces its partial sums in a kernel of its own */
static int gemm_kernels(Cuda *c, Gemm *g, cublasLtMatmulAlgo_t algo) {
    cublasLtMatmulAlgo_t in_use = g->algo;
    g->algo = algo;
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "capture a GEMM");
    run_gemm(c, g, c->stream);
    CUDA_CHECK(cudaStreamEndCapture(c->stream, &graph), "capture a GEMM");
    int n = kernel_nodes(graph);
    cudaGraphDestroy(graph);
    g->algo = in_use;
    return n;
}

/* A GEMM that adds into its output (beta = 1) is timed on what the output held, which goes
 * back afterwards: each timing run adds to it once more. NULL for one that overwrites. */
static void *keep_output(Cuda *c, const Gemm *g) {
    if (!g->add) return NULL;
    size_t bytes = (size_t)shape_numel(&g->out->shape) * dtype_size(g->out->dtype);
    void *kept = NULL;
    CUDA_CHECK(cudaMalloc(&kept, bytes), "room to keep a GEMM's output while it is timed");
    CUDA_CHECK(cudaMemcpyAsync(kept, dptr(c, g->out), bytes, cudaMemcpyDeviceToDevice, c->stream), "keep a GEMM's output");
    return kept;
}
static void put_back_output(Cuda *c, const Gemm *g, void *kept) {
    if (!kept) return;
    size_t bytes = (size_t)shape_numel(&g->out->shape) * dtype_size(g->out->dtype);
    CUDA_CHECK(cudaMemcpyAsync(dptr(c, g->out), kept, bytes, cudaMemcpyDeviceToDevice, c->stream), "put back a GEMM's output");
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "put back a GEMM's output");
    cudaFree(kept);
}

/* The fastest of the heuristic's first GEMM_CANDIDATES algorithms, timed on the buffers as
 * they are (the step's own data, on the first run of the phase), where a split-K one with a
 * reduction kernel of its own must beat the rest by SPLIT_K_MARGIN; the choice is read from
 * the cache when a run on this machine made it already. */
static void tune_gemm(Cuda *c, Gemm *g) {
    g->tuned = 1;
    char *dir = mmc_cache_dir();
    char *path = xasprintf("%s/%s.gemm", dir, g->key);
    size_t size = 0;
    void *saved = try_read_file(path, &size);
    cublasLtMatmulHeuristicResult_t check;
    if (saved && size == sizeof g->algo &&
        cublasLtMatmulAlgoCheck(c->lt, g->desc, g->a, g->b, g->c, g->c, (cublasLtMatmulAlgo_t *)saved, &check) ==
            CUBLAS_STATUS_SUCCESS &&
        check.workspaceSize <= WORKSPACE_BYTES) {
        memcpy(&g->algo, saved, sizeof g->algo);
        free(saved), free(path), free(dir);
        return;
    }
    free(saved);
    cublasLtMatmulHeuristicResult_t res[GEMM_CANDIDATES];
    int found = heuristic(c, g, GEMM_CANDIDATES, res);
    void *kept = keep_output(c, g);
    float best = INFINITY, best_split = INFINITY;
    cublasLtMatmulAlgo_t split;
    for (int k = 0; k < found; k++) {
        float t = time_gemm(c, g, res[k].algo);
        if (gemm_kernels(c, g, res[k].algo) > 1) {
            if (t < best_split) best_split = t, split = res[k].algo;
        } else if (t < best) {
            best = t, g->algo = res[k].algo;
        }
    }
    if (best_split < SPLIT_K_MARGIN * best) g->algo = split; /* or the only kind there is */
    put_back_output(c, g, kept);
    make_dirs(dir);
    write_file_atomic(path, &g->algo, sizeof g->algo);
    free(path), free(dir);
}

static void run_gemm(Cuda *c, Gemm *g, cudaStream_t s) {
    float one = 1.0f, beta = g->add ? 1.0f : 0.0f;
    double one64 = 1.0, beta64 = g->add ? 1.0 : 0.0;
    LT_CHECK(cublasLtMatmul(c->lt, g->desc, g->f64 ? (void *)&one64 : (void *)&one, dptr(c, g->in_a), g->a,
                            dptr(c, g->in_b), g->b, g->f64 ? (void *)&beta64 : (void *)&beta, dptr(c, g->out), g->c,
                            dptr(c, g->out), g->c, &g->algo, c->workspace, WORKSPACE_BYTES, s),
             node_label(g->out));
}

/* The tensor maps of a GEMM with an epilogue on sm_90a (templates/gemm_sm90.cuh): A [m, k]
 * in boxes of 128 rows x 64, B [n, k] (K-major) or [k, n] (MN-major) in boxes of 64 x 64,
 * the product [m, n] in boxes of 128 x 64 (made whether or not the kernel stores it). */
static void make_maps(Cuda *c, const Group *gr, TensorMap maps[3]) {
    GemmShape s = gemm_shape(gr->anchor);
    DType t = gr->anchor->dtype;
    const char *why = tensor_map_2d(&maps[0], t, dptr(c, s.a), s.m, s.k, node_row_stride(s.a), 128, 64);
    if (!why)
        why = s.trans_b ? tensor_map_2d(&maps[1], t, dptr(c, s.b), s.n, s.k, node_row_stride(s.b), 64, 64)
                        : tensor_map_2d(&maps[1], t, dptr(c, s.b), s.k, s.n, node_row_stride(s.b), 64, 64);
    if (!why) why = tensor_map_2d(&maps[2], t, dptr(c, gr->anchor), s.m, s.n, node_row_stride(gr->anchor), 128, 64);
    if (why) die("cuda: %s: %s", gr->kernel, why);
}

/* one group of the schedule, queued on stream `s` */
static void launch_group(Cuda *c, int index, cudaStream_t s) {
    Group *gr = c->base.pl->p->groups[index];
    if (gr->kind == GK_GEMM && gr->n_nodes > 1 && c->sm90a) {
        /* persistent: a block a multiprocessor at most, each walking its tiles */
        int sms = c->prop.multiProcessorCount;
        dim3 grid = {(unsigned)(gr->grid < sms ? gr->grid : sms), 1, 1}, block = {(unsigned)gr->block, 1, 1};
        void *args[] = {c->buf, &c->maps[index][0], &c->maps[index][1], &c->maps[index][2]};
        CUDA_CHECK(cudaLaunchKernel((const void *)c->kernel[index], grid, block, args, (size_t)gr->smem, s), gr->kernel);
    } else if (gr->kind == GK_GEMM) {
        if (!c->gemm[index].tuned) tune_gemm(c, &c->gemm[index]);
        run_gemm(c, &c->gemm[index], s);
        if (gr->n_nodes > 1) { /* the epilogue from the product cuBLASLt stored, grid-stride */
            dim3 grid = {(unsigned)gr->grid, 1, 1}, block = {(unsigned)gr->block, 1, 1};
            void *args[] = {c->buf, &c->maps[index][0], &c->maps[index][1], &c->maps[index][2]}; /* the maps unread */
            CUDA_CHECK(cudaLaunchKernel((const void *)c->kernel[index], grid, block, args, 0, s), gr->kernel);
        }
    } else {
        dim3 grid = {(unsigned)gr->grid, (unsigned)gr->grid_y, 1}, block = {(unsigned)gr->block, 1, 1};
        void *args[] = {c->buf};
        CUDA_CHECK(cudaLaunchKernel((const void *)c->kernel[index], grid, block, args, (size_t)gr->smem, s), gr->kernel);
    }
    if (c->debug) {
        cudaError_t e = cudaStreamSynchronize(s);
        if (e == cudaSuccess) e = cudaGetLastError();
        if (e != cudaSuccess) die("cuda: %s failed: %s", gr->kernel, cudaGetErrorString(e));
    }
}

/* A group run alone (the tests, the profile) has nothing beside it: the main stream. */
static void cuda_run_group(Backend *b, int index) { launch_group((Cuda *)b, index, ((Cuda *)b)->stream); }

/* the main stream waits for side group `j` (once a phase) */
static void join_side(Cuda *c, int j) {
    if (j < 0 || !c->unjoined[j]) return;
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->side_done[j], 0), "join the side stream");
    c->unjoined[j] = 0;
}

/* The side stream forks where its first group is in the schedule (the phase's start, where
 * pass_schedule puts side groups), so it starts after the work queued before: the step's
 * inputs, and the previous micro-step, whose last reader of the side groups' outputs must be
 * done before they are written again. Each main group first waits for the side groups it
 * reads; the phase ends with every side group joined, as a capture must (an unjoined fork
 * fails cudaStreamEndCapture), and so the fences and copies after it see the side work. */
static void launch_phase(Cuda *c, Phase phase) {
    const Program *p = c->base.pl->p;
    int forked = 0;
    if (phase == PHASE_UPDATE && c->base.before_update)
        c->base.before_update(c->base.before_update_ctx, c->stream, c->buf[BUF_GRADS], p->buffer_bytes[BUF_GRADS]);
    for (int i = 0; i < p->n_groups; i++) {
        const Group *gr = p->groups[i];
        if (gr->phase != phase) continue;
        if (gr->stream == 1) {
            if (!forked) {
                CUDA_CHECK(cudaEventRecord(c->fork, c->stream), "fork the side stream");
                CUDA_CHECK(cudaStreamWaitEvent(c->side, c->fork, 0), "fork the side stream");
                forked = 1;
            }
            launch_group(c, i, c->side);
            CUDA_CHECK(cudaEventRecord(c->side_done[i], c->side), gr->kernel);
            c->unjoined[i] = 1;
            continue;
        }
        for (int k = 0; k < gr->n_nodes; k++)
            for (int x = 0; x < gr->nodes[k]->n_in; x++) join_side(c, gr->nodes[k]->in[x]->group);
        launch_group(c, i, c->stream);
    }
    for (int j = 0; j < p->n_groups; j++) join_side(c, j);
}

static int kernel_nodes(cudaGraph_t graph) {
    size_t n = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, NULL, &n), "graph nodes");
    cudaGraphNode_t *nodes = xcalloc(n + 1, sizeof *nodes);
    CUDA_CHECK(cudaGraphGetNodes(graph, nodes, &n), "graph nodes");
    int kernels = 0;
    for (size_t i = 0; i < n; i++) {
        enum cudaGraphNodeType t;
        CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &t), "graph node type");
        kernels += t == cudaGraphNodeTypeKernel;
    }
    free(nodes);
    return kernels;
}

/* The first run of a phase launches its kernels one by one (so a failure names its kernel);
 * the second captures them as a graph; later runs replay it. */
static void cuda_run_phase(Backend *b, Phase phase) {
    Cuda *c = (Cuda *)b;
    if (c->graph[phase]) {
        CUDA_CHECK(cudaGraphLaunch(c->graph[phase], c->stream), "graph launch");
        return;
    }
    if (c->runs[phase]++ == 0 || c->debug) {
        launch_phase(c, phase);
        CUDA_CHECK(cudaGetLastError(), "launch");
        return;
    }
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "begin capture");
    launch_phase(c, phase);
    CUDA_CHECK(cudaStreamEndCapture(c->stream, &graph), "end capture");
    c->launches[phase] = kernel_nodes(graph);
    CUDA_CHECK(cudaGraphInstantiate(&c->graph[phase], graph, 0), "instantiate graph");
    cudaGraphDestroy(graph);
    CUDA_CHECK(cudaGraphLaunch(c->graph[phase], c->stream), "graph launch");
}

static void cuda_write(Backend *b, int buffer, int64_t offset, const void *src, int64_t bytes) {
    Cuda *c = (Cuda *)b;
    backend_check_range(b, buffer, offset, bytes, "write");
    CUDA_CHECK(cudaMemcpyAsync(c->buf[buffer] + offset, src, (size_t)bytes, cudaMemcpyHostToDevice, c->stream), "upload");
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "upload");
}

static void cuda_read(Backend *b, int buffer, int64_t offset, void *dst, int64_t bytes) {
    Cuda *c = (Cuda *)b;
    backend_check_range(b, buffer, offset, bytes, "read");
    CUDA_CHECK(cudaMemcpyAsync(dst, c->buf[buffer] + offset, (size_t)bytes, cudaMemcpyDeviceToHost, c->stream), "download");
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "a kernel of the step or the download");
}

static void *cuda_host_alloc(Backend *b, size_t bytes) {
    Cuda *c = (Cuda *)b;
    void *p;
    CUDA_CHECK(cudaMallocHost(&p, bytes + 1), "pinned host memory");
    memset(p, 0, bytes + 1);
    vec_push(c->pinned, c->n_pinned, c->cap_pinned, p);
    return p;
}

static void cuda_write_async(Backend *b, int buffer, int64_t offset, const void *src, int64_t bytes) {
    Cuda *c = (Cuda *)b;
    backend_check_range(b, buffer, offset, bytes, "write");
    CUDA_CHECK(cudaMemcpyAsync(c->buf[buffer] + offset, src, (size_t)bytes, cudaMemcpyHostToDevice, c->stream), "upload");
}

static void cuda_read_async(Backend *b, int buffer, int64_t offset, void *dst, int64_t bytes) {
    Cuda *c = (Cuda *)b;
    backend_check_range(b, buffer, offset, bytes, "read");
    CUDA_CHECK(cudaMemcpyAsync(dst, c->buf[buffer] + offset, (size_t)bytes, cudaMemcpyDeviceToHost, c->stream), "download");
}

/* A ticket stays valid until FENCES newer fences exist; the trainer waits far sooner. */
static int cuda_fence(Backend *b) {
    Cuda *c = (Cuda *)b;
    int t = c->next_fence++;
    CUDA_CHECK(cudaEventRecord(c->fence[t % FENCES], c->stream), "fence");
    return t;
}

static void cuda_wait(Backend *b, int ticket) {
    Cuda *c = (Cuda *)b;
    if (c->next_fence - ticket > FENCES) die("cuda backend: fence %d was reused before it was waited for", ticket);
    CUDA_CHECK(cudaEventSynchronize(c->fence[ticket % FENCES]), "a kernel of the step");
}

/* ---- measurement (mmc bench) */

static int cuda_mark(Backend *b) {
    Cuda *c = (Cuda *)b;
    int m = c->next_mark++;
    CUDA_CHECK(cudaEventRecord(c->mark[m % MARKS], c->stream), "timing event");
    return m;
}

static double cuda_ms_between(Backend *b, int from, int to) {
    Cuda *c = (Cuda *)b;
    if (c->next_mark - from > MARKS) die("cuda backend: timing event %d was reused before it was read", from);
    CUDA_CHECK(cudaEventSynchronize(c->mark[to % MARKS]), "a kernel of the step");
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, c->mark[from % MARKS], c->mark[to % MARKS]), "elapsed time");
    return ms;
}

static void cuda_profile_phase(Backend *b, Phase phase, double *ms) {
    Cuda *c = (Cuda *)b;
    const Program *p = b->pl->p;
    if (!c->around) {
        c->around = xcalloc((size_t)p->n_groups + 1, sizeof *c->around);
        for (int i = 0; i <= p->n_groups; i++) CUDA_CHECK(cudaEventCreate(&c->around[i]), "timing event");
    }
    int prev = -1;
    for (int i = 0; i < p->n_groups; i++) {
        ms[i] = 0;
        if (p->groups[i]->phase != phase) continue;
        CUDA_CHECK(cudaEventRecord(c->around[i], c->stream), "timing event");
        cuda_run_group(b, i);
        prev = i;
    }
    if (prev < 0) return;
    CUDA_CHECK(cudaEventRecord(c->around[p->n_groups], c->stream), "timing event");
    CUDA_CHECK(cudaEventSynchronize(c->around[p->n_groups]), "a kernel of the step");
    for (int i = 0, last = -1; i <= p->n_groups; i++) {
        if (i < p->n_groups && p->groups[i]->phase != phase) continue;
        if (last >= 0) {
            float t = 0;
            CUDA_CHECK(cudaEventElapsedTime(&t, c->around[last], c->around[i]), "elapsed time");
            ms[last] = t;
        }
        last = i;
    }
}

static int cuda_launches(Backend *b, Phase phase) { return ((Cuda *)b)->launches[phase]; }

static int64_t cuda_device_bytes(Backend *b) {
    Cuda *c = (Cuda *)b;
    size_t free_now = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_now, &total), "memory info");
    return (int64_t)c->free_at_start - (int64_t)free_now;
}

static int cuda_gemm_candidates(Backend *b, int index, int max, double *ms) {
    Cuda *c = (Cuda *)b;
    Gemm *g = &c->gemm[index];
    if (!g->desc || max < 1) return 0;
    cublasLtMatmulHeuristicResult_t *res = xcalloc((size_t)max, sizeof *res);
    int found = heuristic(c, g, max, res);
    void *kept = keep_output(c, g);
    for (int k = 0; k < found; k++) ms[k] = time_gemm(c, g, k ? res[k].algo : g->algo);
    put_back_output(c, g, kept);
    free(res);
    return found;
}

static const BackendProbe cuda_probe = {cuda_mark, cuda_ms_between, cuda_profile_phase, cuda_launches, cuda_device_bytes,
                                        cuda_gemm_candidates};

static void cuda_destroy(Backend *b) {
    Cuda *c = (Cuda *)b;
    cudaStreamSynchronize(c->stream);
    cudaStreamSynchronize(c->side);
    for (int i = 0; i < FENCES; i++) cudaEventDestroy(c->fence[i]);
    cudaEventDestroy(c->fork);
    for (int i = 0; i < b->pl->p->n_groups; i++)
        if (c->side_done[i]) cudaEventDestroy(c->side_done[i]);
    free(c->side_done), free(c->unjoined);
    for (int i = 0; i < MARKS; i++) cudaEventDestroy(c->mark[i]);
    if (c->around)
        for (int i = 0; i <= b->pl->p->n_groups; i++) cudaEventDestroy(c->around[i]);
    free(c->around);
    for (int i = 0; i < c->n_pinned; i++) cudaFreeHost(c->pinned[i]);
    free(c->pinned);
    for (int p = 0; p < 2; p++)
        if (c->graph[p]) cudaGraphExecDestroy(c->graph[p]);
    for (int i = 0; i < b->pl->p->n_groups; i++)
        if (c->gemm[i].desc) {
            cublasLtMatmulDescDestroy(c->gemm[i].desc);
            cublasLtMatrixLayoutDestroy(c->gemm[i].a);
            cublasLtMatrixLayoutDestroy(c->gemm[i].b);
            cublasLtMatrixLayoutDestroy(c->gemm[i].c);
        }
    for (int i = 0; i < BUF_COUNT; i++) cudaFree(c->buf[i]);
    cudaFree(c->workspace);
    cublasLtDestroy(c->lt);
    for (int i = 0; i < c->n_lib; i++) cudaLibraryUnload(c->lib[i]);
    free(c->lib);
    cudaStreamDestroy(c->side);
    cudaStreamDestroy(c->stream);
    free(c->kernel), free(c->gemm), free(c->maps), free(c);
}

/* The carried buffers change hands only between runs: `from`'s streams are drained, and this
 * backend has captured no graph yet, whose launches would hold the old pointers. */
static void cuda_adopt(Backend *b, Backend *from) {
    Cuda *c = (Cuda *)b, *f = (Cuda *)from;
    if (c->runs[0] || c->runs[1]) die("cuda backend: %s has run already, so it cannot take over buffers", b->pl->path);
    CUDA_CHECK(cudaStreamSynchronize(f->stream), "a kernel of the step");
    CUDA_CHECK(cudaStreamSynchronize(f->side), "a kernel of the step");
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "setup");
    backend_check_adopt(b, from);
    for (int i = 0; i < BUF_COUNT; i++)
        if (backend_carried(i)) {
            CUDA_CHECK(cudaFree(c->buf[i]), buffer_name(i));
            c->buf[i] = f->buf[i];
            f->buf[i] = NULL;
        }
    for (int i = 0; i < f->n_pinned; i++) vec_push(c->pinned, c->n_pinned, c->cap_pinned, f->pinned[i]);
    f->n_pinned = 0;
}

/* Dense f16/bf16 tensor-core peaks from the datasheets, by device name, for MFU; 0 for the
 * devices not listed (no MFU is shown for them). */
static double dense_f16_peak(const char *name) {
    static const struct {
        const char *part;
        double flops;
    } peaks[] = {{"H200", 989e12}, {"H100 PCIe", 756e12}, {"H100", 989e12}, {"A100", 312e12},
                 {"L40S", 362e12}, {"RTX 4090", 165e12}, {"T4", 65e12}};
    for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++)
        if (strstr(name, peaks[i].part)) return peaks[i].flops;
    return 0;
}

static int selected_device;
void cuda_select_device(int device) { selected_device = device; }

int cuda_device_sm(void) {
    int count = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= selected_device ||
        cudaGetDeviceProperties(&prop, selected_device) != cudaSuccess)
        return -1;
    return prop.major * 10 + prop.minor;
}

Backend *cuda_backend_create(Plan *pl, char **why) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        *why = xasprintf("no CUDA GPU here (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return NULL;
    }
    Cuda *c = xcalloc(1, sizeof *c);
    c->base = (Backend){"cuda", pl, cuda_write, cuda_read, cuda_run_group, cuda_run_phase, cuda_destroy,
                        cuda_host_alloc, cuda_write_async, cuda_read_async, cuda_fence, cuda_wait, &cuda_probe, NULL, 0, NULL, NULL, NULL};
    c->base.adopt = cuda_adopt;
    c->launches[0] = c->launches[1] = -1;
    const char *dbg = getenv("MMC_SYNC");
    c->debug = dbg && *dbg && strcmp(dbg, "0") != 0;
    if (selected_device >= count) {
        *why = xasprintf("GPU %d was asked for (a rank's LOCAL_RANK), but this host has %d", selected_device, count);
        free(c);
        return NULL;
    }
    /* The kernels compile in worker processes (nvrtc_compile.c) while this one starts the
     * context, makes the streams and allocates the buffers: forked before the context
     * exists (the device's properties, which give the arch, need none), they inherit none
     * of it, and they never call CUDA. */
    CUDA_CHECK(cudaGetDeviceProperties(&c->prop, selected_device), "device properties");
    c->base.device = c->prop.name;
    char *refusal = backend_bf16_refusal(pl, c->prop.major * 10 + c->prop.minor, c->prop.name, pl->path);
    if (refusal) die("cuda: %s", refusal);
    char arch[16];
    /* sm_90 (H100, H200) compiles as sm_90a, whose warpgroup instructions the flash attention
     * kernels use (templates/flash_attention_sm90.cuh); such a cubin runs on sm_90 only,
     * which is the GPU it is compiled for */
    snprintf(arch, sizeof arch, "sm_%d%d%s", c->prop.major, c->prop.minor, c->prop.major == 9 && c->prop.minor == 0 ? "a" : "");
    const char *forced = getenv("MMC_CUDA_ARCH"); /* another target this GPU runs: sm_90 on an H100, say */
    if (forced && *forced) snprintf(arch, sizeof arch, "%s", forced);
    c->sm90a = !strcmp(arch, "sm_90a");
    char *src = plan_kernels(pl); /* the kernels.cu made with this plan, or none */
    char *dir = path_dirname(pl->path), *name = path_join(dir, "kernels.cu");
    KernelUnits units = kernel_units(src);
    KernelCompile *compile = nvrtc_compile_start(&units, name, arch, 1);

    CUDA_CHECK(cudaSetDevice(selected_device), "set device");
    CUDA_CHECK(cudaFree(0), "start the CUDA context");
    size_t total_mem = 0;
    CUDA_CHECK(cudaMemGetInfo(&c->free_at_start, &total_mem), "memory info");
    c->base.peak_flops = dense_f16_peak(c->prop.name);
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "stream");
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking), "side stream");
    CUDA_CHECK(cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming), "event");
    for (int i = 0; i < FENCES; i++) CUDA_CHECK(cudaEventCreateWithFlags(&c->fence[i], cudaEventDisableTiming), "event");
    for (int i = 0; i < MARKS; i++) CUDA_CHECK(cudaEventCreate(&c->mark[i]), "timing event");
    c->side_done = xcalloc((size_t)pl->p->n_groups, sizeof *c->side_done);
    c->unjoined = xcalloc((size_t)pl->p->n_groups, 1);
    for (int i = 0; i < pl->p->n_groups; i++)
        if (pl->p->groups[i]->stream == 1)
            CUDA_CHECK(cudaEventCreateWithFlags(&c->side_done[i], cudaEventDisableTiming), "event");
    Program *p = pl->p;
    c->kernel = xcalloc((size_t)p->n_groups, sizeof *c->kernel);
    c->gemm = xcalloc((size_t)p->n_groups, sizeof *c->gemm);
    c->maps = aligned_alloc(64, (size_t)p->n_groups * sizeof *c->maps);
    memset(c->maps, 0, (size_t)p->n_groups * sizeof *c->maps);
    LT_CHECK(cublasLtCreate(&c->lt), "handle");
    for (int i = 0; i < BUF_COUNT; i++) {
        CUDA_CHECK(cudaMalloc((void **)&c->buf[i], (size_t)p->buffer_bytes[i] + 256), buffer_name(i));
        CUDA_CHECK(cudaMemsetAsync(c->buf[i], 0, (size_t)p->buffer_bytes[i] + 256, c->stream), buffer_name(i));
    }
    CUDA_CHECK(cudaMalloc(&c->workspace, WORKSPACE_BYTES), "cuBLASLt workspace");
    for (int i = 0; i < p->n_groups; i++) {
        Group *gr = p->groups[i];
        if (gr->kind != GK_GEMM) continue;
        make_gemm(c, &c->gemm[i], gr->anchor);
        if (gr->n_nodes > 1 && c->sm90a) make_maps(c, gr, c->maps[i]);
    }

    KernelCubins cubins = nvrtc_compile_finish(compile);
    c->n_lib = cubins.n;
    c->lib = xcalloc((size_t)c->n_lib, sizeof *c->lib);
    for (int i = 0; i < c->n_lib; i++)
        CUDA_CHECK(cudaLibraryLoadData(&c->lib[i], cubins.cubin[i], NULL, NULL, 0, NULL, NULL, 0), "load a cubin");
    char how[96] = "from the cache";
    if (cubins.cached < cubins.n) {
        char count[32] = "";
        if (cubins.cached) snprintf(count, sizeof count, "%d of ", cubins.n - cubins.cached);
        snprintf(how, sizeof how, "compiled by NVRTC (%s%d units, %d process%s, %.1f s)", count, cubins.n, cubins.jobs,
                 cubins.jobs == 1 ? "" : "es", cubins.seconds);
    }
    kernel_cubins_free(&cubins);
    free(src), free(dir);
    for (int i = 0; i < p->n_groups; i++) {
        Group *gr = p->groups[i];
        if (gr->kind == GK_GEMM && gr->n_nodes == 1) continue; /* a cuBLASLt call */
        int unit = kernel_unit(&units, gr->kernel);
        if (unit < 0) die("%s: no kernel %s, which the plan launches", name, gr->kernel);
        CUDA_CHECK(cudaLibraryGetKernel(&c->kernel[i], c->lib[unit], gr->kernel), gr->kernel);
        if (gr->smem > 48 * 1024 && (gr->kind != GK_GEMM || c->sm90a))
            CUDA_CHECK(cudaFuncSetAttribute((const void *)c->kernel[i], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gr->smem),
                       gr->kernel);
    }
    kernel_units_free(&units);
    free(name);
    CUDA_CHECK(cudaStreamSynchronize(c->stream), "setup");
    int64_t total = WORKSPACE_BYTES;
    for (int i = 0; i < BUF_COUNT; i++) total += p->buffer_bytes[i];
    if (!getenv("MMC_QUIET"))
        fprintf(stderr, "mmc: cuda: %s (%s), kernels %s, %.2f GiB of buffers\n", c->prop.name, arch,
                how, (double)total / (1 << 30));
    return &c->base;
}
