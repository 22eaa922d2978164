/* ir: graph and node construction, shapes, and the dtype rule for nodes made after the
 * precision pass. */
#include "ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

Graph *ir_graph_new(const char *name, const char *source) {
    Graph *g = xcalloc(1, sizeof *g);
    g->name = xstrdup(name);
    g->source = xstrdup(source ? source : "");
    g->policy.round_eager = 1;
    g->policy.master = DT_F32;
    return g;
}

Node *ir_node(Graph *g, Op op, int n_in, Node **in, const char *where) {
    if (n_in > IR_MAX_INPUTS) die_at(where, "%s: too many inputs", op_info[op].name);
    Node *n = xcalloc(1, sizeof *n);
    n->id = g->next_id++;
    n->op = op;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    n->where = xstrdup(where ? where : "");
    n->group = -1;
    n->buffer = -1;
    n->param_index = -1;
    n->rule = -1;
    vec_push(g->nodes, g->n_nodes, g->cap_nodes, n);
    return n;
}

Node *ir_node1(Graph *g, Op op, Node *a, const char *where) { return ir_node(g, op, 1, &a, where); }


char *ir_infer_shape(Node *n) {
    const OpInfo *info = &op_info[n->op];
    if (info->n_in >= 0 && n->n_in != info->n_in)
        return xasprintf("%s takes %d inputs, got %d", info->name, info->n_in, n->n_in);
    return info->shape ? info->shape(n) : NULL;
}

void ir_infer_dtype(Node *n) {
    const OpInfo *info = &op_info[n->op];
    DType c = DT_NONE;
    for (int i = 0; i < n->n_in; i++)
        if (info->float_in & (1u << i)) c = dtype_promote(c, n->in[i]->dtype);
    n->compute = c;
    if (info->dtype) info->dtype(n);
    else n->dtype = c;
}

/* ---- shapes */

int64_t shape_numel(const Shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

int64_t shape_numel_checked(const Shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dim[i] < 1 || s->dim[i] > IR_MAX_NUMEL / n) return -1;
        n *= s->dim[i];
    }
    return n;
}

int shape_eq(const Shape *a, const Shape *b) {
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i]) return 0;
    return 1;
}


Shape shape_make(int rank, ...) {
    Shape s = {0};
    va_list ap;
    va_start(ap, rank);
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.dim[i] = va_arg(ap, int64_t);
    va_end(ap);
    return s;
}

char *shape_str(const Shape *s) {
    StrBuf b = {0};
    sb_append(&b, "[");
    for (int i = 0; i < s->rank; i++) sb_printf(&b, "%s%lld", i ? "," : "", (long long)s->dim[i]);
    sb_append(&b, "]");
    return b.s;
}

int shape_is_suffix(const Shape *a, const Shape *b) {
    if (b->rank > a->rank) return 0;
    for (int i = 0; i < b->rank; i++)
        if (b->dim[b->rank - 1 - i] != a->dim[a->rank - 1 - i]) return 0;
    return 1;
}

const char *node_label(const Node *n) {
    static char buf[4][32];
    static int next;
    if (n->name) return n->name;
    char *b = buf[next++ & 3];
    snprintf(b, sizeof buf[0], "%%%d", n->id);
    return b;
}

void ir_attrs(StrBuf *o, const Node *n) { attrs_print(o, &n->a, op_info[n->op].attrs); }

int node_is_view(const Node *n) { return op_info[n->op].kind == OK_VIEW; }
int node_adds_to_grads(const Node *n) { return n->op == OP_GRAD_ACCUMULATE || n->op == OP_LINEAR_DW_ADD; }
const Node *node_overwritable_input(const Node *n) {
    return op_info[n->op].overwrites ? n->in[op_info[n->op].overwrites - 1] : NULL;
}

static int64_t last_dim(const Node *n) { return n->shape.rank ? n->shape.dim[n->shape.rank - 1] : 1; }

int64_t node_row_stride(const Node *n) { return n->ld ? n->ld : last_dim(n); }

int64_t node_mem_index(const Node *n, int64_t i) {
    if (!n->ld) return i;
    int64_t w = last_dim(n);
    return i / w * n->ld + i % w;
}

int64_t node_extent_bytes(const Node *n) {
    int64_t numel = shape_numel(&n->shape), esize = (int64_t)dtype_size(n->dtype);
    return (numel ? node_mem_index(n, numel - 1) + 1 : 0) * esize;
}

int64_t slice_offset(const Node *s, int64_t *ld) {
    const Node *x = s->in[0];
    int64_t esize = (int64_t)dtype_size(x->dtype);
    *ld = s->a.axis ? node_row_stride(x) : 0;
    return s->a.axis ? s->a.begin * esize : s->a.begin * (shape_numel(&x->shape) / x->shape.dim[0]) * esize;
}

int64_t concat_part_offset(const Node *cat, int k) {
    int64_t at = 0;
    for (int j = 0; j < k; j++) {
        const Node *x = cat->in[j];
        at += (cat->a.axis ? last_dim(x) : shape_numel(&x->shape)) * (int64_t)dtype_size(x->dtype);
    }
    return at;
}

int64_t concat_part_ld(const Node *cat) { return cat->a.axis ? last_dim(cat) : 0; }
