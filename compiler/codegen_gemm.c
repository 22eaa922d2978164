/* codegen_gemm: a GEMM whose elementwise readers are its epilogue (templates/gemm_epilogue.cu
 * over templates/gemm_sm90.cuh). The fusion pass proposes the pair, the plan reader checks a
 * hand-edited one, and the launch and code steps build the kernel, all by this file's rule:
 *  - the GEMM is a linear (x W^T: B K-major) or a linear_dx (dy W: B MN-major) in f16 or bf16
 *    whose k is a multiple of 64, A's rows dense or 16-byte aligned;
 *  - the epilogue is elementwise ops over one space, each operand from memory read at the
 *    element's own index (no broadcast, no per-row value), 8 at a time;
 *  - it reads the product itself over the product's space (n a multiple of 128: two slabs of
 *    64 columns a tile), or, paired, exactly the product's two column halves over the space
 *    of a half (n / 2 a multiple of 64): SwiGLU's silu(gate) * up, whose tile holds gate
 *    and up of the same columns.
 * The product is still given memory, so a GPU without the sm_90a kernel runs cuBLASLt and
 * the same epilogue from memory; the sm_90a kernel stores it only where another kernel
 * reads it (the backward pass reads gate and up, no one reads SwiGLU's dh). */
#include <stdlib.h>
#include <string.h>

#include "codegen_internal.h"

/* gemm_sm90.cuh's STAGES, SLAB and BM */
enum { GEMM_STAGES = 4, GEMM_SLAB = 8192, GEMM_BM = 128 };

/* consumer warpgroups of the sm_90a kernel (gemm_sm90.cuh says why): three where the
 * epilogue reads nothing but the product, two where it also loads operands */
static int gemm_consumers(const GemmEpilogue *e) { return e->loads ? 2 : 3; }

/* a slice of the last dim of `of` (axis 1: a slice's axis is the first or the last dim),
 * `cols` wide from column `begin` */
static int is_column_slice(const Node *s, const Node *of, int64_t begin, int64_t cols) {
    int last = of->shape.rank - 1;
    return s->op == OP_SLICE && s->in[0] == of && s->a.axis == 1 && s->a.begin == begin &&
           s->shape.rank == of->shape.rank && s->shape.dim[last] == cols;
}

static int wide_dtype_ok(DType t) { return t == DT_F16 || t == DT_BF16 || t == DT_F32; }

