/* test_util: what the C tests share: a CHECK that counts failures, and compiling a graph
 * (a file, or Lua text written to build/tests/tmp) through the whole pipeline and back
 * through the plan text into a ref backend, exactly as `mmc compile` + `mmc train` do. */
#ifndef MMC_TEST_UTIL_H
#define MMC_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "codegen.h"
#include "compile.h"
#include "plan.h"
#include "step_state.h"
#include "util.h"

static int test_failures;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "\n");                                                    \
            test_failures++;                                                          \
        }                                                                             \
    } while (0)

static inline int test_done(const char *name) {
    if (test_failures) fprintf(stderr, "%s: %d checks failed\n", name, test_failures);
    else printf("%s: all checks passed\n", name);
    return test_failures ? 1 : 0;
}

/* Writes Lua text to a file under build/tests/tmp and returns its path. */
static inline char *test_write_graph(const char *name, const char *lua) {
    make_dirs("build/tests/tmp");
    char *path = xasprintf("build/tests/tmp/%s.lua", name);
    write_file_atomic(path, lua, strlen(lua));
    return path;
}

/* Compiles a graph file (policy NULL keeps the graph's own; defines "k=v,k=v") and returns
 * the plan as the runtime reads it back from text. */
enum { TEST_NO_FUSION = 1, TEST_REFERENCE_KERNELS = 2, TEST_NO_REMAT = 4, TEST_REMAT_GEMM_INPUTS = 8, TEST_FORWARD = 16,
       TEST_NO_MERGE = 32, TEST_NO_DW_ADD = 64, TEST_GEMM_EPILOGUES = 128, TEST_FUSE_LOSS_GRAD = 256 };

/* as test_compile, with compile options (TEST_* flags) */
static inline Plan *test_compile_with(const char *path, const char *policy, const char *defines, unsigned flags) {
    CompileOptions o = {0};
    o.reference_kernels = (flags & TEST_REFERENCE_KERNELS) ? REF_ALL : 0;
    o.no_remat = (flags & TEST_NO_REMAT) != 0;
    o.remat_gemm_inputs = (flags & TEST_REMAT_GEMM_INPUTS) != 0;
    o.forward_only = (flags & TEST_FORWARD) != 0;
    o.no_merge = (flags & TEST_NO_MERGE) != 0;
    o.no_dw_add = (flags & TEST_NO_DW_ADD) != 0;
    o.gemm_epilogues = (flags & TEST_GEMM_EPILOGUES) != 0;
    o.fuse_loss_grad = (flags & TEST_FUSE_LOSS_GRAD) != 0;
    o.front.graph_path = path;
    o.front.policy_path = policy;
    int cap = 0;
    if (defines) {
        char *copy = xstrdup(defines), *save = NULL;
        for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            Define d = {xstrndup(kv, (size_t)(eq - kv)), xstrdup(eq + 1)};
            vec_push(o.front.defines, o.front.n_defines, cap, d);
        }
    }
    o.no_fusion = (flags & TEST_NO_FUSION) != 0;
    CompileResult r = compile_graph(&o);
    Plan *pl = plan_read(r.plan, path);
    pl->kernels = r.kernels;
    return pl;
}

static inline Plan *test_compile(const char *path, const char *policy, const char *defines, int fuse) {
    return test_compile_with(path, policy, defines, fuse ? 0 : TEST_NO_FUSION);
}

static uint64_t test_rng = 0x2545f4914f6cdd1dull;
static inline double test_uniform(void) { /* xorshift64*, in [0, 1) */
    test_rng ^= test_rng >> 12, test_rng ^= test_rng << 25, test_rng ^= test_rng >> 27;
    return (double)((test_rng * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53;
}

/* Fills every input tensor (ids, labels) with random ids below `vocab`, every param with
 * N(0, scale) values and the step state with a loss-gradient seed of `seed`. */
static inline void test_fill(Backend *b, int64_t vocab, double scale, float seed) {
    const Graph *g = b->pl->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        if (n->op != OP_INPUT && n->op != OP_PARAM) continue;
        int64_t count = shape_numel(&n->shape);
        void *host = xmalloc((size_t)count * dtype_size(n->dtype));
        for (int64_t k = 0; k < count; k++) {
            double v = n->op == OP_INPUT ? floor(test_uniform() * (double)vocab)
                                         : scale * sqrt(-2 * log(1 - test_uniform())) * cos(6.283185307179586 * test_uniform());
            dtype_store(n->dtype, host, (size_t)k, v);
        }
        b->write(b, n->buffer, n->offset, host, count * (int64_t)dtype_size(n->dtype));
        free(host);
    }
    MmcStepState st = {0};
    st.scale = 1, st.loss_seed = seed, st.clip_coef = 1, st.lr = 1e-3, st.total_micro = 100;
    b->write(b, BUF_STATE, 0, &st, sizeof st);
}

/* A whole buffer, as host bytes (caller frees). */
static inline unsigned char *test_buffer(Backend *b, int buffer) {
    int64_t n = b->pl->p->buffer_bytes[buffer];
    unsigned char *h = xmalloc((size_t)n + 1);
    b->read(b, buffer, 0, h, n);
    return h;
}

#endif
