/* codegen_anchors: each anchor op's two functions, which its row in the op table points to:
 * launch_<op> picks the template and the launch shape and tiles (the launch step, before any
 * code is written), gen_<op> fills the template's other holes. The group's other nodes split
 * into a prologue (computed per element of the anchor's input, before the anchor), an
 * epilogue (computed per element of its output, from the anchor's value) and, where the group
 * has a row sum, the sum's epilogue (per element of the sum, once it is complete). The
 * attention kernels are in codegen_attention.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_internal.h"

#define B(i) (1u << (i))

Split split_group(Gen *G) {
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

void free_split(Split *s) {
    free(s->pro);
    free(s->epi);
    free(s->sum);
    free(s->in_array);
}

/* `slot`: the index of the element in the thread's pv arrays ("k", or "c * 8 + k" when wide) */
/* The prologue over `pro_space` and the epilogue over `epi_space` can run 8 elements at a
 * time, and so can the anchor's inputs the template reads through operand(). */
int split_wide(const Gen *G, const Split *s, const Shape *pro_space, const Shape *epi_space, unsigned read_inputs) {
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

Node *part_of(const Group *gr, int index) {
    for (int i = 0; i < gr->n_nodes; i++)
        if (gr->nodes[i]->op == OP_PART && gr->nodes[i]->in[0] == gr->anchor && gr->nodes[i]->a.index == index)
            return gr->nodes[i];
    return NULL;
}

Node *need_part(const Group *gr, int index) {
    Node *n = part_of(gr, index);
    if (!n) die("internal error: %s has no part %d", gr->kernel, index);
    return n;
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

/* ---- RMSNorm and its backward (rms_normalize_rows.cu), with the group's row sum if it has
 * one. A row takes the smallest power-of-two team of threads that keeps at most 16 of its
 * values in a thread (2 runs of 8 when wide), and blocks of at least 256 threads take several
 * rows at once. With a row sum, about 512 blocks loop over the rows, so that the table of
 * their partial sums stays small for the last block to add up; their threads keep one run of 8
 * (the backward holds several tensors' runs at once), so that four blocks fit an SM and keep
 * twice the loads in flight (H200, ncu: the MiniMind b64 norm backward 63 -> 55 us). */
void launch_rms_rows(Gen *G, const Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor, *rsum = gr->row_sum;
    const Shape *in = &a->in[0]->shape;
    int64_t d = in->dim[in->rank - 1], rows = shape_numel(in) / d;
    int bwd = a->op == OP_RMS_NORMALIZE_BACKWARD;
    int wide = d % 8 == 0 && split_wide(G, s, in, &a->shape, bwd ? B(0) | B(1) : B(0));
    if (wide && rsum && rsum->in[0]->group != gr->id && !wide_operand(rsum->in[0])) wide = 0;
    int64_t w = wide ? 8 : 1, runs = d / w, most = wide ? (rsum ? 1 : 2) : 16, tpr = 1;
    while (tpr < 1024 && tpr * most < runs) tpr *= 2;
    int64_t ch = (runs + tpr - 1) / tpr, threads = tpr > 256 ? tpr : 256, teams = threads / tpr;
    int64_t blocks = (rows + teams - 1) / teams, grid = blocks, iters = 1;
    if (rsum) {
        iters = (blocks + 511) / 512;
        grid = (blocks + iters - 1) / iters;
    }
    /* the partial table's rows are added in groups of about sqrt(grid) blocks, then the groups */
    int64_t group = 1;
    while (group * group < grid) group++;
    int64_t groups = (grid + group - 1) / group;
    int64_t lanes = runs >= threads ? 1 : threads / runs, part = (teams > lanes ? teams : lanes) * d;
    gr->tmpl = "rms_normalize_rows.cu", gr->wide = wide;
    gr->grid = grid, gr->block = threads;
    tile(gr, "TPR", tpr), tile(gr, "TEAMS", teams), tile(gr, "W", w), tile(gr, "CH", ch), tile(gr, "ITERS", iters);
    tile(gr, "GRID", grid), tile(gr, "FULL", d == tpr * ch * w && rows == grid * teams * iters);
    tile(gr, "SUM_PART", part), tile(gr, "SUM_LANES", lanes), tile(gr, "GROUP", group), tile(gr, "GROUPS", groups);
}

void gen_rms_rows(Gen *G, Keys *ks, Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor, *rsum = gr->row_sum;
    const Shape *in = &a->in[0]->shape;
    int64_t d = in->dim[in->rank - 1], rows = shape_numel(in) / d;
    int bwd = a->op == OP_RMS_NORMALIZE_BACKWARD, wide = gr->wide;
    int sum_wide = wide && rsum && wide_ok(G, s->sum, s->n_sum, &rsum->shape);
    int64_t w = tile_of(gr, "W"), ch = tile_of(gr, "CH");
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
    key(ks, "D", "%lld", (long long)d);
    key(ks, "ROWS", "%lld", (long long)rows);
    key(ks, "EPS", "%s", eps);
    key(ks, "ARRAYS", "%s", arr);
    key(ks, "PROLOGUE", "%s", pro);
    key(ks, "X", "%s", x);
    key(ks, "DY", "%s", dy);
    key(ks, "ROW_SUM_X", "%s", rx);
    key(ks, "VA", "v%d", a->id);
    key(ks, "EPILOGUE", "%s", epi);
    key(ks, "LOADS", "%s", loads ? loads : "");
    key(ks, "DECLS", "%s", decls ? decls : "");
    key(ks, "PRO_STORES", "%s", ps ? ps : ""), key(ks, "EPI_STORES", "%s", es ? es : "");
    key(ks, "SUM_VA", "v%d", rsum ? rsum->id : 0);
    key(ks, "SUM_EPILOGUE", "%s", sepi);
    key(ks, "SUM_EPI_LOADS", "%s", sl ? sl : ""), key(ks, "SUM_EPI_STORES", "%s", ss ? ss : "");
    free(slot), free(pro), free(x), free(dy), free(rx), free(epi), free(sepi), free(eps), free(arr);
    free(loads), free(decls), free(none), free(ps), free(es), free(sl), free(ss);
}

/* ---- sum_to over the leading dims (split over the whole GPU, or one block per 32 columns
 * under --reference-kernels sum_to) and sum_all (one block) */
void launch_sum(Gen *G, const Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    const Shape *in = &a->in[0]->shape;
    int64_t c = shape_numel(&a->shape), m = shape_numel(in) / c;
    int split = a->op == OP_SUM_TO && !(G->reference & REF_SUM_TO);
    gr->wide = split && c % 8 == 0 && split_wide(G, s, in, &a->shape, B(0));
    gr->block = 256;
    if (a->op == OP_SUM_TO) tile(gr, "LANES", gr->block / 32); /* a warp a row lane */
    if (split) {
        /* strips of 32 columns (256 when wide: blocks of 8 times the work) times chunks of
         * rows: about 2048 blocks (512 wide), at least 8 rows each */
        int64_t width = gr->wide ? 256 : 32, strips = (c + width - 1) / width;
        int64_t chunks = ((gr->wide ? 512 : 2048) + strips - 1) / strips;
        int64_t most = (m + 7) / 8;
        if (chunks > most) chunks = most;
        if (chunks < 1) chunks = 1;
        int64_t rows = (m + chunks - 1) / chunks;
        chunks = (m + rows - 1) / rows;
        tile(gr, "ROWS", rows), tile(gr, "CHUNKS", chunks), tile(gr, "STRIPS", strips);
        gr->grid = strips, gr->grid_y = chunks;
        gr->tmpl = gr->wide ? "sum_to_split_wide.cu" : "sum_to_split.cu";
    } else if (a->op == OP_SUM_TO) {
        gr->grid = (c + 31) / 32;
        gr->tmpl = "sum_to.cu";
    } else {
        gr->grid = 1;
        gr->tmpl = "sum_all.cu";
    }
}

void gen_sum(Gen *G, Keys *ks, Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    const Shape *in = &a->in[0]->shape;
    int64_t c = shape_numel(&a->shape), m = shape_numel(in) / c;
    int wide = gr->wide;
    char *pl = NULL, *ps = NULL, *el = NULL, *es = NULL;
    if (wide) wide_begin(G, "            ");
    char *pro = prologue(G, s, in, wide ? "                " : a->op == OP_SUM_TO ? "            " : "        ", "k");
    char *x = operand(G, a->in[0], in);
    if (wide) wide_end(G, &pl, &ps), wide_begin(G, "        ");
    char *epi = epilogue(G, s, wide ? "            " : "        ", "k");
    if (wide) wide_end(G, &el, &es);
    key(ks, "PROLOGUE", "%s", pro);
    key(ks, "X", "%s", x);
    key(ks, "VA", "v%d", a->id);
    key(ks, "EPILOGUE", "%s", epi);
    if (a->op == OP_SUM_TO) {
        key(ks, "M", "%lld", (long long)m);
        key(ks, "C", "%lld", (long long)c);
    } else {
        key(ks, "N", "%lld", (long long)shape_numel(in));
    }
    if (wide) {
        key(ks, "PRO_LOADS", "%s", pl), key(ks, "PRO_STORES", "%s", ps);
        key(ks, "EPI_LOADS", "%s", el), key(ks, "EPI_STORES", "%s", es);
    }
    free(pro), free(x), free(epi), free(pl), free(ps), free(el), free(es);
}

/* ---- embedding: one element a thread, or eight of a row when rows are whole runs of 8 */
void launch_embedding(Gen *G, const Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    const Shape *x = &a->shape;
    gr->wide = x->dim[x->rank - 1] % 8 == 0 && !(G->reference & REF_WIDE) && wide_operand(a->in[0]) && split_wide(G, s, x, x, 0);
    gr->tmpl = gr->wide ? "embedding_wide.cu" : "embedding.cu";
    gr->block = 256;
    gr->grid = blocks_for(shape_numel(x) / (gr->wide ? 8 : 1), gr->block);
}

void gen_embedding(Gen *G, Keys *ks, Split *s) {
    Node *a = G->gr->anchor;
    int64_t d = a->shape.dim[a->shape.rank - 1], n = shape_numel(&a->shape);
    int wide = G->gr->wide;
    char *w = xstrdup(ptr(G, a->in[0])), *ids = xstrdup(ptr(G, a->in[1]));
    char *el = NULL, *es = NULL;
    if (wide) wide_begin(G, "        ");
    char *epi = epilogue(G, s, wide ? "            " : "        ", "k");
    if (wide) wide_end(G, &el, &es);
    key(ks, "N", "%lld", (long long)n);
    key(ks, "D", "%lld", (long long)d);
    key(ks, "ROWS", "%lld", (long long)(n / d));
    key(ks, "W", "%s", w);
    key(ks, "IDS", "%s", ids);
    key(ks, "VA", "v%d", a->id);
    key(ks, "EPILOGUE", "%s", epi);
    if (wide) key(ks, "EPI_LOADS", "%s", el), key(ks, "EPI_STORES", "%s", es);
    free(w), free(ids), free(epi), free(el), free(es);
}

/* ---- embedding_sort: one block sorts the row indices by id, a radix pass per byte of the
 * largest id */
void launch_embedding_sort(Gen *G, const Split *s) {
    Group *gr = G->gr;
    int64_t v = gr->anchor->a.vocab, passes = 1;
    while (passes < 4 && (v - 1) >> (8 * passes)) passes++;
    /* the digit counts of each warp, and the id counts when they fit beside them, in shared
     * memory */
    int64_t block = 1024, warps = block / 32, digits = 256 * warps;
    int counts_shared = (digits + v + 1) * 4 <= 160 * 1024;
    tile(gr, "PASSES", passes), tile(gr, "COUNTS_SHARED", counts_shared), tile(gr, "WARPS", warps);
    gr->tmpl = "embedding_sort.cu";
    gr->grid = 1, gr->block = block;
    gr->smem = (digits + (counts_shared ? v + 1 : 0)) * 4;
}

void gen_embedding_sort(Gen *G, Keys *ks, Split *s) {
    Node *a = G->gr->anchor;
    key(ks, "IDS", "%s", ptr(G, a->in[0]));
    key(ks, "ORDER", "%s", ptr(G, a));
    key(ks, "START", "%s", ptr(G, need_part(G->gr, 1)));
    key(ks, "ROWS", "%lld", (long long)shape_numel(&a->in[0]->shape));
    key(ks, "V", "%lld", (long long)a->a.vocab);
}

/* ---- embedding_backward: over the rows sorted by id (chunks of 64 sorted rows, then one
 * block per 8 ids for the ids no row has), or one block per id scanning every row under
 * --reference-kernels embedding */
void launch_embedding_backward(Gen *G, const Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    int64_t d = a->shape.dim[1], rows = shape_numel(&a->in[1]->shape), v = a->shape.dim[0];
    gr->block = 256;
    tile(gr, "PER", (d + gr->block - 1) / gr->block);
    if (G->reference & REF_EMBEDDING) {
        gr->grid = v;
        gr->tmpl = "embedding_backward.cu";
        return;
    }
    int64_t k = 64, chunks = (rows + k - 1) / k, empty = (v + 7) / 8;
    tile(gr, "K", k), tile(gr, "CHUNKS", chunks), tile(gr, "EMPTY", empty);
    gr->grid = chunks + empty;
    gr->tmpl = "embedding_backward_sorted.cu";
}

void gen_embedding_backward(Gen *G, Keys *ks, Split *s) {
    Node *a = G->gr->anchor;
    int sorted = !strcmp(G->gr->tmpl, "embedding_backward_sorted.cu");
    char *dy = xstrdup(ptr(G, a->in[0])), *ids = xstrdup(ptr(G, a->in[1]));
    char *epi = epilogue(G, s, sorted ? "                    " : "            ", "k");
    key(ks, "D", "%lld", (long long)a->shape.dim[1]);
    key(ks, "ROWS", "%lld", (long long)shape_numel(&a->in[1]->shape));
    key(ks, "DY", "%s", dy);
    key(ks, "IDS", "%s", ids);
    key(ks, "VA", "v%d", a->id);
    key(ks, "EPILOGUE", "%s", epi);
    if (sorted) {
        key(ks, "ORDER", "%s", ptr(G, a->in[2]));
        key(ks, "START", "%s", ptr(G, a->in[3]));
        key(ks, "V", "%lld", (long long)a->shape.dim[0]);
    }
    free(dy), free(ids), free(epi);
}

/* ---- RoPE and its backward: eight elements a thread when they lie in one half of a head,
 * in both cos and sin */
void launch_rope(Gen *G, const Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    const Shape *x = &a->shape;
    int64_t hd = x->dim[2] / a->a.heads;
    int wide = hd % 16 == 0 && !(G->reference & REF_WIDE) && wide_operand(a->in[0]) && wide_operand(a->in[1]) &&
               wide_operand(a->in[2]) && split_wide(G, s, x, x, 0);
    gr->wide = wide;
    gr->block = 256;
    gr->grid = blocks_for(shape_numel(x) / (wide ? 8 : 1), gr->block);
    gr->tmpl = a->op == OP_ROPE ? (wide ? "rope_wide.cu" : "rope.cu") : (wide ? "rope_backward_wide.cu" : "rope_backward.cu");
}

void gen_rope(Gen *G, Keys *ks, Split *s) {
    Node *a = G->gr->anchor;
    const Shape *x = &a->shape;
    int64_t row = x->dim[2], hd = row / a->a.heads;
    int wide = G->gr->wide;
    char *px = xstrdup(ptr(G, a->in[0])), *pc = xstrdup(ptr(G, a->in[1])), *ps = xstrdup(ptr(G, a->in[2]));
    char *el = NULL, *es = NULL;
    if (wide) wide_begin(G, "        ");
    char *epi = epilogue(G, s, wide ? "            " : "        ", "k");
    if (wide) wide_end(G, &el, &es);
    key(ks, "N", "%lld", (long long)shape_numel(x));
    key(ks, "HD", "%lld", (long long)hd);
    key(ks, "HALF", "%lld", (long long)(hd / 2));
    key(ks, "ROW", "%lld", (long long)row);
    key(ks, "T", "%lld", (long long)x->dim[1]);
    key(ks, a->op == OP_ROPE ? "X" : "DY", "%s", px);
    key(ks, "COS", "%s", pc);
    key(ks, "SIN", "%s", ps);
    key(ks, "RDC", "%s", rounder(G, a->compute));
    if (a->op == OP_ROPE_BACKWARD) key(ks, "RDX", "%s", rounder(G, a->a.to));
    key(ks, "VA", "v%d", a->id);
    key(ks, "EPILOGUE", "%s", epi);
    if (wide) key(ks, "EPI_LOADS", "%s", el), key(ks, "EPI_STORES", "%s", es);
    free(px), free(pc), free(ps), free(epi), free(el), free(es);
}

/* ---- cross-entropy: a block per row, or a warp per row (8 rows a block) when wide; with
 * its gradient in the same kernel (pass_fusion's step 7), a warp per row that keeps the row
 * in registers, 4 rows a block */

/* the bytes of the logits a lane keeps, 8 a run, 256 a warp-wide step: at most 112 registers,
 * so with the kernel's other values three blocks of 4 warps fit a multiprocessor */
enum { CE_KEPT_BYTES = 112 * 4 };

int cross_entropy_grad_fits(const Node *ce, const Node *bwd, unsigned reference) {
    const Node *x = ce->in[0];
    int64_t v = x->shape.dim[x->shape.rank - 1];
    if ((reference & REF_WIDE) || v % 8 || (x->dtype != DT_F16 && x->dtype != DT_BF16 && x->dtype != DT_F32)) return 0;
    if ((v + 255) / 256 * 8 * (int64_t)dtype_size(x->dtype) > CE_KEPT_BYTES) return 0;
    if (bwd->in[1] != x || bwd->in[2] != ce->in[1] || bwd->dtype != x->dtype || bwd->compute != ce->compute) return 0;
    return bwd->in[3]->op == OP_PART && bwd->in[3]->in[0] == ce && bwd->in[3]->a.index == 1;
}

/* the cross_entropy_backward the group computes beside its cross_entropy, or NULL */
static const Node *loss_grad(const Group *gr) {
    for (int i = 0; i < gr->n_nodes; i++)
        if (gr->nodes[i]->op == OP_CROSS_ENTROPY_BACKWARD) return gr->nodes[i];
    return NULL;
}

void launch_cross_entropy(Gen *G, const Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    const Shape *x = &a->in[0]->shape;
    int64_t v = x->dim[x->rank - 1], rows = shape_numel(x) / v;
    const Node *grad = loss_grad(gr);
    gr->wide = v % 8 == 0 && !(G->reference & REF_WIDE) && wide_operand(a->in[0]);
    if (grad && (!gr->wide || !wide_operand(grad) || !cross_entropy_grad_fits(a, grad, G->reference)))
        die("internal error: %s: the cross-entropy's gradient cannot run in its kernel", gr->kernel);
    gr->block = grad ? 128 : 256;
    gr->grid = gr->wide ? (rows + gr->block / 32 - 1) / (gr->block / 32) : rows;
    gr->tmpl = grad ? "cross_entropy_fused.cu" : gr->wide ? "cross_entropy_wide.cu" : "cross_entropy.cu";
    if (gr->wide) tile(gr, "BLOCKS", gr->grid); /* each block's sums go to a table of this many rows */
}

void gen_cross_entropy(Gen *G, Keys *ks, Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    const Shape *x = &a->in[0]->shape;
    int64_t v = x->dim[x->rank - 1];
    const Node *grad = loss_grad(gr), *stats = need_part(gr, 1);
    key(ks, "V", "%lld", (long long)v);
    key(ks, "ROWS", "%lld", (long long)(shape_numel(x) / v));
    key(ks, "IGNORE", "%lld", (long long)a->a.ignore_index);
    key(ks, "X", "%s", ptr(G, a->in[0]));
    key(ks, "LABELS", "%s", ptr(G, a->in[1]));
    key(ks, "COUNT", "%s", ptr(G, need_part(gr, 2)));
    key(ks, "LOSS", "%s", ptr(G, a));
    key(ks, "RDC", "%s", rounder(G, a->compute));
    if (!grad) {
        key(ks, "STATS", "%s", ptr(G, stats));
        return;
    }
    /* the statistics are stored where a kernel after this one reads them (the loss kernel's
     * are: pass_memplan), the gradient where its readers are */
    if (stats->materialized) key(ks, "STORE_STATS", "st(%s, row * MMC_CE_STATS + MMC_CE_MAX, m);\n"
                                 "            st(%s, row * MMC_CE_STATS + MMC_CE_LOGSUM, logsum);\n"
                                 "            st(%s, row * MMC_CE_STATS + MMC_CE_LOSS, loss);",
                                 ptr(G, stats), ptr(G, stats), ptr(G, stats));
    else key(ks, "STORE_STATS", "%s", "");
    key(ks, "DLOSS", "%s", ptr(G, grad->in[0]));
    key(ks, "KEPT", "%s", ptr(G, grad->in[4]));
    key(ks, "DX", "%s", ptr(G, grad));
    key(ks, "E", "%s", dtype_cuda(a->in[0]->dtype));
    key(ks, "RDG", "%s", rounder(G, grad->compute));
    key(ks, "RDO", "%s", rounder(G, grad->dtype));
}

/* ---- target_count: one block over the labels */
void launch_target_count(Gen *G, const Split *s) {
    Group *gr = G->gr;
    gr->tmpl = "target_count.cu";
    gr->grid = 1, gr->block = 1024;
}

void gen_target_count(Gen *G, Keys *ks, Split *s) {
    Node *a = G->gr->anchor;
    key(ks, "LABELS", "%s", ptr(G, a->in[0]));
    key(ks, "ROWS", "%lld", (long long)shape_numel(&a->in[0]->shape));
    key(ks, "IGNORE", "%lld", (long long)a->a.ignore_index);
    key(ks, "OUT", "%s", ptr(G, a));
}

/* ---- cross-entropy backward: a block per row */
void launch_cross_entropy_backward(Gen *G, const Split *s) {
    Group *gr = G->gr;
    Node *a = gr->anchor;
    const Shape *x = &a->shape;
    int64_t v = x->dim[x->rank - 1];
    gr->wide = v % 8 == 0 && wide_operand(a->in[1]) && split_wide(G, s, x, x, 0);
    gr->block = 256;
    gr->grid = shape_numel(x) / v;
    gr->tmpl = gr->wide ? "cross_entropy_backward_wide.cu" : "cross_entropy_backward.cu";
}

void gen_cross_entropy_backward(Gen *G, Keys *ks, Split *s) {
    Node *a = G->gr->anchor;
    const Shape *x = &a->shape;
    int wide = G->gr->wide;
    char *el = NULL, *es = NULL;
    if (wide) wide_begin(G, "        ");
    char *epi = epilogue(G, s, wide ? "            " : "        ", "k");
    if (wide) wide_end(G, &el, &es);
    key(ks, "V", "%lld", (long long)x->dim[x->rank - 1]);
    key(ks, "IGNORE", "%lld", (long long)a->a.ignore_index);
    key(ks, "DLOSS", "%s", ptr(G, a->in[0]));
    key(ks, "X", "%s", ptr(G, a->in[1]));
    key(ks, "LABELS", "%s", ptr(G, a->in[2]));
    key(ks, "STATS", "%s", ptr(G, a->in[3]));
    key(ks, "COUNT", "%s", ptr(G, a->in[4]));
    key(ks, "RDC", "%s", rounder(G, a->compute));
    key(ks, "VA", "v%d", a->id);
    key(ks, "EPILOGUE", "%s", epi);
    if (wide) key(ks, "EPI_LOADS", "%s", el), key(ks, "EPI_STORES", "%s", es);
    free(epi), free(el), free(es);
}

/* ---- the driver: the op's gen function, then what every anchor kernel gets */
void gen_anchor(Gen *G, StrBuf *o) {
    Group *gr = G->gr;
    const OpInfo *info = &op_info[gr->anchor->op];
    if (!info->gen || !gr->tmpl) die("internal error: anchor %s has no kernel (launch step not run?)", info->name);
    Split s = split_group(G);
    Keys ks = {0};
    key(&ks, "NAME", "%s", gr->kernel);
    key_optional(&ks, "R", G->R); /* the register type: the tensor-core kernels have their own */
    launch_keys(gr, &ks);
    info->gen(G, &ks, &s);
    key(&ks, "POINTERS", "%s", G->ptrs.s ? G->ptrs.s : "");
    render(o, gr->tmpl, &ks);
    free_split(&s);
}
