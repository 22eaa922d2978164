/* pass_fusion: groups nodes into kernels. Matmuls become cuBLASLt calls; every anchor op
 * (rms_normalize, rope, attention, cross_entropy, ...) is one kernel from its template; the
 * weight casts of a step share one launch; elementwise ops merge:
 *  1. into the group of a producer with the same iteration space: an elementwise chain, or
 *     the epilogue of an anchor (the cast and weight multiply after rms_normalize);
 *  2. else into a sibling group that reads the same input (SwiGLU's two backward products);
 *  3. a whole elementwise group into the anchor it feeds, as its prologue (residual add
 *     before rms_normalize, the gradient sum before rms_normalize_backward);
 *  4. a sum_to over the rows of a row_sums anchor, with its prologue, into the anchor it
 *     feeds: the norm weight's gradient is summed in the pass of rms_normalize_backward
 *     that reads the same rows, instead of in a pass of its own;
 *  5. the gradient accumulations left on their own (a GEMM's dW added to its f32 gradient)
 *     into one launch after the backward pass, like the weight casts before it;
 *  6. a rope_backward that alone reads an attention gradient (dq, or dk) into the flash
 *     kernel that makes it, which rotates each row as it stores it;
 *  7. with `loss_grad` (mmc compile --fuse-loss-grad), the cross-entropy's gradient into the
 *     loss's kernel, which writes each row's gradient from the row it just read (one pass
 *     over the logits instead of two).
 * (A GEMM's elementwise readers join it after the projections merge: pass_epilogue.c.)
 * A merge is made only if the groups stay acyclic: no third group both depends on one and
 * feeds the other. */
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "passes.h"
#include "util.h"

typedef struct WGroup {
    GroupKind kind;
    Node *anchor;
    Node *row_sum; /* step 4: the sum_to reduced in the anchor's pass */
    Shape shape;  /* iteration space of an elementwise group */
    int backward;
    int *mem;     /* node ids */
    int n, cap;
} WGroup;

typedef struct Fuse {
    Graph *g;
    Node **by_id;
    int **cons; /* consumers by node id */
    int *n_cons, *cap_cons;
    int *of;    /* node id -> working group, -1 for leaves */
    int *parent;
    WGroup *wg;
    int n_wg, cap_wg;
    int *seen, stamp;
    int *stack;
} Fuse;

static int root(Fuse *f, int x) {
    while (f->parent[x] != x) x = f->parent[x] = f->parent[f->parent[x]];
    return x;
}

static int gof(Fuse *f, const Node *n) { return f->of[n->id] < 0 ? -1 : root(f, f->of[n->id]); }

static int new_group(Fuse *f, GroupKind kind, Node *n) {
    WGroup w = {kind, NULL, NULL, n->shape, n->backward, NULL, 0, 0};
    if (kind == GK_ANCHOR || kind == GK_GEMM) w.anchor = n;
    vec_push(f->wg, f->n_wg, f->cap_wg, w);
    f->parent = xrealloc(f->parent, (size_t)f->n_wg * sizeof(int));
    f->parent[f->n_wg - 1] = f->n_wg - 1;
    return f->n_wg - 1;
}

static void join(Fuse *f, Node *n, int grp) {
    f->of[n->id] = grp;
    WGroup *w = &f->wg[grp];
    vec_push(w->mem, w->n, w->cap, n->id);
}

/* marks every group downstream of x (not x itself) with the current stamp */
static void mark_downstream(Fuse *f, int x) {
    f->stamp++;
    int sp = 0;
    f->stack[sp++] = x;
    while (sp) {
        int cur = f->stack[--sp];
        WGroup *w = &f->wg[cur];
        for (int i = 0; i < w->n; i++) {
            int id = w->mem[i];
            for (int k = 0; k < f->n_cons[id]; k++) {
                int h = gof(f, f->by_id[f->cons[id][k]]);
                if (h < 0 || h == cur || h == x || f->seen[h] == f->stamp) continue;
                f->seen[h] = f->stamp;
                f->stack[sp++] = h;
            }
        }
    }
}

/* some group of y's inputs (other than x and y) lies downstream of x */
static int feeds_through(Fuse *f, int x, int y) {
    mark_downstream(f, x);
    WGroup *w = &f->wg[y];
    for (int i = 0; i < w->n; i++) {
        Node *n = f->by_id[w->mem[i]];
        for (int k = 0; k < n->n_in; k++) {
            int h = gof(f, n->in[k]);
            if (h >= 0 && h != x && h != y && f->seen[h] == f->stamp) return 1;
        }
    }
    return 0;
}

