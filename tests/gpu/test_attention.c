/* The flash attention kernels against the exact ones they replace, on the GPU: one graph
 * holds many independent attentions (T from 1 to 1024, tile multiples and not, causal and
 * not, heads/kv_heads 8/2, 8/8 and 4/1, head_dim 32, 64 and 128, batch 1 to 3), each with
 * fresh N(0, 1) q, k, v and a random upstream gradient (the loss is sum(o * w)); every other
 * pair of cases takes q and k through a projection and rope first, as MiniMind does, so the
 * fast plan applies rope's gradient inside the dq and dk/dv kernels. The graph
 * is compiled twice, with the fast kernels and with --reference-kernels; both plans run
 * one forward and backward pass from the same weights, kernel by kernel, on an arena filled
 * with NaNs first (so a value nothing wrote shows up), each output read right after its
 * kernel, and the outputs are compared by relative L2 error:
 *   o (f16/bf16) and dq, dk, dv (the f32 gradients of the f16/bf16 values): the flash
 *     kernels round P, and dS in the backward pass, to the input dtype before each
 *     product, as SDPA's fused kernels do, where the exact kernels keep f32. Each such
 *     rounding is a relative error of 2^-12 (f16) or 2^-9 (bf16) on average; a tensor's
 *     error is a few of those: tolerance 4e-3 for f16 and 3e-2 for bf16. dq and dk are
 *     measured against the size of dv: where the softmax has one key (T = 1), dS =
 *     P (dP - dsum) is zero up to rounding, and so are dq and dk;
 *   lse (f32): the same sums in f32 in another order, exp2 against exp: 1e-5;
 *   dsum (f32): against rowsum(dO * O) summed here in double from the flash plan's own dO
 *     and o, 1e-5 (f32 sums of hd products).
 * The fast plan then runs again and must give the same bits (no atomics in any sum). On an
 * sm_90 GPU, whose fast plan runs the wgmma kernels for heads of 64 (compiled as sm_90a), it
 * runs once more compiled as plain sm_90, on the mma.sync kernels: the same bits again.
 * With --warm-cache ARCH it only compiles both plans into the kernel cache, which a machine
 * without a GPU can do ahead of time; with --cases N it runs the first N cases of each suite
 * (racecheck: `compute-sanitizer --tool racecheck build/gpu/test_attention --cases 24`). */
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
                  "local tables = {}\n"
                  "local function case(i, B, T, H, KV, hd, causal)\n"
                  "  local q = param(('q%d'):format(i), {B, T, H * hd}, init.normal(0, 1))\n"
                  "  local k = param(('k%d'):format(i), {B, T, KV * hd}, init.normal(0, 1))\n"
                  "  local v = param(('v%d'):format(i), {B, T, KV * hd}, init.normal(0, 1))\n"
                  "  local w = param(('w%d'):format(i), {B, T, H * hd}, init.normal(0, 1))\n"
                  "  if i // 2 % 2 == 1 then\n"
                  "    local key = T .. ':' .. hd\n"
                  "    tables[key] = tables[key] or { rope_tables(T, hd, 1e4) }\n"
                  "    local c, s = tables[key][1], tables[key][2]\n"
                  "    local wq = param(('wq%d'):format(i), {H * hd, H * hd}, init.fan_in)\n"
                  "    local wk = param(('wk%d'):format(i), {KV * hd, KV * hd}, init.fan_in)\n"
                  "    q = rope(linear(q, wq), c, s, { heads = H })\n"
                  "    k = rope(linear(k, wk), c, s, { heads = KV })\n"
                  "  end\n"
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

/* one forward and backward pass from zero gradients on an arena of NaNs, group by group;
 * after each group, the values of `watch` it computed are copied to `got` (values() form) */
static void run_once(Backend *b, const Node **watch, double **got, int n_watch) {
    const Program *p = b->pl->p;
    int64_t most = p->buffer_bytes[BUF_ARENA] > p->buffer_bytes[BUF_GRADS] ? p->buffer_bytes[BUF_ARENA] : p->buffer_bytes[BUF_GRADS];
    unsigned char *fill = xmalloc((size_t)most + 1);
    memset(fill, 0xff, (size_t)p->buffer_bytes[BUF_ARENA]);
    b->write(b, BUF_ARENA, 0, fill, p->buffer_bytes[BUF_ARENA]);
    memset(fill, 0, (size_t)p->buffer_bytes[BUF_GRADS]);
    b->write(b, BUF_GRADS, 0, fill, p->buffer_bytes[BUF_GRADS]);
    free(fill);
    for (int k = 0; k < p->n_groups; k++) {
        if (p->groups[k]->phase != PHASE_MICRO) continue;
        b->run_group(b, k);
        for (int w = 0; w < n_watch; w++)
            if (watch[w]->group == k) {
                int64_t count;
                free(got[w]);
                got[w] = values(b, watch[w], 0, &count);
            }
    }
}

