/* codegen_anchors: fills each anchor op's template. The group's other nodes split into a
 * prologue (computed per element of the anchor's input, before the anchor), an epilogue
 * (computed per element of its output, from the anchor's value) and, where the group has a
 * row sum, the sum's epilogue (per element of the sum, once it is complete). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_internal.h"

#define B(i) (1u << (i))

typedef struct Split {
    Node **pro, **epi, **sum;
    int n_pro, n_epi, n_sum, cap_pro, cap_epi, cap_sum;
    char *in_array; /* by node id: a prologue value the epilogue reads, kept in pv<id>[k] */
} Split;

static Split split_group(Gen *G) {
    Group *gr = G->gr;
    Split s = {0};
    s.in_array = xcalloc((size_t)G->g->next_id, 1);
    for (int i = 0; i < gr->n_nodes; i++) {
        Node *n = gr->nodes[i];
        if (n == gr->anchor || n == gr->row_sum || n->op == OP_PART) continue;
        if (gr->row_sum && depends_on(n, gr->row_sum, gr)) vec_push(s.sum, s.n_sum, s.cap_sum, n);
        else if (depends_on(n, gr->anchor, gr)) vec_push(s.epi, s.n_epi, s.cap_epi, n);
        else vec_push(s.pro, s.n_pro, s.cap_pro, n);
    }
    for (int i = 0; i < s.n_epi; i++)
        for (int k = 0; k < s.epi[i]->n_in; k++) {
            const Node *x = s.epi[i]->in[k];
            if (x->group == gr->id && x != gr->anchor && !depends_on(x, gr->anchor, gr)) s.in_array[x->id] = 1;
        }
    return s;
}

static void free_split(Split *s) {
    free(s->pro);
    free(s->epi);
    free(s->sum);
    free(s->in_array);
}

/* `slot`: the index of the element in the thread's pv arrays ("k", or "c * 8 + k" when wide) */
/* The prologue over `pro_space` and the epilogue over `epi_space` can run 8 elements at a
 * time, and so can the anchor's inputs the template reads through operand(). */
static int split_wide(const Gen *G, const Split *s, const Shape *pro_space, const Shape *epi_space, unsigned read_inputs) {
    const Node *a = G->gr->anchor;
    if ((G->reference & REF_WIDE) || !wide_ok(G, s->pro, s->n_pro, pro_space) || !wide_ok(G, s->epi, s->n_epi, epi_space)) return 0;
    if (shape_numel(&a->shape) % 8 || !wide_operand(a)) return 0;
    for (int k = 0; k < a->n_in; k++) {
        const Node *x = a->in[k];
        if ((read_inputs & (1u << k)) && x->group != G->gr->id && !wide_operand(x)) return 0;
    }
    return 1;
}

static char *prologue(Gen *G, Split *s, const Shape *space, const char *ind, const char *slot) {
    StrBuf o = {0};
    for (int i = 0; i < s->n_pro; i++) {
        emit_node(G, &o, s->pro[i], space, ind);
        if (s->in_array[s->pro[i]->id]) sb_printf(&o, "%spv%d[%s] = v%d;\n", ind, s->pro[i]->id, slot, s->pro[i]->id);
    }
    return o.s ? o.s : xstrdup("");
}

static char *arrays(Gen *G, Split *s, int per) {
    StrBuf o = {0};
    for (int i = 0; i < s->n_pro; i++)
        if (s->in_array[s->pro[i]->id]) sb_printf(&o, "    %s pv%d[%d];\n", G->R, s->pro[i]->id, per);
    return o.s ? o.s : xstrdup("");
}

/* The epilogue: the anchor's value is v<anchor id>, already declared by the template. */
static char *epilogue(Gen *G, Split *s, const char *ind, const char *slot) {
    StrBuf o = {0};
    Node *a = G->gr->anchor;
    for (int i = 0; i < s->n_pro; i++) G->scope[s->pro[i]->id] = 0;
    for (int i = 0; i < s->n_pro; i++)
        if (s->in_array[s->pro[i]->id]) {
            sb_printf(&o, "%sconst %s v%d = pv%d[%s];\n", ind, G->R, s->pro[i]->id, s->pro[i]->id, slot);
            G->scope[s->pro[i]->id] = 1;
        }
    finish_value(G, &o, a, ind);
    for (int i = 0; i < s->n_epi; i++) emit_node(G, &o, s->epi[i], &a->shape, ind);
    return o.s ? o.s : xstrdup("");
}

