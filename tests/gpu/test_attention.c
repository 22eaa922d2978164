/* The flash attention kernels against the exact ones they replace, on the GPU: one graph
 * holds many independent attentions (T from 1 to 1024, tile multiples and not, causal and
 * not, heads/kv_heads 8/2, 8/8 and 4/1, head_dim 32, 64 and 128, batch 1 to 3), each with
 * fresh N(0, 1) q, k, v and a random upstream gradient (the loss is sum(o * w)). The graph
 * is compiled twice, with the fast kernels and with --reference-kernels; both plans run
 * one forward and backward pass from the same weights on an arena filled with NaNs first
 * (so a value nothing wrote shows up), and the outputs are compared by relative L2 error:
 *   o (f16/bf16) and dq, dk, dv (the f32 gradients of the f16/bf16 values): the flash
 *     kernels round P, and dS in the backward pass, to the input dtype before each
 *     product, as SDPA's fused kernels do, where the exact kernels keep f32. Each such
 *     rounding is a relative error of 2^-12 (f16) or 2^-9 (bf16) on average; a tensor's
 *     error is a few of those: tolerance 4e-3 for f16 and 3e-2 for bf16;
 *   lse and dsum (f32): the same sums in f32 in another order, exp2 against exp: 1e-5,
 *     and for dsum, which multiplies each plan's own o, the o tolerance.
 * The fast plan then runs again and must give the same bits (no atomics in any sum).
 * With --warm-cache ARCH it only compiles both plans into the kernel cache, which a machine
 * without a GPU can do ahead of time. */
#include "test_util.h"

#include "init.h"
#include "nvrtc_compile.h"

typedef struct Case {
    int B, T, H, KV, hd, causal;
} Case;

typedef struct Suite {
    const char *name, *policy;
    double tol; /* the o, dq, dk, dv tolerance */
    Case cases[128];
    int n;
} Suite;

static void add_case(Suite *s, int B, int T, int H, int KV, int hd, int causal) {
    s->cases[s->n++] = (Case){B, T, H, KV, hd, causal};
}

static Suite f16_suite(void) {
    Suite s = {"f16", "amp_fp16", 4e-3, {{0}}, 0};
    static const int ts[] = {1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 255, 256, 300, 511, 512, 513, 777, 1023, 1024};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        for (int c = 0; c < 2; c++) add_case(&s, 1 + (int)(i % 3), ts[i], 8, 2, 64, c);
    static const int shapes[][3] = {{8, 8, 32}, {8, 8, 64}, {8, 8, 128}, {4, 1, 32}, {4, 1, 64}, {4, 1, 128}, {8, 2, 32}, {8, 2, 128}};
    static const int ts2[] = {100, 512, 1000};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (size_t j = 0; j < 3; j++)
            for (int c = 0; c < 2; c++) add_case(&s, 2, ts2[j], shapes[i][0], shapes[i][1], shapes[i][2], c);
    return s;
}

static Suite bf16_suite(void) {
    Suite s = {"bf16", "amp_bf16", 3e-2, {{0}}, 0};
    static const int ts[] = {1, 65, 512, 1024};
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < 2; c++) add_case(&s, 2, ts[i], 8, 2, 64, c);
    for (int c = 0; c < 2; c++) add_case(&s, 2, 300, 4, 1, 128, c), add_case(&s, 3, 129, 8, 8, 32, c);
    return s;
}

static char *graph_text(const Suite *s) {
    StrBuf o = {0};
    sb_append(&o, "local total\n"
                  "local function case(i, B, T, H, KV, hd, causal)\n"
                  "  local q = param(('q%d'):format(i), {B, T, H * hd}, init.normal(0, 1))\n"
                  "  local k = param(('k%d'):format(i), {B, T, KV * hd}, init.normal(0, 1))\n"
                  "  local v = param(('v%d'):format(i), {B, T, KV * hd}, init.normal(0, 1))\n"
                  "  local w = param(('w%d'):format(i), {B, T, H * hd}, init.normal(0, 1))\n"
                  "  local o = attention(q, k, v, { heads = H, kv_heads = KV, causal = causal == 1, name = ('attn%d'):format(i) })\n"
                  "  local s = sum_all(mul(o, w))\n"
                  "  total = total and add(total, s) or s\n"
                  "end\n");
    for (int i = 0; i < s->n; i++) {
        const Case *c = &s->cases[i];
        sb_printf(&o, "case(%d, %d, %d, %d, %d, %d, %d)\n", i, c->B, c->T, c->H, c->KV, c->hd, c->causal);
    }
    sb_printf(&o, "loss(total)\nprecision \"%s\"\n", s->policy);
    return o.s;
}