static int can_merge(Fuse *f, int x, int y) { return x != y && !feeds_through(f, x, y) && !feeds_through(f, y, x); }

static void merge(Fuse *f, int from, int into) {
    WGroup *a = &f->wg[from], *b = &f->wg[into];
    for (int i = 0; i < a->n; i++) vec_push(b->mem, b->n, b->cap, a->mem[i]);
    free(a->mem);
    a->mem = NULL;
    a->n = 0;
    f->parent[from] = into;
}

/* n depends on the anchor of its group (directly or through other members) */
static int after_anchor(Fuse *f, const Node *n, const Node *anchor, int grp) {
    if (n == anchor) return 1;
    for (int k = 0; k < n->n_in; k++) {
        const Node *x = n->in[k];
        if (x->op == OP_PART && x->in[0] == anchor) return 1;
        if (gof(f, x) == grp && after_anchor(f, x, anchor, grp)) return 1;
    }
    return 0;
}

/* Step 1: may elementwise node e join group h as a chain link or an anchor epilogue? */
static int fits_producer(Fuse *f, Node *e, int h, Node *via) {
    WGroup *w = &f->wg[h];
    if (w->kind == GK_ELEMENTWISE) return shape_eq(&w->shape, &e->shape);
    if (w->kind != GK_ANCHOR || !op_info[w->anchor->op].epilogue) return 0;
    if (!shape_eq(&w->anchor->shape, &e->shape)) return 0;
    if (via->op == OP_PART) return 0; /* extra outputs are not in the epilogue's space */
    return after_anchor(f, via, w->anchor, h);
}

/* After e joined an elementwise chain, the chains of its other inputs over the same space
 * join too (a recomputed value beside the gradient sum it multiplies). */
static void join_other_producers(Fuse *f, Node *e) {
    for (int k = 0; k < e->n_in; k++) {
        int self = gof(f, e), h = gof(f, e->in[k]);
        if (h < 0 || h == self || f->wg[self].kind != GK_ELEMENTWISE || f->wg[h].kind != GK_ELEMENTWISE) continue;
        if (shape_eq(&f->wg[h].shape, &f->wg[self].shape) && f->wg[h].backward == f->wg[self].backward && can_merge(f, h, self))
            merge(f, h, self);
    }
}

static void fuse_elementwise(Fuse *f, Node *e) {
    int self = f->of[e->id];
    for (int k = 0; k < e->n_in; k++) {
        int h = gof(f, e->in[k]);
        if (h < 0 || h == self || f->wg[h].kind == GK_CAST_PARAMS) continue;
        if (fits_producer(f, e, h, e->in[k]) && can_merge(f, self, h)) {
            merge(f, self, h);
            join_other_producers(f, e);
            return;
        }
    }
    for (int k = 0; k < e->n_in; k++) {
        Node *x = e->in[k];
        for (int c = 0; c < f->n_cons[x->id]; c++) {
            Node *sib = f->by_id[f->cons[x->id][c]];
            if (sib == e || f->of[sib->id] < 0) continue;
            int h = gof(f, sib);
            WGroup *w = &f->wg[h];
            if (h == self || w->kind != GK_ELEMENTWISE || w->backward != e->backward) continue;
            if (shape_eq(&w->shape, &e->shape) && can_merge(f, self, h)) {
                merge(f, self, h);
                return;
            }
        }
    }
}

/* Step 3: an elementwise group that computes an anchor's input becomes its prologue. */
static void fuse_prologues(Fuse *f, Node *anchor) {
    const OpInfo *info = &op_info[anchor->op];
    for (int i = 0; i < anchor->n_in; i++) {
        if (!(info->prologue & (1u << i))) continue;
        int a = gof(f, anchor), h = gof(f, anchor->in[i]);
        if (h < 0 || h == a || f->wg[h].kind != GK_ELEMENTWISE) continue;
        if (!shape_eq(&f->wg[h].shape, &anchor->in[i]->shape)) continue;
        /* every input the anchor can take a prologue on must share that space */
        int ok = 1;
        for (int j = 0; j < anchor->n_in; j++)
            if ((info->prologue & (1u << j)) && !shape_eq(&anchor->in[j]->shape, &f->wg[h].shape)) ok = 0;
        if (ok && can_merge(f, h, a)) merge(f, h, a);
    }
}

/* Step 4: the group computing one of a row_sums anchor's inputs is a sum_to over the same
 * rows (with its prologue, and after it only ops on the sum): it joins the anchor's group
 * as the anchor's row sum. The kernel keeps a block's column sums in shared memory, which
 * bounds the row length. */