static Node *part_of(const Group *gr, int index) {
    for (int i = 0; i < gr->n_nodes; i++)
        if (gr->nodes[i]->op == OP_PART && gr->nodes[i]->in[0] == gr->anchor && gr->nodes[i]->a.index == index)
            return gr->nodes[i];
    return NULL;
}

static Node *need_part(const Group *gr, int index) {
    Node *n = part_of(gr, index);
    if (!n) die("internal error: %s has no part %d", gr->kernel, index);
    return n;
}

static void common(Gen *G, Keys *ks) {
    key(ks, "NAME", "%s", G->gr->kernel);
    key_optional(ks, "R", G->R); /* the register type: the tensor-core kernels have their own */
}

static void pointers(Gen *G, Keys *ks) { key(ks, "POINTERS", "%s", G->ptrs.s ? G->ptrs.s : ""); }

/* Attention and its two backward kernels. The flash kernels (tensor cores, f16 or bf16
 * tensors, head_dim a multiple of 16 up to 128) are the default; the f32 and f64 policies,
 * other head sizes and --reference-kernels take the exact kernels, one block per row. The
 * tile sizes are decided here and passed to the templates, which derive everything from
 * them; the shared memory they need is the sum of their tiles. */
static int flash_fits(const Gen *G, const Node *a, int64_t hd) {
    DType c = a->compute;
    if ((G->reference & REF_ATTENTION) || (c != DT_F16 && c != DT_BF16) || hd % 16 || hd > 128) return 0;
    for (int k = 0; k < a->n_in; k++)
        if ((op_info[a->op].float_in & (1u << k)) && a->in[k]->dtype != c) return 0;
    for (int k = 0; k < a->n_in; k++)
        if (!(op_info[a->op].float_in & (1u << k)) && a->in[k]->dtype != DT_F32) return 0; /* lse, dsum */
    return a->dtype == c;
}

