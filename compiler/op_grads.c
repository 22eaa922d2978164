/* op_grads: one derivative rule per op, each a few lines that build backward nodes.
 * dx[i] is the gradient of input i; the autodiff pass casts it to that input's dtype (as the
 * PyTorch autograd engine does) and sums the contributions. */
#include "op_rules.h"

static Node *reduce_like(Graph *g, Node *d, const Node *x, const Node *of) {
    return shape_eq(&d->shape, &x->shape) ? d : bw_sum_to(g, d, &x->shape, of);
}

void grad_cast(Graph *g, Node *n, Node *dy, Node **dx) {
    (void)g, (void)n;
    dx[0] = dy; /* the cast back to the source dtype is the general rule */
}

void grad_add(Graph *g, Node *n, Node *dy, Node **dx) {
    dx[0] = reduce_like(g, dy, n->in[0], n);
    dx[1] = reduce_like(g, dy, n->in[1], n);
}

void grad_mul(Graph *g, Node *n, Node *dy, Node **dx) {
    Node *a = n->in[0], *b = n->in[1];
    dx[0] = reduce_like(g, bw_op(g, OP_MUL, 2, (Node *[]){dy, b}, n), a, n);
    dx[1] = reduce_like(g, bw_op(g, OP_MUL, 2, (Node *[]){dy, a}, n), b, n);
}

void grad_scale(Graph *g, Node *n, Node *dy, Node **dx) { dx[0] = bw_op(g, OP_SCALE, 1, &dy, n); }

void grad_silu(Graph *g, Node *n, Node *dy, Node **dx) {
    dx[0] = bw_op(g, OP_SILU_BACKWARD, 2, (Node *[]){dy, n->in[0]}, n);
}

void grad_expand(Graph *g, Node *n, Node *dy, Node **dx) { dx[0] = reduce_like(g, dy, n->in[0], n); }

void grad_linear(Graph *g, Node *n, Node *dy, Node **dx) {
    dx[0] = bw_op(g, OP_LINEAR_DX, 2, (Node *[]){dy, n->in[1]}, n);
    dx[1] = bw_op(g, OP_LINEAR_DW, 2, (Node *[]){dy, n->in[0]}, n);
}

void grad_embedding(Graph *g, Node *n, Node *dy, Node **dx) {
    Attrs a = n->a;
    a.vocab = n->in[0]->shape.dim[0];
    Node *sorted = bw_op_a(g, OP_EMBEDDING_SORT, 1, &n->in[1], n, a);
    Node *starts = ir_part(g, sorted, 1);
    dx[0] = bw_op_a(g, OP_EMBEDDING_BACKWARD, 4, (Node *[]){dy, n->in[1], sorted, starts}, n, a);
}

void grad_rms_normalize(Graph *g, Node *n, Node *dy, Node **dx) {
    dx[0] = bw_op(g, OP_RMS_NORMALIZE_BACKWARD, 2, (Node *[]){dy, n->in[0]}, n);
}

/* The backward rounds each of its two products to x's dtype before summing, as the
 * PyTorch autograd engine casts each branch's gradient to x's dtype. */
void grad_rope(Graph *g, Node *n, Node *dy, Node **dx) {
    Attrs a = n->a;
    a.to = n->in[0]->dtype;
    dx[0] = bw_op_a(g, OP_ROPE_BACKWARD, 3, (Node *[]){dy, n->in[1], n->in[2]}, n, a);
}

/* Two kernels, so that every gradient element has one writer without atomics: dq (and the
 * row sums dsum = rowsum(dO * O) the second needs) per query tile, dk and dv per key tile. */
void grad_attention(Graph *g, Node *n, Node *dy, Node **dx) {
    Node *lse = ir_part(g, n, 1);
    Node *dq = bw_op(g, OP_ATTENTION_BACKWARD_DQ, 6, (Node *[]){dy, n->in[0], n->in[1], n->in[2], n, lse}, n);
    Node *dsum = ir_part(g, dq, 1);
    Node *dk = bw_op(g, OP_ATTENTION_BACKWARD_DKV, 6, (Node *[]){dy, n->in[0], n->in[1], n->in[2], lse, dsum}, n);
    dx[0] = dq;
    dx[1] = dk;
    dx[2] = ir_part(g, dk, 1);
}

/* The gradient divides by the count of kept targets. target_count counts them from the
 * labels alone (the forward kernel's own count comes only once every row is done), so the
 * gradient needs nothing from other rows and can be written in the loss's own pass over the
 * logits (pass_fusion's step 7). The count is in the stats' dtype, as the forward's is. */
void grad_cross_entropy(Graph *g, Node *n, Node *dy, Node **dx) {
    Attrs a = n->a;
    a.to = ir_part(g, n, 1)->dtype;
    Node *count = bw_op_a(g, OP_TARGET_COUNT, 1, &n->in[1], n, a);
    ir_part(g, n, 2); /* the forward kernel's count, written as ever (eval reads plans alike) */
    Node *in[5] = {dy, n->in[0], n->in[1], ir_part(g, n, 1), count};
    dx[0] = bw_op(g, OP_CROSS_ENTROPY_BACKWARD, 5, in, n);
}

void grad_sum_to(Graph *g, Node *n, Node *dy, Node **dx) { dx[0] = bw_expand(g, dy, &n->in[0]->shape, n); }

void grad_sum_all(Graph *g, Node *n, Node *dy, Node **dx) { dx[0] = bw_expand(g, dy, &n->in[0]->shape, n); }