static void fuse_row_sums(Fuse *f, Node *anchor) {
    const Shape *rows = &anchor->in[0]->shape;
    int64_t d = rows->dim[rows->rank - 1];
    int a = gof(f, anchor);
    if (f->wg[a].row_sum || d > 4096) return;
    for (int i = 0; i < anchor->n_in; i++) {
        int h = gof(f, anchor->in[i]);
        if (h < 0 || h == a) continue;
        WGroup *w = &f->wg[h];
        if (w->kind != GK_ANCHOR || w->anchor->op != OP_SUM_TO || w->row_sum) continue;
        Node *sum = w->anchor;
        if (!shape_eq(&sum->in[0]->shape, rows) || sum->shape.rank != 1 || sum->shape.dim[0] != d) continue;
        int ok = 1;
        for (int k = 0; k < w->n && ok; k++) {
            Node *n = f->by_id[w->mem[k]];
            if (n == sum) continue;
            if (op_info[n->op].kind != OK_ELEMENTWISE) ok = 0;
            else if (!after_anchor(f, n, sum, h) && !shape_eq(&n->shape, rows)) ok = 0;
        }
        if (ok && can_merge(f, h, a)) {
            merge(f, h, a);
            f->wg[a].row_sum = sum;
            return;
        }
    }
}

/* Step 5: a grad_accumulate alone in its group reads a GEMM's result, which nothing can fuse
 * into; all of them become one kernel. It runs once every dW is ready, so their inputs live
 * until then (for MiniMind, 52 MB of f16), and saves a launch per weight. */
static void fuse_grads(Fuse *f) {
    int grads = -1;
    for (int i = 0; i < f->g->n_nodes; i++) {
        Node *n = f->g->nodes[i];
        int h = n->op == OP_GRAD_ACCUMULATE ? gof(f, n) : -1;
        if (h < 0 || f->wg[h].kind != GK_ELEMENTWISE || f->wg[h].n != 1) continue;
        int src = gof(f, n->in[0]);
        if (src < 0 || f->wg[src].kind != GK_GEMM) continue;
        if (grads < 0) grads = new_group(f, GK_GRADS, n);
        merge(f, h, grads);
    }
}

/* the readers of n other than its extra outputs' part nodes */
static int readers(const Fuse *f, const Node *n) {
    int count = 0;
    for (int c = 0; c < f->n_cons[n->id]; c++) {
        const Node *r = f->by_id[f->cons[n->id][c]];
        count += !(r->op == OP_PART && r->in[0] == n);
    }
    return count;
}

/* Step 6: the flash kernels stage each row of a head of dq and dk in shared memory on the
 * way out, which holds the pairs rope_backward combines (each column with the one half a
 * head away). So a rope_backward alone in its group, and the only reader of such a gradient,
 * joins the attention's kernel: the rotated gradient is written instead of the plain one,
 * which no pass reads back. The kernel rounds the gradient to its dtype before the rotation,
 * as the stored gradient is; that is the value the op sees under eager rounding, so the fold
 * is made there (and where the flash kernels run: the exact ones write element by element). */
static void fuse_rope_grads(Fuse *f, unsigned reference) {
    if (!f->g->policy.round_eager) return;
    for (int i = 0; i < f->g->n_nodes; i++) {
        Node *r = f->g->nodes[i];
        if (r->op != OP_ROPE_BACKWARD || !op_info[r->in[0]->op].rope_out) continue;
        Node *a = r->in[0];
        int h = gof(f, r), ga = gof(f, a);
        if (h < 0 || ga < 0 || h == ga || f->wg[h].n != 1 || readers(f, a) != 1) continue;
        int heads = a->op == OP_ATTENTION_BACKWARD_DQ ? a->a.heads : a->a.kv_heads;
        if (r->a.heads != heads || r->dtype != a->dtype || !shape_eq(&r->shape, &a->shape)) continue;
        if (!attention_flash_fits(a, reference)) continue;
        if (can_merge(f, h, ga)) merge(f, h, ga);
    }
}

/* Step 7: the gradient of a mean cross-entropy needs, besides the row's own statistics, only
 * the loss seed and the count of kept targets (target_count, from the labels alone), all
 * ready before the loss's kernel runs; so a cross_entropy_backward alone in its group, reading
 * the cross-entropy's logits, labels and statistics, joins the cross-entropy's kernel. That
 * kernel keeps each row in registers between its statistics and its gradient, which bounds
 * the vocabulary (cross_entropy_grad_fits); a larger one keeps the two passes. */
