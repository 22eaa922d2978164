/* pass_remat: recomputes in the backward pass what is cheaper to recompute than to keep. A
 * forward elementwise value that the backward pass reads is kept in memory from its forward
 * kernel to its backward use, across the whole step. When every input it needs is kept
 * anyway (or is a leaf, or is itself recomputed), the backward pass gets its own copy of the
 * node, computed from those inputs, and the forward value is freed as soon as the forward
 * pass is done with it. The copy computes the same op in the same dtypes with the same
 * rounding, so the numbers do not change.
 *
 * It pays where the copy joins a backward kernel that runs anyway and stays in its registers:
 * a value only backward elementwise ops read (MiniMind's silu(gate), which the SwiGLU
 * backward kernel reads). A value a GEMM reads must be in memory for it, so its copy costs
 * a write in the backward pass: it stays kept, unless `gemm_inputs` asks for the memory
 * instead (silu(gate) * up, which the down projection's weight gradient reads: 0.7 GB at
 * MiniMind2-small's batch 64, for one more write of it a layer). A value only GEMMs read,
 * made from values kept anyway, would cost a pass of its own and always stays.
 *
 * rms_normalize's output is remade the same way, as scale_rows(x, its row factors): x is
 * kept for rms_normalize_backward anyway, the factors (the op's part) are one number a row,
 * and the product is the forward's own, so the bits are the same. MiniMind's normalized rows
 * (cast to f16 by type_as), which the norm weights' gradients read, are then no longer kept:
 * 0.5 GiB at batch 64, and a write in the forward and a read in the backward less per norm.
 * Runs after simplify, whose common-subexpression step would merge the copies back into the
 * originals. */
#include "op_rules.h"
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "util.h"

static int is_leaf(const Node *n) { return op_info[n->op].kind == OK_LEAF; }

/* appends the copy of x to order, after the copies it reads and the parts made for it (an
 * rms_normalize's row factors, whose node is new: ids from `fresh` on) */
static void place(Node **copy, const char *redo, char *placed, Node **order, int *n_order, const Node *x, int fresh) {
    Node *c = copy[x->id];
    if (placed[c->id]) return;
    for (int k = 0; k < x->n_in; k++)
        if (redo[x->in[k]->id]) place(copy, redo, placed, order, n_order, x->in[k], fresh);
    for (int k = 0; k < c->n_in; k++)
        if (c->in[k]->op == OP_PART && c->in[k]->id >= fresh && !placed[c->in[k]->id]) {
            placed[c->in[k]->id] = 1;
            order[(*n_order)++] = c->in[k];
        }
    placed[c->id] = 1;
    order[(*n_order)++] = c;
}

void pass_remat(Graph *g, int gemm_inputs) {
    int ids = g->next_id;
    char *kept = xcalloc((size_t)ids, 1);    /* forward value read by a backward node */
    char *redo = xcalloc((size_t)ids, 1);    /* recomputed in the backward pass */
    char *ew_read = xcalloc((size_t)ids, 1); /* read by a backward elementwise node */
    char *mem_read = xcalloc((size_t)ids, 1); /* read by a backward GEMM or anchor */
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        if (!n->backward) continue;
        for (int k = 0; k < n->n_in; k++) {
            const Node *x = n->in[k];
            if (!x->backward && !is_leaf(x)) kept[x->id] = 1;
            if (op_info[n->op].kind == OK_ELEMENTWISE) ew_read[x->id] = 1;
            else mem_read[x->id] = 1;
        }
    }
    int n_redo = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *x = g->nodes[i];
        if (x->op == OP_RMS_NORMALIZE && !x->backward && (is_leaf(x->in[0]) || kept[x->in[0]->id])) {
            redo[x->id] = 1; /* remade by scale_rows if a backward value needs it */
            continue;
        }
        if (x->backward || !kept[x->id] || op_info[x->op].kind != OK_ELEMENTWISE || x->op == OP_GRAD_ACCUMULATE) continue;
        if (mem_read[x->id] && !gemm_inputs) continue;
        int available = 1, joins = ew_read[x->id], leaves = 1;
        for (int k = 0; k < x->n_in; k++) {
            const Node *y = x->in[k];
            available &= is_leaf(y) || kept[y->id] || redo[y->id];
            joins |= redo[y->id] || ew_read[y->id];
            leaves &= is_leaf(y);
        }
        if (available && joins && !leaves) redo[x->id] = 1, n_redo++;
    }
    if (!n_redo) {
        free(kept), free(redo), free(ew_read), free(mem_read);
        return;
    }
    /* the copies, made in forward order so that a copy's recomputed inputs exist first */
    Node **copy = xcalloc((size_t)ids, sizeof *copy);
    int n_old = g->n_nodes;
    for (int i = 0; i < n_old; i++) {
        Node *x = g->nodes[i];
        if (!redo[x->id]) continue;
        Node *in[IR_MAX_INPUTS];
        for (int k = 0; k < x->n_in; k++) in[k] = redo[x->in[k]->id] ? copy[x->in[k]->id] : x->in[k];
        Node *c;
        if (x->op == OP_RMS_NORMALIZE) {
            in[1] = ir_part(g, x, 1);
            c = ir_node(g, OP_SCALE_ROWS, 2, in, x->where);
        } else {
            c = ir_node(g, x->op, x->n_in, in, x->where);
        }
        c->a = x->a;
        c->shape = x->shape;
        c->dtype = x->dtype;
        c->compute = x->compute;
        c->rule = x->rule;
        c->explicit_cast = x->explicit_cast;
        c->backward = 1;
        c->name = xasprintf("%s.recompute", node_label(x));
        copy[x->id] = c;
    }
    /* backward nodes read the copies; each copy goes just before its first reader, after the
     * copies it reads */
    Node **order = xmalloc((size_t)g->n_nodes * sizeof *order);
    char *placed = xcalloc((size_t)g->next_id, 1);
    int n_order = 0;
    for (int i = 0; i < n_old; i++) {
        Node *n = g->nodes[i];
        if (n->backward)
            for (int k = 0; k < n->n_in; k++)
                if (redo[n->in[k]->id]) {
                    place(copy, redo, placed, order, &n_order, n->in[k], ids);
                    n->in[k] = copy[n->in[k]->id];
                }
        order[n_order++] = n;
    }
    free(g->nodes);
    g->nodes = order;
    g->n_nodes = n_order;
    g->cap_nodes = n_order;
    free(kept), free(redo), free(ew_read), free(mem_read), free(copy), free(placed);
}