static const char *attention(Gen *G, Keys *ks, Node *a) {
    Group *gr = G->gr;
    int fwd = a->op == OP_ATTENTION, dq = a->op == OP_ATTENTION_BACKWARD_DQ;
    const Shape *q = &a->in[fwd ? 0 : 1]->shape;
    int64_t bsz = q->dim[0], t = q->dim[1], hd = q->dim[2] / a->a.heads, pitch = hd + 8;
    int flash = flash_fits(G, a, hd);
    if (fwd && flash && part_of(gr, 1) && part_of(gr, 1)->dtype != DT_F32) flash = 0; /* lse */
    if (dq && flash && need_part(gr, 1)->dtype != DT_F32) flash = 0;                    /* dsum */
    if (!fwd && !dq && flash && need_part(gr, 1)->dtype != a->dtype) flash = 0;          /* dv */
    G->uses_flash |= flash;
    char *sc = literal(G, 1.0 / sqrt((double)hd));
    key(ks, "T", "%lld", (long long)t);
    key(ks, "H", "%d", a->a.heads);
    key(ks, "KV", "%d", a->a.kv_heads);
    key(ks, "HD", "%lld", (long long)hd);
    key(ks, "SCALE", "%s", sc);
    key(ks, "CAUSAL", "%d", a->a.causal ? 1 : 0);
    if (flash) key(ks, "E", "%s", dtype_cuda(a->compute));
    size_t rsize = G->reg_f64 ? 8 : 4;
    const char *tmpl;
    gr->block = 128;
    if (fwd) {
        key(ks, "Q", "%s", ptr(G, a->in[0]));
        key(ks, "K", "%s", ptr(G, a->in[1]));
        key(ks, "V", "%s", ptr(G, a->in[2]));
        key(ks, "O", "%s", ptr(G, a));
        Node *lse = part_of(gr, 1);
        if (flash) {
            /* one 16-row tile a warp: 128 registers a thread, so 4 blocks (16 warps) share
             * an SM and hide each other's latencies (two tiles a warp took 254 registers, 2
             * blocks an SM, and measured 10% slower) */
            int64_t mt = 1, br = 64 * mt, bc = 64;
            key(ks, "MIN_BLOCKS", "%d", hd <= 64 ? 4 : 1);
            key(ks, "LSE", "%s", lse ? ptr(G, lse) : "(float *)0");
            key(ks, "MT", "%lld", (long long)mt);
            key(ks, "BR", "%lld", (long long)br);
            key(ks, "BC", "%lld", (long long)bc);
            gr->grid = bsz * a->a.heads, gr->grid_y = (t + br - 1) / br;
            gr->smem = (br + 4 * bc) * pitch * 2;
            tmpl = "attention_flash.cu";
        } else {
            if (lse) key(ks, "STORE_LSE", "st(%s, bh * %lld + i, m + mmc_log(l));", ptr(G, lse), (long long)t);
            else key(ks, "STORE_LSE", "{}");
            gr->grid = bsz * a->a.heads * t;
            gr->smem = (int64_t)((t + hd) * rsize);
            tmpl = "attention.cu";
        }
    } else if (dq) {
        key(ks, "DO", "%s", ptr(G, a->in[0]));
        key(ks, "Q", "%s", ptr(G, a->in[1]));
        key(ks, "K", "%s", ptr(G, a->in[2]));
        key(ks, "V", "%s", ptr(G, a->in[3]));
        key(ks, "O", "%s", ptr(G, a->in[4]));
        key(ks, "LSE", "%s", ptr(G, a->in[5]));
        key(ks, "DQ", "%s", ptr(G, a));
        key(ks, "DSUM", "%s", ptr(G, need_part(gr, 1)));
        if (flash) {
            /* key tiles of 32: up to 64 wide heads then fit 4 blocks an SM in registers
             * (128 each) without spilling; wider ones take what they need */
            int64_t bc = 32;
            key(ks, "BC", "%lld", (long long)bc);
            key(ks, "MIN_BLOCKS", "%d", hd <= 64 ? 4 : 1);
            gr->grid = bsz * a->a.heads, gr->grid_y = (t + 63) / 64;
            gr->smem = (2 * 64 + 4 * bc) * pitch * 2 + 64 * 4;
            tmpl = "attention_backward_dq_flash.cu";
        } else {
            gr->grid = bsz * a->a.heads * t;
            gr->smem = (int64_t)((t + 2 * hd) * rsize);
            tmpl = "attention_backward_dq.cu";
        }
    } else {
        key(ks, "DO", "%s", ptr(G, a->in[0]));
        key(ks, "Q", "%s", ptr(G, a->in[1]));
        key(ks, "K", "%s", ptr(G, a->in[2]));
        key(ks, "V", "%s", ptr(G, a->in[3]));
        key(ks, "LSE", "%s", ptr(G, a->in[4]));
        key(ks, "DSUM", "%s", ptr(G, a->in[5]));
        key(ks, "DK", "%s", ptr(G, a));
        key(ks, "DV", "%s", ptr(G, need_part(gr, 1)));
        if (flash) {
            /* under eager rounding each query head's share of dk and dv is rounded before the
             * group's sum, as PyTorch rounds what SDPA returns for each repeated kv head */
            /* query tiles of 64 up to 64 wide heads: 218 registers, 2 blocks an SM (tiles of
             * 32 fit 3 blocks in 168 registers, and measured slower) */
            int64_t bq = hd <= 64 ? 64 : 32, round_heads = G->eager && a->a.heads > a->a.kv_heads;
            key(ks, "BQ", "%lld", (long long)bq);
            key(ks, "ROUND_HEADS", "%lld", (long long)round_heads);
            gr->grid = bsz * a->a.kv_heads, gr->grid_y = (t + 63) / 64;
            /* the k and v tiles, whose bytes hold the rounded shares once k and v sit in
             * registers (hd <= 64), then the q and dO tiles and the stats */
            int64_t kv = 2 * 64 * pitch * 2, sums = round_heads ? 2 * hd / 8 * 4 * 128 * 4 : 0;
            int64_t head = round_heads && hd <= 64 ? (kv > sums ? kv : sums) : kv + sums;
            gr->smem = head + 4 * bq * pitch * 2 + 4 * bq * 4;
            tmpl = "attention_backward_dkv_flash.cu";
        } else {
            gr->grid = bsz * a->a.kv_heads * t;
            gr->smem = (int64_t)((2 * t + 2 * hd) * rsize);
            tmpl = "attention_backward_dkv.cu";
        }
    }
    pointers(G, ks);
    free(sc);
    return tmpl;
}

