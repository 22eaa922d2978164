/* pass_dw_add: a weight-gradient GEMM whose result goes only into the gradient buffer adds
 * into it itself, with cuBLASLt's beta = 1:
 *
 *   dW = linear_dw(dy, x); grad_accumulate(dW) param=p     ->   linear_dw_add(dy, x) param=p
 *
 * and a merged GEMM's (pass_merge) whose slices each go to one grad_accumulate becomes one
 * call over those params' gradients, where they lie side by side in the flat buffer as the
 * slices lie in dW. The GEMM's f32 sums are added to the gradient without first being
 * rounded to dW's dtype: no dW tensor is written and read back, and the grad_accumulate
 * kernel goes. That skips a rounding, so it is done where the policy allows it:
 *   - dW already is in the gradients' dtype (the fp32 and fp64 policies): the rounding skipped
 *     is none, and the result is the same bits;
 *   - or the policy rounds only what it stores (rounding = "fused"): dW is never stored.
 * Under eager rounding of an f16 or bf16 dW (autocast's: PyTorch rounds dW to f16 before the
 * f32 gradient adds it) the plan stays as it was. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "util.h"

typedef struct Uses {
    Node ***of; /* consumers by node id */
    int *n, *cap;
} Uses;

/* the grad_accumulate that is v's only reader, or NULL */
static Node *only_accumulate(const Uses *u, const Node *v) {
    if (u->n[v->id] != 1) return NULL;
    Node *a = u->of[v->id][0];
    return a->op == OP_GRAD_ACCUMULATE && shape_eq(&a->shape, &v->shape) ? a : NULL;
}

static void leave_group(Program *p, Node *n) {
    Group *gr = p->groups[n->group];
    int k = 0;
    for (int i = 0; i < gr->n_nodes; i++)
        if (gr->nodes[i] != n) gr->nodes[k++] = gr->nodes[i];
    gr->n_nodes = k;
    n->group = -1;
}

/* The gradients dW feeds, in its row order: acc[i] takes rows [row[i], row[i] + rows of it).
 * Returns how many, or 0 where dW has another reader or its slices leave rows out. */
static int gradient_parts(const Uses *u, const Node *dw, Node **acc, Node **views) {
    if (dw->shape.rank != 2) return 0;
    Node *one = only_accumulate(u, dw);
    if (one) {
        acc[0] = one, views[0] = NULL;
        return 1;
    }
    int n = u->n[dw->id];
    if (n < 2 || n > IR_MAX_INPUTS) return 0;
    int64_t row = 0;
    for (int k = 0; k < n; k++) { /* the slices, ordered by their first row */
        Node *s = NULL;
        for (int i = 0; i < n && !s; i++) {
            Node *c = u->of[dw->id][i];
            if (c->op == OP_SLICE && c->a.axis == 0 && c->a.begin == row) s = c;
        }
        if (!s || !(acc[k] = only_accumulate(u, s))) return 0;
        views[k] = s;
        row += s->a.size;
    }
    return row == dw->shape.dim[0] ? n : 0;
}

/* do the gradients of acc[0..n) lie in the flat buffer as their rows lie in dW? pass_memplan
 * lays the params out in order, each from a multiple of PARAM_ALIGN_ELEMS elements on */
static int side_by_side(const Graph *g, Node **acc, int n, int64_t cols) {
    for (int k = 0; k < n; k++) {
        const Shape *s = &g->params[acc[k]->a.param].node->shape;
        if (acc[k]->a.param != acc[0]->a.param + k || s->rank != 2 || s->dim[1] != cols) return 0;
        if (k + 1 < n && shape_numel(s) % PARAM_ALIGN_ELEMS) return 0;
    }
    return 1;
}

void pass_dw_add(Graph *g, Program *p) {
    Uses u = {0};
    int ids = g->next_id;
    u.of = xcalloc((size_t)ids, sizeof *u.of);
    u.n = xcalloc((size_t)ids, sizeof(int));
    u.cap = xcalloc((size_t)ids, sizeof(int));
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++) {
            int x = g->nodes[i]->in[k]->id;
            vec_push(u.of[x], u.n[x], u.cap[x], g->nodes[i]);
        }
    char *gone = xcalloc((size_t)ids, 1);
    DType master = g->policy.master;
    int changed = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *dw = g->nodes[i];
        if (dw->op != OP_LINEAR_DW || dw->group < 0) continue;
        if (g->policy.round_eager && dw->dtype != master) continue; /* PyTorch's rounding of dW stays */
        Node *acc[IR_MAX_INPUTS], *views[IR_MAX_INPUTS];
        int n = gradient_parts(&u, dw, acc, views);
        if (!n || !side_by_side(g, acc, n, dw->shape.dim[1])) continue;
        dw->op = OP_LINEAR_DW_ADD;
        dw->a.param = acc[0]->a.param;
        dw->dtype = dw->compute = master;
        for (int k = 0; k < n; k++) {
            leave_group(p, acc[k]);
            gone[acc[k]->id] = 1;
            if (views[k]) gone[views[k]->id] = 1;
        }
        changed = 1;
    }
    if (changed) {
        int k = 0;
        for (int i = 0; i < g->n_nodes; i++)
            if (!gone[g->nodes[i]->id]) g->nodes[k++] = g->nodes[i];
        g->n_nodes = k;
        program_drop_empty_groups(p);
    }
    for (int i = 0; i < ids; i++) free(u.of[i]);
    free(u.of), free(u.n), free(u.cap), free(gone);
}
