/* Every kernel and GEMM of the tiny plan on the GPU against the ref backend, on the same
 * inputs: the ref backend runs the schedule from random weights on a random batch; before
 * each group every buffer is copied from the ref backend to the GPU, both run the group,
 * and each value the group stores is compared. Tolerance, relative L2 per tensor: 1e-3
 * for f16 outputs and 8e-3 for bf16 (a few ulps, 2^-11 and 2^-8 relative each, from
 * different summation orders), 1e-5 for f32 (the GPU sums in f32, the ref in double),
 * 1e-12 for f64. Kernels that only round elementwise ops must agree bit for bit; the
 * count of bit-identical tensors is printed. Run under each policy named on the command
 * line (default: amp_fp16 fp32 amp_bf16 fp16_wide), and once more at sizes no fast kernel
 * takes (head_dim 34, widths not multiples of 8), so the general kernels are checked too,
 * and with --gemm-epilogues at sizes where SwiGLU's GEMMs take their epilogues (the sm_90a
 * kernel on an H100 or H200, cuBLASLt and the epilogue kernel elsewhere); --epilogues runs
 * only those. With --fuse-loss-grad under three policies, the cross-entropy's gradient in the
 * loss's kernel (cross_entropy_fused.cu) is checked the same way. */
#include "test_util.h"

#include "init.h"

static double tolerance(DType t) {
    switch (t) {
    case DT_F16: return 1e-3;
    case DT_BF16: return 8e-3;
    case DT_F64: return 1e-12;
    default: return 1e-5;
    }
}

typedef struct Stats {
    int tensors, exact, bad;
    double worst;
    char worst_name[160];
} Stats;

static void compare(Stats *s, const char *kernel, const char *what, DType t, const void *ref, const void *gpu, int64_t n) {
    double d = 0, r = 0;
    int exact = !memcmp(ref, gpu, (size_t)n * dtype_size(t)), finite = 1;
    for (int64_t i = 0; i < n; i++) {
        double a = dtype_load(t, ref, (size_t)i), b = dtype_load(t, gpu, (size_t)i);
        if (isnan(a) != isnan(b) || (isinf(a) && a != b)) finite = 0;
        if (!isfinite(a) || !isfinite(b)) continue;
        d += (a - b) * (a - b), r += a * a;
    }
    double rel = sqrt(d / (r > 0 ? r : 1));
    s->tensors++;
    s->exact += exact;
    double ratio = rel / tolerance(t);
    if (ratio > s->worst) {
        s->worst = ratio;
        snprintf(s->worst_name, sizeof s->worst_name, "%s %s", kernel, what);
    }
    if (!finite || rel > tolerance(t)) {
        s->bad++;
        CHECK(0, "%s: %s (%s): relative L2 %.3g > %.3g%s", kernel, what, dtype_name(t), rel, tolerance(t),
              finite ? "" : " (inf/nan differ)");
    }
}

static void compare_buffer(Stats *s, Backend *ref, Backend *gpu, const char *kernel, int buffer, DType t) {
    int64_t bytes = ref->pl->p->buffer_bytes[buffer];
    unsigned char *a = test_buffer(ref, buffer), *b = test_buffer(gpu, buffer);
    compare(s, kernel, buffer_name(buffer), t, a, b, bytes / (int64_t)dtype_size(t));
    free(a), free(b);
}

