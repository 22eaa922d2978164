/* pass_simplify: removes casts that change nothing (to the dtype the value already has),
 * shortens chains through an exact widening (f16 -> f32 -> bf16 is f16 -> bf16), lets
 * kernels read the narrow value where a cast only widened it exactly (every kernel loads
 * into fp32 registers; the node keeps its compute dtype, so the numbers are the same), merges
 * nodes that compute the same thing (the three f16 casts of one norm output feeding q, k
 * and v), and drops nodes nothing needs. Runs after autodiff, so the backward graph keeps
 * PyTorch's per-use structure while the forward stores each value once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "util.h"

/* Every value of `from` is exactly representable in `to`. */
static int widens_exactly(DType from, DType to) {
    if (from == to) return 1;
    if (to == DT_F64) return from == DT_F32 || from == DT_F16 || from == DT_BF16;
    if (to == DT_F32) return from == DT_F16 || from == DT_BF16;
    return 0;
}

static char *node_key(const Node *n) {
    StrBuf b = {0};
    sb_printf(&b, "%d|%d|%d|", n->op, n->dtype, n->compute);
    for (int i = 0; i < n->n_in; i++) sb_printf(&b, "%d,", n->in[i]->id);
    for (int i = 0; i < n->shape.rank; i++) sb_printf(&b, "x%lld", (long long)n->shape.dim[i]);
    /* every attribute the op uses, from the attribute table, so none can be left out */
    ir_attrs(&b, n);
    return b.s;
}

/* open-addressing string set: key -> node */
typedef struct Table {
    char **keys;
    Node **vals;
    size_t cap;
} Table;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static Node *table_find_or_add(Table *t, char *key, Node *n) {
    size_t i = hash_str(key) & (t->cap - 1);
    while (t->keys[i]) {
        if (strcmp(t->keys[i], key) == 0) {
            free(key);
            return t->vals[i];
        }
        i = (i + 1) & (t->cap - 1);
    }
    t->keys[i] = key;
    t->vals[i] = n;
    return n;
}

static int cse_candidate(const Node *n) {
    OpKind k = op_info[n->op].kind;
    return k != OK_LEAF && !node_adds_to_grads(n);
}

void pass_simplify(Graph *g) {
    Node **repl = xcalloc((size_t)g->next_id, sizeof *repl);
    Table t = {0};
    t.cap = 16;
    while (t.cap < (size_t)g->n_nodes * 2) t.cap *= 2;
    t.keys = xcalloc(t.cap, sizeof *t.keys);
    t.vals = xcalloc(t.cap, sizeof *t.vals);
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (repl[n->in[k]->id]) n->in[k] = repl[n->in[k]->id];
        if (n->op == OP_CAST) {
            Node *x = n->in[0];
            if (x->op == OP_CAST && widens_exactly(x->in[0]->dtype, x->dtype)) n->in[0] = x = x->in[0];
            if (x->dtype == n->dtype && shape_eq(&x->shape, &n->shape)) {
                repl[n->id] = x;
                if (!x->name && n->name) x->name = xstrdup(n->name);
                continue;
            }
            n->compute = x->dtype;
        }
        if (n->op != OP_CAST && op_info[n->op].kind != OK_GEMM && op_info[n->op].kind != OK_PART)
            for (int k = 0; k < n->n_in; k++) {
                Node *x = n->in[k];
                if (x->op == OP_CAST && (op_info[n->op].float_in & (1u << k)) && widens_exactly(x->in[0]->dtype, x->dtype))
                    n->in[k] = x->in[0];
            }
        if (!cse_candidate(n)) continue;
        Node *same = table_find_or_add(&t, node_key(n), n);
        if (same != n) repl[n->id] = same;
    }
    if (repl[g->loss->id]) g->loss = repl[g->loss->id];
    /* dead nodes: keep what the loss and the gradient accumulations need, the loss's extra
     * outputs, and all leaves */
    char *live = xcalloc((size_t)g->next_id, 1);
    live[g->loss->id] = 1;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        Node *n = g->nodes[i];
        if (repl[n->id]) continue;
        if (node_adds_to_grads(n) || op_info[n->op].kind == OK_LEAF) live[n->id] = 1;
        if (n->op == OP_PART && n->in[0] == g->loss) live[n->id] = 1; /* the loss kernel writes them */
        if (!live[n->id]) continue;
        for (int k = 0; k < n->n_in; k++) live[n->in[k]->id] = 1;
    }
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        if (live[n->id] && !repl[n->id]) g->nodes[k++] = n;
    }
    g->n_nodes = k;
    for (size_t i = 0; i < t.cap; i++) free(t.keys[i]);
    free(t.keys);
    free(t.vals);
    free(live);
    free(repl);
}
