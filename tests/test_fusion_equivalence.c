/* Fused and unfused plans of the same graph give the same results on the ref backend, and so
 * do plans with and without rematerialization (pass_remat recomputes the same ops in the
 * same dtypes, so under eager rounding the two agree bit for bit while the arena shrinks).
 * Under eager rounding every op rounds to its storage dtype wherever it runs, so the two
 * must agree bit for bit: loss, every gradient, and the weights and AdamW moments after two
 * updates. Under "fused" rounding (fp16_wide) values inside a kernel skip the f16 roundings
 * between ops, so the plans differ by rounding only: loss within 1e-3 relative and
 * gradients within 3e-2 relative L2 (a few f16 ulps, 2^-10 ~ 1e-3 each, compounded over
 * a dozen rounding points of a 2-layer net). A forward-only plan computes the same loss as the
 * training plan, bit for bit. Merged projections (one GEMM for q, k and v, one for gate and
 * up, and one for each group's weight gradients) compute every element as the separate GEMMs
 * do, so they agree bit for bit with --no-merge under every policy. Weight-gradient GEMMs
 * that add into the gradients themselves (pass_dw_add) skip dW's rounding to its own dtype:
 * where that is no rounding (fp32, fp64) the gradients are the same bits as --no-dw-add's;
 * under fused rounding (fp16_wide) each dW's f16 rounding goes, at most 2^-11 relative an
 * element, so the gradients agree within 1e-3 relative L2; under the eager autocast
 * policies the pass leaves the plan as it is. */
#include "test_util.h"

#include "init.h"
#include "train.h"

typedef struct Run {
    double loss[2];
    unsigned char *grads, *params, *m, *v;
    MmcStepState state;
    int64_t bytes;
} Run;

static Run run(Plan *pl) {
    Run r = {0};
    Backend *b = ref_backend_create(pl);
    init_consts(b);
    test_rng = 12345;
    test_fill(b, 320, 0.1, 1024.0f);
    MmcStepState st;
    b->read(b, BUF_STATE, 0, &st, sizeof st);
    st.scale = 1024.0f, st.total_micro = 10;
    b->write(b, BUF_STATE, 0, &st, sizeof st);
    for (int u = 0; u < 2; u++) {
        b->run_phase(b, PHASE_MICRO);
        r.loss[u] = read_loss(b);
        if (u == 0) r.grads = test_buffer(b, BUF_GRADS);
        b->run_phase(b, PHASE_UPDATE);
    }
    r.params = test_buffer(b, BUF_PARAMS);
    r.m = test_buffer(b, BUF_ADAM_M);
    r.v = test_buffer(b, BUF_ADAM_V);
    b->read(b, BUF_STATE, 0, &r.state, sizeof r.state);
    r.bytes = pl->p->buffer_bytes[BUF_PARAMS];
    b->destroy(b);
    return r;
}

static double rel_l2(const float *a, const float *b, int64_t n) {
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), s += (double)b[i] * b[i];
    return sqrt(d / (s > 0 ? s : 1));
}

static void compare(const char *policy, int exact) {
    Plan *fused = test_compile("graphs/tiny.lua", policy, NULL, 1);
    Plan *unfused = test_compile("graphs/tiny.lua", policy, NULL, 0);
    int kf = fused->p->n_groups, ku = unfused->p->n_groups;
    CHECK(kf < ku, "%s: fusion should make fewer kernels (%d fused, %d unfused)", policy, kf, ku);
    Run a = run(fused), b = run(unfused);
    CHECK(a.bytes == b.bytes, "%s: parameter layouts differ", policy);
    if (exact) {
        CHECK(a.loss[0] == b.loss[0] && a.loss[1] == b.loss[1], "%s: loss %.9g/%.9g fused vs %.9g/%.9g unfused", policy,
              a.loss[0], a.loss[1], b.loss[0], b.loss[1]);
        CHECK(!memcmp(a.grads, b.grads, (size_t)a.bytes), "%s: gradients differ", policy);
        CHECK(!memcmp(a.params, b.params, (size_t)a.bytes), "%s: weights after two updates differ", policy);
        CHECK(!memcmp(a.m, b.m, (size_t)a.bytes) && !memcmp(a.v, b.v, (size_t)a.bytes), "%s: AdamW moments differ", policy);
        CHECK(!memcmp(&a.state, &b.state, sizeof a.state), "%s: step states differ", policy);
    } else {
        int64_t n = a.bytes / 4;
        double dl = fabs(a.loss[0] - b.loss[0]) / fabs(b.loss[0]);
        double dg = rel_l2((float *)a.grads, (float *)b.grads, n);
        CHECK(dl < 1e-3, "%s: loss %.9g fused vs %.9g unfused", policy, a.loss[0], b.loss[0]);
        CHECK(dg < 3e-2, "%s: gradients differ by %.3g relative L2", policy, dg);
        printf("  %s: loss differs by %.2g, gradients by %.2g relative L2\n", policy, dl, dg);
    }
    printf("  %-10s %d kernels fused, %d unfused: %s\n", policy, kf, ku, exact ? "bit-identical" : "within tolerance");
}