enum { O, LSE, DSUM, DOUT, DQ, DK, DV, PER_CASE };

/* the nodes of case i: o, lse, dsum and dO are read after their kernels, dq, dk, dv from the
 * gradient buffer at the end */
static void case_nodes(const Plan *pl, int i, const Node **n) {
    n[O] = named(pl, "attn%d", i);
    n[LSE] = part_of(pl, n[O]);
    n[DSUM] = dsum_of(pl, n[O]);
    for (int k = 0; k < pl->g->n_nodes; k++)
        if (pl->g->nodes[k]->op == OP_ATTENTION_BACKWARD_DQ && pl->g->nodes[k]->in[4] == n[O]) n[DOUT] = pl->g->nodes[k]->in[0];
    n[DQ] = named(pl, "q%d", i);
    n[DK] = named(pl, "k%d", i);
    n[DV] = named(pl, "v%d", i);
}

static double norm2(const double *a, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

/* two runs of plan pl gave the same gradient buffer (ga, gb) and the same watched values */
static int same_bits(const Plan *pl, const unsigned char *ga, const unsigned char *gb, double **a, double **b,
                     const Node **watch, int n_watch) {
    int same = !memcmp(ga, gb, (size_t)pl->p->buffer_bytes[BUF_GRADS]);
    for (int w = 0; w < n_watch && same; w++)
        same = !memcmp(a[w], b[w], (size_t)shape_numel(&watch[w]->shape) * sizeof(double));
    return same;
}

static void run_suite(const Suite *s, const char *warm_arch) {
    char *text = graph_text(s);
    char *path = test_write_graph(s->name[0] == 'f' ? "attention_f16" : "attention_bf16", text);
    Plan *fast = test_compile_with(path, NULL, NULL, 0), *ref = test_compile_with(path, NULL, NULL, TEST_REFERENCE_KERNELS);
    if (warm_arch) {
        for (int k = 0; k < 2; k++) {
            size_t size;
            int hit;
            free(nvrtc_compile_cached((k ? ref : fast)->kernels, path, warm_arch, &size, &hit));
            printf("  %s %s plan: %s for %s\n", s->name, k ? "reference" : "fast", hit ? "already cached" : "compiled", warm_arch);
        }
        return;
    }
    int nw = s->n * 4; /* o, lse, dsum, dO of every case */
    const Node **wf = xcalloc((size_t)nw, sizeof *wf), **wr = xcalloc((size_t)nw, sizeof *wr);
    const Node *nf[128][PER_CASE], *nr[128][PER_CASE];
    for (int i = 0; i < s->n; i++) {
        case_nodes(fast, i, nf[i]);
        case_nodes(ref, i, nr[i]);
        for (int t = 0; t < 4; t++) wf[4 * i + t] = nf[i][t], wr[4 * i + t] = nr[i][t];
    }
    double **gf = xcalloc((size_t)nw, sizeof *gf), **gr = xcalloc((size_t)nw, sizeof *gr);
    Backend *bf = start(fast), *br = start(ref);
    run_once(bf, wf, gf, nw);
    run_once(br, wr, gr, nw);
    int bad = 0;
    double worst = 0;
    char worst_at[96] = "";
    static const char *const what[] = {"o", "lse", "dsum", "dO", "dq", "dk", "dv"};
    for (int i = 0; i < s->n; i++) {
        const Case *c = &s->cases[i];
        double *a[PER_CASE] = {0}, *b[PER_CASE] = {0};
        int64_t n[PER_CASE] = {0}, nb;
        for (int t = 0; t < 4; t++) a[t] = gf[4 * i + t], b[t] = gr[4 * i + t], n[t] = shape_numel(&nf[i][t]->shape);
        for (int t = DQ; t <= DV; t++) a[t] = values(bf, nf[i][t], 1, &n[t]), b[t] = values(br, nr[i][t], 1, &nb);
        /* dsum against rowsum(dO * o) from the fast plan's own values */
        int64_t rows = n[DSUM], hd = c->hd;
        double *want = xmalloc((size_t)rows * sizeof *want);
        for (int64_t r = 0; r < rows; r++) { /* r = (b * H + h) * T + t; o, dO are [B, T, H * hd] */
            int64_t bb = r / ((int64_t)c->H * c->T), h = (r / c->T) % c->H, t = r % c->T;
            int64_t at = (bb * c->T + t) * c->H * hd + h * hd;
            double d = 0;
            for (int64_t e = 0; e < hd; e++) d += a[DOUT][at + e] * a[O][at + e];
            want[r] = d;
        }
        b[DSUM] = want; /* the reference plan's own dsum is not compared */
        char line[256];
        int n_line = snprintf(line, sizeof line, "  %s B=%d T=%4d H=%d KV=%d hd=%3d causal=%d:", s->name, c->B, c->T, c->H,
                              c->KV, c->hd, c->causal);
        const double dv_norm = norm2(b[DV], n[DV]);
        for (int t = 0; t < PER_CASE; t++) {
            if (t == DOUT) continue;
            int finite;
            double e = rel_l2(a[t], b[t], n[t], &finite), tol = t == LSE || t == DSUM ? 1e-5 : s->tol;
            if (t == DQ || t == DK) { /* against the size of the gradients: see the top */
                double own = norm2(b[t], n[t]), floor = 0.05 * dv_norm * sqrt((double)n[t] / (double)n[DV]);
                if (own < floor && own > 0) e *= own / floor;
            }
            n_line += snprintf(line + n_line, sizeof line - (size_t)n_line, " %s %.1e", what[t], e);
            if (e / tol > worst) {
                worst = e / tol;
                snprintf(worst_at, sizeof worst_at, "%s of case %d", what[t], i);
            }
            if (!finite || e > tol) {
                bad++;
                CHECK(0, "%s case %d (B=%d T=%d H=%d KV=%d hd=%d causal=%d): %s relative L2 %.3g > %.3g%s", s->name, i,
                      c->B, c->T, c->H, c->KV, c->hd, c->causal, what[t], e, tol, finite ? "" : " (not finite)");
            }
        }
        for (int t = DQ; t <= DV; t++) free(a[t]), free(b[t]);
        free(want);
        if (getenv("MMC_VERBOSE")) printf("%s\n", line);
    }
    /* the same inputs again: the same bits */
    double **again = xcalloc((size_t)nw, sizeof *again);
    unsigned char *g1 = test_buffer(bf, BUF_GRADS);
    run_once(bf, wf, again, nw);
    unsigned char *g2 = test_buffer(bf, BUF_GRADS);
    int same = same_bits(fast, g1, g2, gf, again, wf, nw);
    CHECK(same, "%s: a second run of the fast kernels gave other bits", s->name);
    printf("  %-4s %3d attentions: %d tensors over tolerance; worst %.2f of its tolerance (%s); rerun %s\n", s->name, s->n,
           bad, worst, worst_at, same ? "bit-identical" : "DIFFERENT");
    if (cuda_device_sm() == 90) { /* the wgmma kernels (sm_90a) against the mma.sync ones (sm_90): the same bits */
        setenv("MMC_CUDA_ARCH", "sm_90", 1);
        Backend *b90 = start(fast);
        unsetenv("MMC_CUDA_ARCH");
        double **plain = xcalloc((size_t)nw, sizeof *plain);
        run_once(b90, wf, plain, nw);
        unsigned char *g3 = test_buffer(b90, BUF_GRADS);
        int equal = same_bits(fast, g1, g3, gf, plain, wf, nw);
        CHECK(equal, "%s: the sm_90a (wgmma) and sm_90 (mma.sync) flash kernels gave other bits", s->name);
        printf("  %-4s sm_90a against sm_90 kernels: %s\n", s->name, equal ? "bit-identical" : "DIFFERENT");
        for (int w = 0; w < nw; w++) free(plain[w]);
        free(plain), free(g3);
        b90->destroy(b90);
    }
    for (int w = 0; w < nw; w++) free(gf[w]), free(gr[w]), free(again[w]);
    free(gf), free(gr), free(again), free(wf), free(wr), free(g1), free(g2);
    bf->destroy(bf);
    br->destroy(br);
    free(text), free(path);
}

int main(int argc, char **argv) {
    const char *warm = argc > 2 && !strcmp(argv[1], "--warm-cache") ? argv[2] : NULL;
    /* --cases N: the first N cases of each suite, for compute-sanitizer's slower runs */
    int most = argc > 2 && !strcmp(argv[1], "--cases") ? atoi(argv[2]) : 0;
    Suite a = f16_suite(), b = bf16_suite();
    if (most > 0 && most < a.n) a.n = most;
    if (most > 0 && most < b.n) b.n = most;
    run_suite(&a, warm);
    run_suite(&b, warm);
    return test_done("test_attention");
}