static void fuse_loss_grads(Fuse *f, unsigned reference) {
    for (int i = 0; i < f->g->n_nodes; i++) {
        Node *b = f->g->nodes[i];
        if (b->op != OP_CROSS_ENTROPY_BACKWARD || b->in[3]->op != OP_PART) continue;
        Node *ce = b->in[3]->in[0];
        int h = gof(f, b), gc = gof(f, ce);
        if (ce->op != OP_CROSS_ENTROPY || h < 0 || gc < 0 || h == gc || f->wg[h].n != 1) continue;
        if (!cross_entropy_grad_fits(ce, b, reference)) continue;
        if (can_merge(f, h, gc)) merge(f, h, gc);
    }
}

void pass_fusion(Graph *g, Program *p, int fuse, int row_sums, unsigned reference, int loss_grad) {
    Fuse f = {0};
    f.g = g;
    int ids = g->next_id;
    f.by_id = xcalloc((size_t)ids, sizeof *f.by_id);
    f.cons = xcalloc((size_t)ids, sizeof *f.cons);
    f.n_cons = xcalloc((size_t)ids, sizeof(int));
    f.cap_cons = xcalloc((size_t)ids, sizeof(int));
    f.of = xmalloc((size_t)ids * sizeof(int));
    for (int i = 0; i < ids; i++) f.of[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        f.by_id[n->id] = n;
        for (int k = 0; k < n->n_in; k++) {
            int x = n->in[k]->id;
            vec_push(f.cons[x], f.n_cons[x], f.cap_cons[x], n->id);
        }
    }
    int cast_params = -1;
    p->n_ops_unfused = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        OpKind k = op_info[n->op].kind;
        if (k == OK_LEAF) continue;
        if (k == OK_PART) {
            f.of[n->id] = gof(&f, n->in[0]);
            WGroup *w = &f.wg[f.of[n->id]];
            vec_push(w->mem, w->n, w->cap, n->id);
            continue;
        }
        p->n_ops_unfused++;
        if (n->op == OP_CAST && op_info[n->in[0]->op].kind == OK_LEAF) {
            if (cast_params < 0) cast_params = new_group(&f, GK_CAST_PARAMS, n);
            join(&f, n, cast_params);
            continue;
        }
        GroupKind kind = k == OK_GEMM ? GK_GEMM : k == OK_ANCHOR ? GK_ANCHOR : GK_ELEMENTWISE;
        join(&f, n, new_group(&f, kind, n));
    }
    f.seen = xcalloc((size_t)f.n_wg + 1, sizeof(int));
    f.stack = xmalloc(((size_t)f.n_wg + 1) * sizeof(int));
    for (int i = 0; i < g->n_nodes && fuse; i++)
        if (op_info[g->nodes[i]->op].kind == OK_ELEMENTWISE && f.of[g->nodes[i]->id] >= 0 &&
            f.wg[f.of[g->nodes[i]->id]].kind == GK_ELEMENTWISE)
            fuse_elementwise(&f, g->nodes[i]);
    for (int i = 0; i < g->n_nodes && fuse; i++)
        if (op_info[g->nodes[i]->op].kind == OK_ANCHOR) fuse_prologues(&f, g->nodes[i]);
    for (int i = 0; i < g->n_nodes && fuse && row_sums; i++)
        if (op_info[g->nodes[i]->op].row_sums) fuse_row_sums(&f, g->nodes[i]);
    if (fuse) fuse_grads(&f);
    if (fuse) fuse_rope_grads(&f, reference);
    if (fuse && loss_grad) fuse_loss_grads(&f, reference);

    /* the program's groups, in order of their first node */
    int *index = xmalloc((size_t)f.n_wg * sizeof(int));
    for (int i = 0; i < f.n_wg; i++) index[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        n->group = -1;
        if (f.of[n->id] < 0) continue;
        int r = root(&f, f.of[n->id]);
        if (index[r] < 0) {
            Group *gr = program_add_group(p, f.wg[r].kind, PHASE_MICRO);
            gr->anchor = f.wg[r].anchor;
            gr->row_sum = f.wg[r].row_sum;
            index[r] = gr->id;
        }
        group_add(p->groups[index[r]], n);
    }
    for (int i = 0; i < f.n_wg; i++) free(f.wg[i].mem);
    for (int i = 0; i < ids; i++) free(f.cons[i]);
    free(index), free(f.wg), free(f.parent), free(f.seen), free(f.stack);
    free(f.by_id), free(f.cons), free(f.n_cons), free(f.cap_cons), free(f.of);
}