/* remat at `flags` against none: a smaller arena, the same bits */
static int64_t compare_remat_level(const char *policy, int flags, const char *what) {
    Plan *with = test_compile_with("graphs/tiny.lua", policy, NULL, flags);
    Plan *without = test_compile_with("graphs/tiny.lua", policy, NULL, TEST_NO_REMAT);
    int64_t aw = with->p->buffer_bytes[BUF_ARENA], an = without->p->buffer_bytes[BUF_ARENA];
    CHECK(aw < an, "%s: rematerialization (%s) should shrink the arena (%lld bytes with, %lld without)", policy, what,
          (long long)aw, (long long)an);
    Run a = run(with), b = run(without);
    CHECK(a.loss[0] == b.loss[0] && a.loss[1] == b.loss[1], "%s: loss %.9g/%.9g with remat (%s) vs %.9g/%.9g without",
          policy, a.loss[0], a.loss[1], what, b.loss[0], b.loss[1]);
    CHECK(!memcmp(a.grads, b.grads, (size_t)a.bytes), "%s: gradients differ with remat (%s) and without", policy, what);
    CHECK(!memcmp(a.params, b.params, (size_t)a.bytes), "%s: weights after two updates differ with remat (%s) and without",
          policy, what);
    printf("  %-10s rematerialized (%s): arena %lld bytes instead of %lld, bit-identical\n", policy, what, (long long)aw,
           (long long)an);
    return aw;
}

static void compare_remat(const char *policy) {
    int64_t free_only = compare_remat_level(policy, 0, "default");
    int64_t gemm = compare_remat_level(policy, TEST_REMAT_GEMM_INPUTS, "--remat-gemm-inputs");
    CHECK(gemm < free_only, "%s: --remat-gemm-inputs should shrink the arena further (%lld bytes, %lld by default)", policy,
          (long long)gemm, (long long)free_only);
}

/* A forward-only plan (--forward) has no update phase and computes the training plan's loss
 * bit for bit: the same forward ops in the same dtypes. */
static void compare_forward(const char *policy) {
    Plan *pl[2] = {test_compile("graphs/tiny.lua", policy, NULL, 1),
                   test_compile_with("graphs/tiny.lua", policy, NULL, TEST_FORWARD)};
    int update = 0;
    for (int i = 0; i < pl[1]->p->n_groups; i++) update |= pl[1]->p->groups[i]->phase == PHASE_UPDATE;
    CHECK(!update, "%s: the forward-only plan has update kernels", policy);
    double loss[2];
    for (int k = 0; k < 2; k++) {
        Backend *b = ref_backend_create(pl[k]);
        init_consts(b);
        test_rng = 777;
        test_fill(b, 320, 0.1, 1024.0f);
        b->run_phase(b, PHASE_MICRO);
        loss[k] = read_loss(b);
        b->destroy(b);
    }
    CHECK(loss[0] == loss[1], "%s: loss %.9g forward-only vs %.9g in the training plan", policy, loss[1], loss[0]);
    printf("  %-10s forward-only plan: %d kernels and GEMMs instead of %d, the same loss\n", policy, pl[1]->p->n_groups,
           pl[0]->p->n_groups);
}

