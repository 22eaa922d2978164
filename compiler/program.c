/* program: groups and buffers (see program.h). */
#include "program.h"

#include <stdlib.h>

#include <string.h>

#include "util.h"

static const char *buffer_names[BUF_COUNT] = {
#define X(e, name, doc) name,
    MMC_BUFFERS(X)
#undef X
};

const char *buffer_name(int b) { return b >= 0 && b < BUF_COUNT ? buffer_names[b] : "?"; }

int buffer_parse(const char *name) {
    for (int i = 0; i < BUF_COUNT; i++)
        if (strcmp(buffer_names[i], name) == 0) return i;
    return -1;
}

const char *const group_kind_names[GK_COUNT + 1] = {
#define X(e, name, doc) name,
    MMC_GROUP_KINDS(X)
#undef X
    NULL};
const char *const phase_names[PHASE_COUNT + 1] = {
#define X(e, name, doc) name,
    MMC_PHASES(X)
#undef X
    NULL};
const char *const optimizer_kernel_names[OPT_COUNT + 1] = {
#define X(e, name, doc) name,
    MMC_OPTIMIZER_KERNELS(X)
#undef X
    NULL};

const char *group_kind_name(GroupKind k) { return (unsigned)k < GK_COUNT ? group_kind_names[k] : "?"; }
int group_kind_parse(const char *name) { return word_index(group_kind_names, name); }
const char *phase_name(Phase ph) { return (unsigned)ph < PHASE_COUNT ? phase_names[ph] : "?"; }
int phase_parse(const char *name) { return word_index(phase_names, name); }
const char *optimizer_kernel_name(OptimizerKernel k) { return (unsigned)k < OPT_COUNT ? optimizer_kernel_names[k] : "?"; }
int optimizer_kernel_parse(const char *name) { return word_index(optimizer_kernel_names, name); }

Group *program_add_group(Program *p, GroupKind kind, Phase phase) {
    Group *gr = xcalloc(1, sizeof *gr);
    gr->id = p->n_groups;
    gr->kind = kind;
    gr->phase = phase;
    gr->grid = gr->grid_y = gr->block = 1;
    vec_push(p->groups, p->n_groups, p->cap_groups, gr);
    return gr;
}

GemmShape gemm_shape(const Node *n) {
    const Shape *x = &n->in[0]->shape, *y = &n->in[1]->shape;
    int64_t rows = shape_numel(x) / x->dim[x->rank - 1];
    GemmShape g = {0};
    g.a = n->in[0], g.b = n->in[1];
    switch (n->op) {
    case OP_LINEAR: g.m = rows, g.n = y->dim[0], g.k = x->dim[x->rank - 1], g.trans_b = 1; break;
    case OP_LINEAR_DX: g.m = rows, g.n = y->dim[1], g.k = x->dim[x->rank - 1]; break;
    case OP_LINEAR_DW:
    case OP_LINEAR_DW_ADD: g.m = x->dim[x->rank - 1], g.n = y->dim[y->rank - 1], g.k = rows, g.trans_a = 1; break;
    default: die("internal error: %s is not a GEMM", op_info[n->op].name);
    }
    return g;
}

void group_add(Group *gr, Node *n) {
    vec_push(gr->nodes, gr->n_nodes, gr->cap_nodes, n);
    n->group = gr->id;
}

int depends_on(const Node *n, const Node *anchor, const Group *gr) {
    if (n == anchor) return 1;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k]->group == gr->id && depends_on(n->in[k], anchor, gr)) return 1;
    return 0;
}

/* The node of gr whose kernel may write its result over one of its inputs (the op table's
 * overwrites): the anchor's, or a second anchor's the kernel also computes (a cross-entropy
 * kernel that writes its gradient); NULL when none does. */
const Node *group_overwriter(const Group *gr) {
    if (gr->anchor && node_overwritable_input(gr->anchor)) return gr->anchor;
    for (int i = 0; i < gr->n_nodes; i++)
        if (node_overwritable_input(gr->nodes[i])) return gr->nodes[i];
    return NULL;
}

/* The groups left once passes emptied some (merge, dw_add), numbered again in order. An
 * emptied group is one fusion made: nothing but its member list is set yet. */
void program_drop_empty_groups(Program *p) {
    int n = 0;
    for (int i = 0; i < p->n_groups; i++) {
        Group *gr = p->groups[i];
        if (!gr->n_nodes) {
            free(gr->nodes);
            free(gr);
            continue;
        }
        gr->id = n;
        for (int k = 0; k < gr->n_nodes; k++) gr->nodes[k]->group = n;
        p->groups[n++] = gr;
    }
    p->n_groups = n;
}