static const Node *named(const Plan *pl, const char *fmt, int i) {
    char name[64];
    snprintf(name, sizeof name, fmt, i);
    for (int k = 0; k < pl->g->n_nodes; k++)
        if (pl->g->nodes[k]->name && !strcmp(pl->g->nodes[k]->name, name)) return pl->g->nodes[k];
    die("test_attention: no node %s", name);
}

static const Node *part_of(const Plan *pl, const Node *producer) {
    for (int k = 0; k < pl->g->n_nodes; k++)
        if (pl->g->nodes[k]->op == OP_PART && pl->g->nodes[k]->in[0] == producer) return pl->g->nodes[k];
    die("test_attention: %s has no part", node_label(producer));
}

/* dsum: the part of the dq kernel that reads this attention's output */
static const Node *dsum_of(const Plan *pl, const Node *attn) {
    for (int k = 0; k < pl->g->n_nodes; k++)
        if (pl->g->nodes[k]->op == OP_ATTENTION_BACKWARD_DQ && pl->g->nodes[k]->in[4] == attn) return part_of(pl, pl->g->nodes[k]);
    die("test_attention: no gradient of %s", node_label(attn));
}

/* a tensor's values as doubles: a stored node, or the gradient of a parameter */
static double *values(Backend *b, const Node *n, int grad, int64_t *count) {
    const Plan *pl = b->pl;
    *count = shape_numel(&n->shape);
    DType t = grad ? pl->g->policy.master : n->dtype;
    int64_t bytes = *count * (int64_t)dtype_size(t);
    unsigned char *raw = xmalloc((size_t)bytes + 1);
    if (grad) b->read(b, BUF_GRADS, pl->g->params[n->param_index].offset * (int64_t)dtype_size(t), raw, bytes);
    else b->read(b, n->buffer, n->offset, raw, bytes);
    double *v = xmalloc((size_t)*count * sizeof *v);
    for (int64_t i = 0; i < *count; i++) v[i] = dtype_load(t, raw, (size_t)i);
    free(raw);
    return v;
}

static double rel_l2(const double *a, const double *b, int64_t n, int *finite) {
    double d = 0, r = 0;
    *finite = 1;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) *finite = 0;
        d += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
    }
    return sqrt(d / (r > 0 ? r : 1));
}

static Backend *start(Plan *pl) {
    char *why = NULL;
    Backend *b = cuda_backend_create(pl, &why);
    if (!b) die("test_attention: %s", why);
    init_consts(b);
    init_params(b, 11);
    MmcStepState st = init_state(pl, 1);
    st.scale = st.loss_seed = 1.0f; /* dO = w: far from f16's range limits */
    b->write(b, BUF_STATE, 0, &st, sizeof st);
    return b;
}

/* one forward and backward pass from zero gradients on an arena of NaNs */
static void run_once(Backend *b) {
    const Program *p = b->pl->p;
    int64_t most = p->buffer_bytes[BUF_ARENA] > p->buffer_bytes[BUF_GRADS] ? p->buffer_bytes[BUF_ARENA] : p->buffer_bytes[BUF_GRADS];
    unsigned char *fill = xmalloc((size_t)most + 1);
    memset(fill, 0xff, (size_t)p->buffer_bytes[BUF_ARENA]);
    b->write(b, BUF_ARENA, 0, fill, p->buffer_bytes[BUF_ARENA]);
    memset(fill, 0, (size_t)p->buffer_bytes[BUF_GRADS]);
    b->write(b, BUF_GRADS, 0, fill, p->buffer_bytes[BUF_GRADS]);
    free(fill);
    b->run_phase(b, PHASE_MICRO);
}