/* The row sum's epilogue: the sum's value is v<id> of the group's row_sum, per element of
 * the sum, in a section of its own (nothing computed per row is in scope there). */
static char *sum_epilogue(Gen *G, Split *s, const char *ind) {
    StrBuf o = {0};
    Group *gr = G->gr;
    for (int i = 0; i < gr->n_nodes; i++) G->scope[gr->nodes[i]->id] = 0;
    finish_value(G, &o, gr->row_sum, ind);
    for (int i = 0; i < s->n_sum; i++) emit_node(G, &o, s->sum[i], &gr->row_sum->shape, ind);
    return o.s ? o.s : xstrdup("");
}

/* RMSNorm and its backward (rms_normalize_rows.cu), with the group's row sum if it has one.
 * A row takes the smallest power-of-two team of threads that keeps at most 16 of its values
 * in a thread (2 runs of 8 when wide), and blocks of at least 256 threads take several rows
 * at once. With a row sum, about 256 blocks loop over the rows, so that the table of their
 * partial sums stays small for the last block to add up. */
static const char *rms_rows(Gen *G, Keys *ks, Split *s, const char *va) {
    Group *gr = G->gr;
    Node *a = gr->anchor, *rsum = gr->row_sum;
    const Shape *in = &a->in[0]->shape;
    int64_t d = in->dim[in->rank - 1], rows = shape_numel(in) / d;
    int bwd = a->op == OP_RMS_NORMALIZE_BACKWARD;
    int wide = d % 8 == 0 && split_wide(G, s, in, &a->shape, bwd ? B(0) | B(1) : B(0));
    if (wide && rsum && rsum->in[0]->group != gr->id && !wide_operand(rsum->in[0])) wide = 0;
    int sum_wide = wide && rsum && wide_ok(G, s->sum, s->n_sum, &rsum->shape);
    int64_t w = wide ? 8 : 1, runs = d / w, most = wide ? 2 : 16, tpr = 1;
    while (tpr < 1024 && tpr * most < runs) tpr *= 2;
    int64_t ch = (runs + tpr - 1) / tpr, threads = tpr > 256 ? tpr : 256, teams = threads / tpr;
    int64_t blocks = (rows + teams - 1) / teams, grid = blocks, iters = 1;
    if (rsum) {
        iters = (blocks + 255) / 256;
        grid = (blocks + iters - 1) / iters;
    }
    /* the partial table's rows are added in groups of about sqrt(grid) blocks, then the groups */
    int64_t group = 1;
    while (group * group < grid) group++;
    int64_t groups = (grid + group - 1) / group;
    int64_t lanes = runs >= threads ? 1 : threads / runs, part = (teams > lanes ? teams : lanes) * d;
    const char *ind = "                    ";
    char *slot = xasprintf("c * %lld + k", (long long)w);
    char *loads = NULL, *decls = NULL, *ps = NULL, *es = NULL, *sl = NULL, *ss = NULL, *none = NULL;
    /* wide: one section over the runs, whose loads (the prologue's and the epilogue's) all
     * come first in the template */
    if (wide) wide_begin(G, "                "), G->runs = (int)ch;
    char *pro = prologue(G, s, in, ind, slot);
    char *x = operand(G, a->in[bwd ? 1 : 0], in);
    char *dy = bwd ? operand(G, a->in[0], in) : xstrdup("0");
    char *rx = rsum ? operand(G, rsum->in[0], in) : xstrdup("0");
    if (wide) ps = wide_take_stores(G);
    char *epi = epilogue(G, s, ind, slot);
    if (wide) {
        es = wide_take_stores(G);
        decls = G->wdecls.s ? xstrdup(G->wdecls.s) : xstrdup("");
        wide_end(G, &loads, &none);
        G->runs = 0;
    }
    if (sum_wide) wide_begin(G, "            ");
    char *sepi = rsum ? sum_epilogue(G, s, "                ") : xstrdup("");
    if (sum_wide) wide_end(G, &sl, &ss);
    char *eps = literal(G, a->a.eps);
    char *arr = arrays(G, s, (int)(ch * w));
    Node *factor = bwd ? NULL : part_of(gr, 1);
    if (factor && factor->materialized && factor->buffer >= 0)
        key(ks, "STORE_FACTOR", "if (live && t == 0) st(%s, row, r);", ptr(G, factor));
    else key(ks, "STORE_FACTOR", "{}");
    key(ks, "BACKWARD", "%d", bwd);
    key(ks, "ROW_SUM", "%d", rsum != NULL);
    key(ks, "THREADS", "%lld", (long long)threads);
    key(ks, "TPR", "%lld", (long long)tpr);
    key(ks, "TEAMS", "%lld", (long long)teams);
    key(ks, "D", "%lld", (long long)d);
    key(ks, "W", "%lld", (long long)w);
    key(ks, "CH", "%lld", (long long)ch);
    key(ks, "ROWS", "%lld", (long long)rows);
    key(ks, "ITERS", "%lld", (long long)iters);
    key(ks, "GRID", "%lld", (long long)grid);
    key(ks, "EPS", "%s", eps);
    key(ks, "ARRAYS", "%s", arr);
    key(ks, "PROLOGUE", "%s", pro);
    key(ks, "X", "%s", x);
    key(ks, "DY", "%s", dy);
    key(ks, "ROW_SUM_X", "%s", rx);
    key(ks, "VA", "%s", va);
    key(ks, "EPILOGUE", "%s", epi);
    key(ks, "FULL", "%d", d == tpr * ch * w && rows == grid * teams * iters);
    key(ks, "LOADS", "%s", loads ? loads : "");
    key(ks, "DECLS", "%s", decls ? decls : "");
    key(ks, "PRO_STORES", "%s", ps ? ps : ""), key(ks, "EPI_STORES", "%s", es ? es : "");
    key(ks, "SUM_PART", "%lld", (long long)part);
    key(ks, "SUM_LANES", "%lld", (long long)lanes);
    key(ks, "GROUP", "%lld", (long long)group);
    key(ks, "GROUPS", "%lld", (long long)groups);
    key(ks, "SUM_VA", "v%d", rsum ? rsum->id : 0);
    key(ks, "SUM_EPILOGUE", "%s", sepi);
    key(ks, "SUM_EPI_LOADS", "%s", sl ? sl : ""), key(ks, "SUM_EPI_STORES", "%s", ss ? ss : "");
    pointers(G, ks);
    gr->grid = grid, gr->block = threads;
    free(slot), free(pro), free(x), free(dy), free(rx), free(epi), free(sepi), free(eps), free(arr);
    free(loads), free(decls), free(none), free(ps), free(es), free(sl), free(ss);
    return "rms_normalize_rows.cu";
}

