/* pass_autodiff: walks the forward graph from the loss back to the parameters and builds the
 * backward nodes from each op's derivative rule (op_grads.c). As PyTorch's autograd engine:
 * only nodes between a parameter and the loss get gradients; each gradient contribution is
 * cast to the dtype of the tensor it is the gradient of, and contributions are summed in
 * the order they arrive (later forward uses first). The seed is the step state's
 * loss_seed (loss scale / accumulation steps); each parameter's gradient ends in a
 * grad_accumulate into the flat gradient buffer. */
#include <stdlib.h>
#include <string.h>

#include "op_rules.h"
#include "passes.h"
#include "util.h"

static Node *finish_bw(Node *n) {
    char *err = ir_infer_shape(n);
    if (err) die_at(n->where, "autodiff: %s", err);
    ir_infer_dtype(n);
    n->backward = 1;
    return n;
}

Node *bw_op_a(Graph *g, Op op, int n_in, Node **in, const Node *of, Attrs a) {
    Node *n = ir_node(g, op, n_in, in, of->where);
    n->a = a;
    return finish_bw(n);
}

Node *bw_op(Graph *g, Op op, int n_in, Node **in, const Node *of) { return bw_op_a(g, op, n_in, in, of, of->a); }

Node *bw_cast(Graph *g, Node *x, DType to, const Node *of) {
    Attrs a = {0};
    a.to = to;
    return bw_op_a(g, OP_CAST, 1, &x, of, a);
}

Node *bw_sum_to(Graph *g, Node *x, const Shape *target, const Node *of) {
    Node *n = ir_node(g, OP_SUM_TO, 1, &x, of->where);
    n->shape = *target;
    return finish_bw(n);
}

Node *bw_expand(Graph *g, Node *x, const Shape *target, const Node *of) {
    Node *n = ir_node(g, OP_EXPAND, 1, &x, of->where);
    n->shape = *target;
    return finish_bw(n);
}

Node *ir_part(Graph *g, Node *producer, int index) {
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        if (n->op == OP_PART && n->in[0] == producer && n->a.index == index) return n;
    }
    Node *n = ir_node(g, OP_PART, 1, &producer, producer->where);
    n->a.index = index;
    n->backward = producer->backward;
    ir_infer_dtype(n); /* the producer's part rule sets shape and dtype */
    return n;
}

static void accumulate(Graph *g, Node *param, Node *d) {
    Attrs a = {0};
    a.param = param->param_index;
    Node *acc = bw_op_a(g, OP_GRAD_ACCUMULATE, 1, &d, param, a);
    acc->name = xasprintf("grad:%s", param->name);
}

void pass_autodiff(Graph *g) {
    int n_fwd = g->n_nodes;
    int ids = g->next_id;
    char *from_param = xcalloc((size_t)ids, 1), *to_loss = xcalloc((size_t)ids, 1);
    for (int i = 0; i < n_fwd; i++) {
        Node *n = g->nodes[i];
        if (n->op == OP_PARAM) from_param[n->id] = 1;
        for (int k = 0; k < n->n_in; k++) from_param[n->id] |= from_param[n->in[k]->id];
    }
    to_loss[g->loss->id] = 1;
    for (int i = n_fwd - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        if (!to_loss[n->id]) continue;
        for (int k = 0; k < n->n_in; k++) to_loss[n->in[k]->id] = 1;
    }
    Node **grad = xcalloc((size_t)ids, sizeof *grad);
    /* a parameter's gradient is complete once every forward use of it was visited; its
     * accumulation is emitted then, so the backward pass frees each weight gradient early */
    int *uses_left = xcalloc((size_t)ids, sizeof(int));
    for (int i = 0; i < n_fwd; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++) uses_left[g->nodes[i]->in[k]->id]++;
    Node *seed = ir_node(g, OP_STATE, 0, NULL, g->loss->where);
    seed->name = xstrdup("loss_seed");
    seed->a.slot = "loss_seed";
    seed->shape = g->loss->shape;
    seed->dtype = seed->compute = DT_F32;
    grad[g->loss->id] = seed->dtype == g->loss->dtype ? seed : bw_cast(g, seed, g->loss->dtype, g->loss);

    for (int i = n_fwd - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        Node *dy = grad[n->id];
        if (!dy || !from_param[n->id] || op_info[n->op].kind == OK_LEAF) continue;
        const OpInfo *info = &op_info[n->op];
        if (!info->grad)
            die_at(n->where, "%s (%s) lies between the parameters and the loss but has no derivative rule",
                   node_label(n), info->name);
        Node *dx[IR_MAX_INPUTS] = {0};
        info->grad(g, n, dy, dx);
        for (int k = 0; k < n->n_in; k++) {
            Node *x = n->in[k], *d = dx[k];
            if (!d || !from_param[x->id] || !to_loss[x->id]) continue;
            if (!shape_eq(&d->shape, &x->shape))
                die_at(n->where, "autodiff: the %s rule gave input %d a gradient of the wrong shape", info->name, k);
            if (d->dtype != x->dtype) d = bw_cast(g, d, x->dtype, n);
            grad[x->id] = grad[x->id] ? bw_op(g, OP_ADD, 2, (Node *[]){grad[x->id], d}, n) : d;
        }
        for (int k = 0; k < n->n_in; k++) {
            Node *x = n->in[k];
            if (--uses_left[x->id] == 0 && x->op == OP_PARAM && grad[x->id]) accumulate(g, x, grad[x->id]);
        }
    }
    /* name the gradient of each named forward tensor, so dumps read like the model */
    for (int i = 0; i < n_fwd; i++) {
        Node *n = g->nodes[i], *d = grad[n->id];
        if (d && !d->name && n->name && d->backward) d->name = xasprintf("d:%s", n->name);
    }
    free(grad);
    free(uses_left);
    free(from_param);
    free(to_loss);
}