static void run_policy_with(const char *policy, const char *defines, int vocab, unsigned flags) {
    Plan *pl = test_compile_with("graphs/tiny.lua", policy, defines, flags);
    char *why = NULL;
    Backend *ref = ref_backend_create(pl), *gpu = cuda_backend_create(pl, &why);
    if (!gpu) die("test_gpu_kernels: %s", why);
    init_consts(ref);
    init_params(ref, 7);
    test_rng = 99;
    test_fill(ref, vocab, 0.0, 1024.0f); /* a random batch of ids and labels (and zero weights, replaced next) */
    init_params(ref, 7);
    MmcStepState st = init_state(pl, 10);
    st.scale = 1024.0f, st.loss_seed = 1024.0f;
    ref->write(ref, BUF_STATE, 0, &st, sizeof st);
    const Program *p = pl->p;
    DType m = pl->g->policy.master;
    { /* a previous micro-step's sums in the gradients: what grad_accumulate and linear_dw_add add to */
        int64_t count = p->buffer_bytes[BUF_GRADS] / (int64_t)dtype_size(m);
        void *h = xmalloc((size_t)p->buffer_bytes[BUF_GRADS] + 1);
        for (int64_t i = 0; i < count; i++) dtype_store(m, h, (size_t)i, 0.01 * (2 * test_uniform() - 1));
        ref->write(ref, BUF_GRADS, 0, h, p->buffer_bytes[BUF_GRADS]);
        free(h);
    }
    Stats s = {0};
    for (int k = 0; k < p->n_groups; k++) {
        const Group *gr = p->groups[k];
        for (int b = 0; b < BUF_COUNT; b++) {
            unsigned char *h = test_buffer(ref, b);
            gpu->write(gpu, b, 0, h, p->buffer_bytes[b]);
            free(h);
        }
        ref->run_group(ref, k);
        gpu->run_group(gpu, k);
        if (gr->kind == GK_OPTIMIZER) {
            MmcStepState a, g;
            ref->read(ref, BUF_STATE, 0, &a, sizeof a);
            gpu->read(gpu, BUF_STATE, 0, &g, sizeof g);
            compare(&s, gr->kernel, "grad_norm", DT_F32, &a.grad_norm, &g.grad_norm, 1);
            compare(&s, gr->kernel, "clip_coef", DT_F32, &a.clip_coef, &g.clip_coef, 1);
            compare(&s, gr->kernel, "lr", DT_F64, &a.lr, &g.lr, 1);
            CHECK(a.found_inf == g.found_inf && a.scale == g.scale && a.growth_tracker == g.growth_tracker &&
                      a.adam_step == g.adam_step && a.update == g.update && a.skipped == g.skipped,
                  "%s: step counters differ", gr->kernel);
            for (int b = BUF_PARAMS; b <= BUF_ADAM_V; b++)
                if (b != BUF_WEIGHTS) compare_buffer(&s, ref, gpu, gr->kernel, b, m);
            continue;
        }
        for (int i = 0; i < gr->n_nodes; i++) {
            const Node *n = gr->nodes[i];
            if (!n->materialized || n->buffer < 0) continue;
            if (n == gr->anchor && !gemm_product_kept(pl->g, gr)) continue; /* no kernel reads it: the GEMM keeps it in registers */
            int64_t count = shape_numel(&n->shape), bytes = count * (int64_t)dtype_size(n->dtype);
            unsigned char *a = xmalloc((size_t)bytes + 1), *b = xmalloc((size_t)bytes + 1);
            ref->read(ref, n->buffer, n->offset, a, bytes);
            gpu->read(gpu, n->buffer, n->offset, b, bytes);
            char what[128];
            snprintf(what, sizeof what, "%%%d %s %s", n->id, op_info[n->op].name, node_label(n));
            compare(&s, gr->kernel, what, n->dtype, a, b, count);
            free(a), free(b);
        }
    }
    printf("  %-10s%s%s%s%s %3d kernels and GEMMs, %4d tensors compared: %4d bit-identical, %d over tolerance; worst %.2f of "
           "its tolerance (%s)\n",
           policy, defines ? " (sizes: " : "", defines ? defines : "", defines ? ")" : "", flags & TEST_GEMM_EPILOGUES ? " epilogues" : flags & TEST_FUSE_LOSS_GRAD ? " loss gradient fused" : "", p->n_groups, s.tensors, s.exact, s.bad, s.worst, s.worst_name);
    ref->destroy(ref);
    gpu->destroy(gpu);
}

static void run_policy(const char *policy, const char *defines, int vocab) { run_policy_with(policy, defines, vocab, 0); }

/* SwiGLU forward and backward in the epilogues of their GEMMs (dim and ffn multiples of 128),
 * 160 rows: one tile of 128 and one with rows missing */
static void run_epilogues(void) {
    run_policy_with("amp_fp16", "dim=128,heads=2,kv_heads=1,ffn=384,batch=4,seq=40", 320, TEST_GEMM_EPILOGUES);
    run_policy_with("amp_bf16", "dim=128,heads=2,kv_heads=1,ffn=384,batch=4,seq=40", 320, TEST_GEMM_EPILOGUES);
}

/* the cross-entropy and its gradient in one kernel (mmc compile --fuse-loss-grad) */
static void run_loss_grad(void) {
    const char *policies[] = {"amp_fp16", "amp_bf16", "fp32"};
    for (int i = 0; i < 3; i++) run_policy_with(policies[i], NULL, 320, TEST_FUSE_LOSS_GRAD);
    /* rows not a multiple of a block's 4, logits a row not a multiple of a warp's 256 */
    run_policy_with("amp_fp16", "batch=41,seq=410,vocab=328", 328, TEST_FUSE_LOSS_GRAD);
}

int main(int argc, char **argv) {
    const char *defaults[] = {"amp_fp16", "fp32", "amp_bf16", "fp16_wide"};
    if (argc == 2 && !strcmp(argv[1], "--epilogues")) /* those runs alone (for compute-sanitizer) */
        run_epilogues();
    else if (argc > 1)
        for (int i = 1; i < argc; i++) run_policy(argv[i], NULL, 320);
    else {
        for (int i = 0; i < 4; i++) run_policy(defaults[i], NULL, 320);
        run_policy("amp_fp16", "dim=68,heads=2,kv_heads=1,ffn=190,vocab=317", 317);
        /* 16810 rows: the row kernels loop over rows, and the last round has rows missing */
        run_policy("amp_fp16", "batch=41,seq=410", 320);
        run_epilogues();
        run_loss_grad();
    }
    return test_done("test_gpu_kernels");
}