/* merged projections against separate ones: fewer GEMMs, the same bits */
static void compare_merge(const char *policy) {
    Plan *merged = test_compile("graphs/tiny.lua", policy, NULL, 1);
    Plan *separate = test_compile_with("graphs/tiny.lua", policy, NULL, TEST_NO_MERGE);
    int gm = 0, gs = 0, views = 0;
    for (int i = 0; i < merged->p->n_groups; i++) gm += merged->p->groups[i]->kind == GK_GEMM;
    for (int i = 0; i < separate->p->n_groups; i++) gs += separate->p->groups[i]->kind == GK_GEMM;
    for (int i = 0; i < merged->g->n_nodes; i++) views += node_is_view(merged->g->nodes[i]);
    /* tiny: 2 layers of q/k/v and gate/up, each merged forward and in dW: 3+2 GEMMs fewer a
     * layer forward, 3+2 fewer a layer in dW, less one each for the merged GEMMs */
    CHECK(gm == gs - 12, "%s: %d GEMMs merged, %d separate (12 fewer expected)", policy, gm, gs);
    Run a = run(merged), b = run(separate);
    CHECK(a.loss[0] == b.loss[0] && a.loss[1] == b.loss[1], "%s: loss %.9g/%.9g merged vs %.9g/%.9g separate", policy,
          a.loss[0], a.loss[1], b.loss[0], b.loss[1]);
    CHECK(!memcmp(a.grads, b.grads, (size_t)a.bytes), "%s: gradients differ merged and separate", policy);
    CHECK(!memcmp(a.params, b.params, (size_t)a.bytes), "%s: weights after two updates differ merged and separate", policy);
    printf("  %-10s merged projections: %d GEMMs instead of %d (%d views), bit-identical\n", policy, gm, gs, views);
}

static int count_op(const Plan *pl, Op op) {
    int n = 0;
    for (int i = 0; i < pl->g->n_nodes; i++) n += pl->g->nodes[i]->op == op;
    return n;
}

enum { DW_ADD_NONE, DW_ADD_EXACT, DW_ADD_CLOSE };

static void compare_dw_add(const char *policy, int expect) {
    Plan *with = test_compile("graphs/tiny.lua", policy, NULL, 1);
    Plan *without = test_compile_with("graphs/tiny.lua", policy, NULL, TEST_NO_DW_ADD);
    int adds = count_op(with, OP_LINEAR_DW_ADD), kw = with->p->n_groups, kn = without->p->n_groups;
    CHECK(!count_op(without, OP_LINEAR_DW_ADD), "%s: --no-dw-add still has linear_dw_add", policy);
    if (expect == DW_ADD_NONE) {
        CHECK(!adds && kw == kn, "%s: eager rounding of an f16 dW must stay (%d linear_dw_add, %d kernels against %d)", policy,
              adds, kw, kn);
    } else {
        CHECK(adds > 0 && kw < kn, "%s: %d linear_dw_add, %d kernels against %d without", policy, adds, kw, kn);
    }
    Run a = run(with), b = run(without);
    double dg = rel_l2((float *)a.grads, (float *)b.grads, a.bytes / 4);
    if (expect == DW_ADD_CLOSE) {
        CHECK(a.loss[0] == b.loss[0], "%s: the first loss differs (%.9g, %.9g): dw_add changes no forward value", policy,
              a.loss[0], b.loss[0]);
        CHECK(dg < 1e-3, "%s: gradients differ by %.3g relative L2 with linear_dw_add", policy, dg);
    } else {
        CHECK(a.loss[0] == b.loss[0] && a.loss[1] == b.loss[1], "%s: loss %.9g/%.9g with linear_dw_add vs %.9g/%.9g without",
              policy, a.loss[0], a.loss[1], b.loss[0], b.loss[1]);
        CHECK(!memcmp(a.grads, b.grads, (size_t)a.bytes), "%s: gradients differ with linear_dw_add and without", policy);
        CHECK(!memcmp(a.params, b.params, (size_t)a.bytes), "%s: weights after two updates differ with linear_dw_add", policy);
    }
    printf("  %-10s %d weight-gradient GEMMs add into the gradients, %d kernels instead of %d: %s\n", policy, adds, kw, kn,
           expect == DW_ADD_CLOSE ? "within tolerance" : "bit-identical");
    if (expect == DW_ADD_CLOSE) printf("  %-10s gradients differ by %.2g relative L2\n", policy, dg);
}

int main(void) {
    compare_dw_add("amp_fp16", DW_ADD_NONE);
    compare_dw_add("amp_bf16", DW_ADD_NONE);
    compare_dw_add("fp32", DW_ADD_EXACT);
    compare_dw_add("fp64", DW_ADD_EXACT);
    compare_dw_add("fp16_wide", DW_ADD_CLOSE);
    compare_merge("amp_fp16");
    compare_merge("fp32");
    compare_merge("amp_bf16");
    compare_merge("fp16_wide");
    compare_merge("fp64");
    compare_forward("amp_fp16");
    compare_forward("fp32");
    compare_remat("amp_fp16");
    compare_remat("fp32");
    compare("amp_fp16", 1);
    compare("fp32", 1);
    compare("amp_bf16", 1);
    compare("fp64", 1);
    compare("fp16_wide", 0);
    return test_done("test_fusion_equivalence");
}
