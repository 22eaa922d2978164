/* op_rules: the shape, dtype, part and derivative rules that the op table points to. */
#ifndef MMC_OP_RULES_H
#define MMC_OP_RULES_H

#include "ir.h"

char *shape_same(Node *n);
char *shape_broadcast(Node *n);
char *shape_inplace(Node *n);
char *shape_silu_backward(Node *n);
char *shape_scale_rows(Node *n);
char *shape_expand(Node *n);
char *shape_sum_to(Node *n);
char *shape_scalar(Node *n);
char *shape_linear(Node *n);
char *shape_slice(Node *n);
char *shape_concat(Node *n);
char *shape_linear_dx(Node *n);
char *shape_linear_dw(Node *n);
char *shape_embedding(Node *n);
char *shape_embedding_backward(Node *n);
char *shape_rows(Node *n);
char *shape_rms_normalize_backward(Node *n);
char *shape_rope(Node *n);
char *shape_attention(Node *n);
char *shape_attention_backward_dq(Node *n);
char *shape_attention_backward_dkv(Node *n);
char *shape_embedding_sort(Node *n);
char *shape_cross_entropy(Node *n);
char *shape_cross_entropy_backward(Node *n);
char *shape_target_count(Node *n);

void grad_cast(Graph *g, Node *n, Node *dy, Node **dx);
void grad_add(Graph *g, Node *n, Node *dy, Node **dx);
void grad_mul(Graph *g, Node *n, Node *dy, Node **dx);
void grad_scale(Graph *g, Node *n, Node *dy, Node **dx);
void grad_silu(Graph *g, Node *n, Node *dy, Node **dx);
void grad_expand(Graph *g, Node *n, Node *dy, Node **dx);
void grad_linear(Graph *g, Node *n, Node *dy, Node **dx);
void grad_embedding(Graph *g, Node *n, Node *dy, Node **dx);
void grad_rms_normalize(Graph *g, Node *n, Node *dy, Node **dx);
void grad_rope(Graph *g, Node *n, Node *dy, Node **dx);
void grad_attention(Graph *g, Node *n, Node *dy, Node **dx);
void grad_cross_entropy(Graph *g, Node *n, Node *dy, Node **dx);
void grad_sum_to(Graph *g, Node *n, Node *dy, Node **dx);
void grad_sum_all(Graph *g, Node *n, Node *dy, Node **dx);

/* Builders for derivative rules: each makes a node, infers its shape and, by native
 * promotion, its dtype (autocast is not active in backward, as in PyTorch). */
Node *bw_op(Graph *g, Op op, int n_in, Node **in, const Node *of); /* attrs copied from `of` */
Node *bw_op_a(Graph *g, Op op, int n_in, Node **in, const Node *of, Attrs a);
Node *bw_cast(Graph *g, Node *x, DType to, const Node *of);
Node *bw_sum_to(Graph *g, Node *x, const Shape *target, const Node *of);
Node *bw_expand(Graph *g, Node *x, const Shape *target, const Node *of);
Node *ir_part(Graph *g, Node *producer, int index);

#endif