void gen_anchor(Gen *G, StrBuf *o) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    Split s = split_group(G);
    Keys ks = {0};
    common(G, &ks);
    char *va = xasprintf("v%d", a->id);
    const char *tmpl = NULL;
    switch (a->op) {
    case OP_RMS_NORMALIZE:
    case OP_RMS_NORMALIZE_BACKWARD: tmpl = rms_rows(G, &ks, &s, va); break;
    case OP_SUM_TO:
    case OP_SUM_ALL: {
        const Shape *in = &a->in[0]->shape;
        int64_t c = shape_numel(&a->shape), m = shape_numel(in) / c;
        int split = a->op == OP_SUM_TO && !(G->reference & REF_SUM_TO);
        int wide = split && c % 8 == 0 && split_wide(G, &s, in, &a->shape, B(0));
        char *pl = NULL, *ps = NULL, *el = NULL, *es = NULL;
        if (wide) wide_begin(G, "            ");
        char *pro = prologue(G, &s, in, wide ? "                " : a->op == OP_SUM_TO ? "            " : "        ", "k");
        char *x = operand(G, a->in[0], in);
        if (wide) wide_end(G, &pl, &ps), wide_begin(G, "        ");
        char *epi = epilogue(G, &s, wide ? "            " : "        ", "k");
        if (wide) wide_end(G, &el, &es);
        key(&ks, "PROLOGUE", "%s", pro);
        key(&ks, "X", "%s", x);
        key(&ks, "VA", "%s", va);
        key(&ks, "EPILOGUE", "%s", epi);
        if (split) {
            /* strips of 32 columns (256 when wide: blocks of 8 times the work) times chunks of
             * rows: about 2048 blocks (512 wide), at least 8 rows each */
            int64_t width = wide ? 256 : 32, strips = (c + width - 1) / width;
            int64_t chunks = ((wide ? 512 : 2048) + strips - 1) / strips;
            int64_t most = (m + 7) / 8;
            if (chunks > most) chunks = most;
            if (chunks < 1) chunks = 1;
            int64_t rows = (m + chunks - 1) / chunks;
            chunks = (m + rows - 1) / rows;
            key(&ks, "M", "%lld", (long long)m);
            key(&ks, "C", "%lld", (long long)c);
            key(&ks, "ROWS", "%lld", (long long)rows);
            key(&ks, "CHUNKS", "%lld", (long long)chunks);
            key(&ks, "STRIPS", "%lld", (long long)strips);
            if (wide) {
                key(&ks, "PRO_LOADS", "%s", pl), key(&ks, "PRO_STORES", "%s", ps);
                key(&ks, "EPI_LOADS", "%s", el), key(&ks, "EPI_STORES", "%s", es);
            }
            gr->grid = strips, gr->grid_y = chunks, gr->block = 256;
            tmpl = wide ? "sum_to_split_wide.cu" : "sum_to_split.cu";
        } else if (a->op == OP_SUM_TO) {
            key(&ks, "M", "%lld", (long long)m);
            key(&ks, "C", "%lld", (long long)c);
            gr->grid = (c + 31) / 32, gr->block = 256;
            tmpl = "sum_to.cu";
        } else {
            key(&ks, "N", "%lld", (long long)shape_numel(in));
            gr->grid = 1, gr->block = 256;
            tmpl = "sum_all.cu";
        }
        pointers(G, &ks);
        free(pro), free(x), free(epi), free(pl), free(ps), free(el), free(es);
        break;
    }
    case OP_EMBEDDING: {
        int64_t d = a->shape.dim[a->shape.rank - 1], n = shape_numel(&a->shape);
        char *w = xstrdup(ptr(G, a->in[0])), *ids = xstrdup(ptr(G, a->in[1]));
        char *epi = epilogue(G, &s, "        ", "k");
        key(&ks, "N", "%lld", (long long)n);
        key(&ks, "D", "%lld", (long long)d);
        key(&ks, "ROWS", "%lld", (long long)(n / d));
        key(&ks, "W", "%s", w);
        key(&ks, "IDS", "%s", ids);
        key(&ks, "VA", "%s", va);
        key(&ks, "EPILOGUE", "%s", epi);
        pointers(G, &ks);
        gr->grid = blocks_for(n, 256), gr->block = 256;
        tmpl = "embedding.cu";
        free(w), free(ids), free(epi);
        break;
    }
    case OP_EMBEDDING_SORT: {
        int64_t rows = shape_numel(&a->in[0]->shape), v = a->a.vocab, passes = 1;
        while (passes < 4 && (v - 1) >> (8 * passes)) passes++;
        key(&ks, "IDS", "%s", ptr(G, a->in[0]));
        key(&ks, "ORDER", "%s", ptr(G, a));
        key(&ks, "START", "%s", ptr(G, need_part(gr, 1)));
        key(&ks, "ROWS", "%lld", (long long)rows);
        key(&ks, "V", "%lld", (long long)v);
        key(&ks, "PASSES", "%lld", (long long)passes);
        /* the digit counts, and the id counts when they fit beside them, in shared memory */
        int counts_shared = (256 * 32 + v + 1) * 4 <= 160 * 1024;
        key(&ks, "COUNTS_SHARED", "%d", counts_shared);
        pointers(G, &ks);
        gr->grid = 1, gr->block = 1024;
        gr->smem = (256 * 32 + (counts_shared ? v + 1 : 0)) * 4;
        tmpl = "embedding_sort.cu";
        break;
    }
    case OP_EMBEDDING_BACKWARD: {
        int64_t d = a->shape.dim[1], rows = shape_numel(&a->in[1]->shape), v = a->shape.dim[0];
        char *dy = xstrdup(ptr(G, a->in[0])), *ids = xstrdup(ptr(G, a->in[1]));
        int sorted = !(G->reference & REF_EMBEDDING);
        char *epi = epilogue(G, &s, sorted ? "                    " : "            ", "k");
        key(&ks, "D", "%lld", (long long)d);
        key(&ks, "ROWS", "%lld", (long long)rows);
        key(&ks, "PER", "%lld", (long long)((d + 255) / 256));
        key(&ks, "DY", "%s", dy);
        key(&ks, "IDS", "%s", ids);
        key(&ks, "VA", "%s", va);
        key(&ks, "EPILOGUE", "%s", epi);
        if (!sorted) {
            gr->grid = v, gr->block = 256;
            tmpl = "embedding_backward.cu";
        } else {
            /* chunks of 64 sorted rows, then one block per 8 ids for the ids no row has */
            int64_t k = 64, chunks = (rows + k - 1) / k, empty = (v + 7) / 8;
            key(&ks, "ORDER", "%s", ptr(G, a->in[2]));
            key(&ks, "START", "%s", ptr(G, a->in[3]));
            key(&ks, "V", "%lld", (long long)v);
            key(&ks, "K", "%lld", (long long)k);
            key(&ks, "CHUNKS", "%lld", (long long)chunks);
            key(&ks, "EMPTY", "%lld", (long long)empty);
            gr->grid = chunks + empty, gr->block = 256;
            tmpl = "embedding_backward_sorted.cu";
        }
        pointers(G, &ks);
        free(dy), free(ids), free(epi);
        break;
    }
    case OP_ROPE:
    case OP_ROPE_BACKWARD: {
        const Shape *x = &a->shape;
        int64_t row = x->dim[2], hd = row / a->a.heads;
        /* eight elements a thread when they lie in one half of a head, in both cos and sin */
        int wide = hd % 16 == 0 && !(G->reference & REF_WIDE) && wide_operand(a->in[0]) && wide_operand(a->in[1]) &&
                   wide_operand(a->in[2]) && split_wide(G, &s, x, x, 0);
        char *px = xstrdup(ptr(G, a->in[0])), *pc = xstrdup(ptr(G, a->in[1])), *ps = xstrdup(ptr(G, a->in[2]));
        char *el = NULL, *es = NULL;
        if (wide) wide_begin(G, "        ");
        char *epi = epilogue(G, &s, wide ? "            " : "        ", "k");
        if (wide) wide_end(G, &el, &es);
        key(&ks, "N", "%lld", (long long)shape_numel(x));
        key(&ks, "HD", "%lld", (long long)hd);
        key(&ks, "HALF", "%lld", (long long)(hd / 2));
        key(&ks, "ROW", "%lld", (long long)row);
        key(&ks, "T", "%lld", (long long)x->dim[1]);
        key(&ks, a->op == OP_ROPE ? "X" : "DY", "%s", px);
        key(&ks, "COS", "%s", pc);
        key(&ks, "SIN", "%s", ps);
        key(&ks, "RDC", "%s", rounder(G, a->compute));
        if (a->op == OP_ROPE_BACKWARD) key(&ks, "RDX", "%s", rounder(G, a->a.to));
        key(&ks, "VA", "%s", va);
        key(&ks, "EPILOGUE", "%s", epi);
        if (wide) key(&ks, "EPI_LOADS", "%s", el), key(&ks, "EPI_STORES", "%s", es);
        pointers(G, &ks);
        gr->grid = blocks_for(shape_numel(x) / (wide ? 8 : 1), 256), gr->block = 256;
        tmpl = a->op == OP_ROPE ? (wide ? "rope_wide.cu" : "rope.cu") : (wide ? "rope_backward_wide.cu" : "rope_backward.cu");
        free(px), free(pc), free(ps), free(epi), free(el), free(es);
        break;
    }
    case OP_ATTENTION:
    case OP_ATTENTION_BACKWARD_DQ:
    case OP_ATTENTION_BACKWARD_DKV: tmpl = attention(G, &ks, a); break;
    case OP_CROSS_ENTROPY: {
        const Shape *x = &a->in[0]->shape;
        int64_t v = x->dim[x->rank - 1];
        int wide = v % 8 == 0 && !(G->reference & REF_WIDE) && wide_operand(a->in[0]);
        key(&ks, "V", "%lld", (long long)v);
        key(&ks, "ROWS", "%lld", (long long)(shape_numel(x) / v));
        key(&ks, "IGNORE", "%lld", (long long)a->a.ignore_index);
        key(&ks, "X", "%s", ptr(G, a->in[0]));
        key(&ks, "LABELS", "%s", ptr(G, a->in[1]));
        key(&ks, "STATS", "%s", ptr(G, need_part(gr, 1)));
        key(&ks, "COUNT", "%s", ptr(G, need_part(gr, 2)));
        key(&ks, "LOSS", "%s", ptr(G, a));
        key(&ks, "RDC", "%s", rounder(G, a->compute));
        pointers(G, &ks);
        gr->grid = shape_numel(x) / v, gr->block = 256;
        if (wide) gr->grid = (gr->grid + 7) / 8; /* a warp per row */
        tmpl = wide ? "cross_entropy_wide.cu" : "cross_entropy.cu";
        break;
    }
    case OP_CROSS_ENTROPY_BACKWARD: {
        const Shape *x = &a->shape;
        int64_t v = x->dim[x->rank - 1];
        int wide = v % 8 == 0 && wide_operand(a->in[1]) && split_wide(G, &s, x, x, 0);
        char *el = NULL, *es = NULL;
        if (wide) wide_begin(G, "        ");
        char *epi = epilogue(G, &s, wide ? "            " : "        ", "k");
        if (wide) wide_end(G, &el, &es);
        key(&ks, "V", "%lld", (long long)v);
        key(&ks, "IGNORE", "%lld", (long long)a->a.ignore_index);
        key(&ks, "DLOSS", "%s", ptr(G, a->in[0]));
        key(&ks, "X", "%s", ptr(G, a->in[1]));
        key(&ks, "LABELS", "%s", ptr(G, a->in[2]));
        key(&ks, "STATS", "%s", ptr(G, a->in[3]));
        key(&ks, "COUNT", "%s", ptr(G, a->in[4]));
        key(&ks, "RDC", "%s", rounder(G, a->compute));
        key(&ks, "VA", "%s", va);
        key(&ks, "EPILOGUE", "%s", epi);
        if (wide) key(&ks, "EPI_LOADS", "%s", el), key(&ks, "EPI_STORES", "%s", es);
        pointers(G, &ks);
        gr->grid = shape_numel(x) / v, gr->block = 256;
        tmpl = wide ? "cross_entropy_backward_wide.cu" : "cross_entropy_backward.cu";
        free(epi), free(el), free(es);
        break;
    }
    default: die("internal error: no template for anchor %s", op_info[a->op].name);
    }
    render(o, tmpl, &ks);
    free(va);
    free_split(&s);
}