const char *gemm_epilogue_refusal(const Node *a, Node *const *epi, int n, unsigned reference, GemmEpilogue *out) {
    GemmEpilogue e = {0};
    if (reference & (REF_GEMM | REF_WIDE)) return "the reference kernels take cuBLASLt and a kernel of their own";
    if (a->op != OP_LINEAR && a->op != OP_LINEAR_DX) return "only a linear or a linear_dx takes an epilogue";
    if (a->dtype != DT_F16 && a->dtype != DT_BF16) return "the GEMM is not f16 or bf16";
    GemmShape s = gemm_shape(a);
    if (s.trans_a || s.trans_b != (a->op == OP_LINEAR)) return "the GEMM's layout is not NT or NN";
    if (s.a->dtype != a->dtype || s.b->dtype != a->dtype) return "the GEMM's operands are not in its dtype";
    if (s.k % 64) return "k is not a multiple of 64";
    if (n < 1) return "no epilogue";
    const Node *last = epi[n - 1];
    const Shape *space = &last->shape;
    int64_t cols = space->dim[space->rank - 1];
    int reads_product = 0, halves = 0, loads = 0;
    const Node *half[2] = {NULL, NULL};
    for (int i = 0; i < n; i++) {
        const Node *x = epi[i];
        const OpInfo *info = &op_info[x->op];
        if (info->kind != OK_ELEMENTWISE || x->op == OP_GRAD_ACCUMULATE || info->row_in) return "an epilogue op is not plainly elementwise";
        if (!shape_eq(&x->shape, space) || !wide_dtype_ok(x->dtype)) return "the epilogue's ops are not over one space";
        for (int k = 0; k < x->n_in; k++) {
            const Node *in = x->in[k];
            int inside = 0;
            for (int j = 0; j < n && !inside; j++) inside = epi[j] == in;
            if (inside) continue;
            if (in == a) {
                reads_product = 1;
                continue;
            }
            if (is_column_slice(in, a, 0, s.n / 2) && s.n % 2 == 0) {
                half[0] = in, halves |= 1;
                continue;
            }
            if (is_column_slice(in, a, s.n / 2, s.n / 2) && s.n % 2 == 0) {
                half[1] = in, halves |= 2;
                continue;
            }
            if (shape_numel(&in->shape) != shape_numel(space) || !wide_dtype_ok(in->dtype))
                return "an epilogue operand is broadcast, or not f16, bf16 or f32";
            if (in->shape.dim[in->shape.rank - 1] % 8) return "an epilogue operand's rows are not whole runs of 8";
            loads++;
        }
    }
    if (reads_product && !halves) {
        if (!shape_eq(space, &a->shape)) return "the epilogue is not over the product's space";
        if (s.n % 128) return "n is not a multiple of 128";
    } else if (halves == 3 && !reads_product) {
        e.paired = 1;
        e.half[0] = half[0], e.half[1] = half[1];
        if (cols != s.n / 2 || shape_numel(space) * 2 != shape_numel(&a->shape)) return "the epilogue is not over a half's space";
        if ((s.n / 2) % 64) return "n / 2 is not a multiple of 64";
    } else {
        return "the epilogue reads neither the product nor its two halves";
    }
    e.m = s.m, e.n = s.n, e.k = s.k;
    e.b_mn = a->op == OP_LINEAR_DX;
    e.width = e.paired ? s.n / 2 : s.n;
    e.n_tiles = e.paired ? s.n / 2 / 64 : s.n / 128;
    e.loads = loads;
    if (out) *out = e;
    return NULL;
}

static int64_t gemm_epilogue_smem(int consumers) {
    /* the ring of A and two B slabs, each consumer's rounded tile (two slabs of 128-byte
     * rows), the mbarriers, and the slack for the 1024-byte alignment
     * (gemm_sm90::smem_bytes<2, C>) */
    return GEMM_STAGES * 4 * GEMM_SLAB + consumers * 2 * GEMM_BM * 128 + (2 * GEMM_STAGES + consumers) * 8 + 1024;
}

static GemmEpilogue epilogue_of(Gen *G) {
    Group *gr = G->gr;
    GemmEpilogue e;
    const char *why = gemm_epilogue_refusal(gr->anchor, gr->nodes + 1, gr->n_nodes - 1, G->reference, &e);
    if (why || gr->nodes[0] != gr->anchor) die("internal error: %s: %s", gr->kernel, why ? why : "the GEMM is not first");
    return e;
}

/* A persistent kernel: a block a tile at most; the runtime launches at most one a
 * multiprocessor. Without sm_90a the same kernel is the epilogue from memory, grid-stride. */
void launch_gemm_epilogue(Gen *G) {
    Group *gr = G->gr;
    GemmEpilogue e = epilogue_of(G);
    gr->tmpl = "gemm_epilogue.cu";
    gr->block = 128 * (gemm_consumers(&e) + 1);
    gr->grid = (e.m + GEMM_BM - 1) / GEMM_BM * e.n_tiles;
    gr->smem = gemm_epilogue_smem(gemm_consumers(&e));
}

int gemm_product_kept(const Graph *g, const Group *gr) {
    const Node *a = gr->anchor;
    if (gr->kind != GK_GEMM || gr->n_nodes == 1) return 1;
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *x = g->nodes[i];
        if (x->group == gr->id || x == a || node_is_view(x)) continue;
        for (int k = 0; k < x->n_in; k++) {
            const Node *in = x->in[k];
            while (node_is_view(in) && in != a) in = in->in[0];
            if (in == a) return 1;
        }
    }
    return 0;
}