static void run_suite(const Suite *s, const char *warm_arch) {
    char *text = graph_text(s);
    char *path = test_write_graph(s->name[0] == 'f' ? "attention_f16" : "attention_bf16", text);
    Plan *fast = test_compile_with(path, NULL, NULL, 1, 0), *ref = test_compile_with(path, NULL, NULL, 1, 1);
    if (warm_arch) {
        for (int k = 0; k < 2; k++) {
            size_t size;
            int hit;
            free(nvrtc_compile_cached((k ? ref : fast)->kernels, path, warm_arch, &size, &hit));
            printf("  %s %s plan: %s for %s\n", s->name, k ? "reference" : "fast", hit ? "already cached" : "compiled", warm_arch);
        }
        return;
    }
    Backend *bf = start(fast), *br = start(ref);
    run_once(bf);
    run_once(br);
    int bad = 0;
    double worst = 0;
    char worst_at[96] = "";
    static const char *const what[] = {"o", "lse", "dsum", "dq", "dk", "dv"};
    for (int i = 0; i < s->n; i++) {
        const Case *c = &s->cases[i];
        const Node *of = named(fast, "attn%d", i), *orf = named(ref, "attn%d", i);
        const Node *nodes_f[6] = {of, part_of(fast, of), dsum_of(fast, of), named(fast, "q%d", i), named(fast, "k%d", i),
                                  named(fast, "v%d", i)};
        const Node *nodes_r[6] = {orf, part_of(ref, orf), dsum_of(ref, orf), named(ref, "q%d", i), named(ref, "k%d", i),
                                  named(ref, "v%d", i)};
        char line[256];
        int n_line = snprintf(line, sizeof line, "  %s B=%d T=%4d H=%d KV=%d hd=%3d causal=%d:", s->name, c->B, c->T, c->H,
                              c->KV, c->hd, c->causal);
        for (int t = 0; t < 6; t++) {
            int64_t na, nb;
            double *a = values(bf, nodes_f[t], t >= 3, &na), *b = values(br, nodes_r[t], t >= 3, &nb);
            int finite;
            double e = rel_l2(a, b, na, &finite), tol = t == 1 ? 1e-5 : s->tol;
            n_line += snprintf(line + n_line, sizeof line - (size_t)n_line, " %s %.1e", what[t], e);
            if (e / tol > worst) {
                worst = e / tol;
                snprintf(worst_at, sizeof worst_at, "%s of case %d", what[t], i);
            }
            if (!finite || e > tol || na != nb) {
                bad++;
                CHECK(0, "%s case %d (B=%d T=%d H=%d KV=%d hd=%d causal=%d): %s relative L2 %.3g > %.3g%s", s->name, i,
                      c->B, c->T, c->H, c->KV, c->hd, c->causal, what[t], e, tol, finite ? "" : " (not finite)");
            }
            free(a), free(b);
        }
        if (getenv("MMC_VERBOSE")) printf("%s\n", line);
    }
    /* the same inputs again: the same bits */
    int64_t bytes = fast->p->buffer_bytes[BUF_GRADS];
    unsigned char *g1 = test_buffer(bf, BUF_GRADS), *a1 = test_buffer(bf, BUF_ARENA);
    run_once(bf);
    unsigned char *g2 = test_buffer(bf, BUF_GRADS), *a2 = test_buffer(bf, BUF_ARENA);
    int same = !memcmp(g1, g2, (size_t)bytes);
    for (int i = 0; i < s->n && same; i++) {
        const Node *o = named(fast, "attn%d", i);
        same = !memcmp(a1 + o->offset, a2 + o->offset, (size_t)(shape_numel(&o->shape) * (int64_t)dtype_size(o->dtype)));
    }
    CHECK(same, "%s: a second run of the fast kernels gave other bits", s->name);
    printf("  %-4s %3d attentions: %d tensors over tolerance; worst %.2f of its tolerance (%s); rerun %s\n", s->name, s->n,
           bad, worst, worst_at, same ? "bit-identical" : "DIFFERENT");
    free(g1), free(g2), free(a1), free(a2);
    bf->destroy(bf);
    br->destroy(br);
    free(text), free(path);
}

int main(int argc, char **argv) {
    const char *warm = argc > 2 && !strcmp(argv[1], "--warm-cache") ? argv[2] : NULL;
    Suite a = f16_suite(), b = bf16_suite();
    run_suite(&a, warm);
    run_suite(&b, warm);
    return test_done("test_attention");
}