void gen_gemm_epilogue(Gen *G, StrBuf *o) {
    Group *gr = G->gr;
    GemmEpilogue e = epilogue_of(G);
    const Node *a = gr->anchor;
    GemmShape s = gemm_shape(a);
    const Shape *space = &gr->nodes[gr->n_nodes - 1]->shape;
    G->uses_flash = 1; /* gemm_sm90.cuh shares flash_attention_sm90.cuh's helpers */
    G->uses_gemm = 1;

    /* the epilogue: loads into Regs r, the product as v[u][k] */
    StrBuf body = {0}, head = {0};
    const Node *prod[2] = {e.paired ? e.half[0] : a, e.paired ? e.half[1] : NULL};
    for (int u = 0; u < (e.paired ? 2 : 1); u++) {
        sb_printf(&head, "                const float v%d = v[%d][k]; // %s\n", prod[u]->id, u, node_label(prod[u]));
        G->scope[prod[u]->id] = 1;
    }
    wide_begin(G, "        ");
    G->regs = 1;
    for (int i = 1; i < gr->n_nodes; i++) emit_node(G, &body, gr->nodes[i], space, "                ");
    G->regs = 0;
    char *loads, *stores;
    wide_end(G, &loads, &stores);
    char *epi_ptrs = G->ptrs.s ? xstrdup(G->ptrs.s) : xstrdup("");
    sb_free(&G->ptrs);
    memset(G->declared, 0, (size_t)G->g->next_id);

    const char *E = dtype_cuda(a->dtype);
    char *pp = xstrdup(ptr_raw(G, a));
    const Node *rows[] = {s.a, s.b, a};
    for (int i = 0; i < 3; i++) /* tensor maps take 16-byte row strides; the stores are 16 bytes */
        if (node_row_stride(rows[i]) % 8 || rows[i]->offset % 16)
            die("internal error: %s: %s's rows are not 16-byte aligned", gr->kernel, node_label(rows[i]));

    Keys ks = {0};
    key(&ks, "NAME", "%s", gr->kernel);
    launch_keys(gr, &ks);
    key(&ks, "E", "%s", E);
    key(&ks, "REGS", "%s", G->wdecls.s ? G->wdecls.s : "");
    key(&ks, "EPI_POINTERS", "%s", epi_ptrs);
    key(&ks, "LOADS", "%s", loads);
    key(&ks, "STORE_DECLS", "%s", G->sdecls.s ? G->sdecls.s : "");
    key(&ks, "UNITS", "%d", e.paired ? 2 : 1);
    key(&ks, "HEAD", "%s", head.s ? head.s : "");
    key(&ks, "BODY", "%s", body.s ? body.s : "");
    key(&ks, "KEEP", "%d", gemm_product_kept(G->g, gr));
    key(&ks, "CONSUMERS", "%d", gemm_consumers(&e));
    key(&ks, "STORES", "%s", stores);
    key(&ks, "POINTERS", "%s", G->ptrs.s ? G->ptrs.s : "");
    key(&ks, "M", "%lld", (long long)e.m);
    key(&ks, "K", "%lld", (long long)e.k);
    key(&ks, "N_TILES", "%lld", (long long)e.n_tiles);
    key(&ks, "B_MN", "%d", e.b_mn);
    key(&ks, "W", "%lld", (long long)e.width);
    key(&ks, "PAIRED", "%d", e.paired);
    key(&ks, "PROD", "%s", pp);
    key(&ks, "LDP", "%lld", (long long)node_row_stride(a));
    render(o, gr->tmpl, &ks);
    sb_free(&body), sb_free(&head), sb_free(&G->wdecls), sb_free(&G->sdecls);
    free(loads), free(stores), free(epi_ptrs), free(pp);
}
