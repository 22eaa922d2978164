/* pass_merge: projections of one input become one GEMM. MiniMind's q, k and v projections
 * all read the normed hidden state, as gate and up read the post-attention one; each of
 * them alone is a narrow GEMM that reads that input again. Here they become:
 *
 *   W  = concat(w_q, w_k, w_v) axis=0   the weights side by side (memplan writes each cast
 *                                       weight into its rows; fp32 weights already are)
 *   Y  = linear(x, W)                   one GEMM
 *   q  = slice(Y) axis=1 ...            each projection a view of Y's columns
 *
 * and, in the backward pass, the weight gradients too:
 *
 *   dY = concat(dq, dk, dv) axis=1      each gradient written into its columns
 *   dW = linear_dw(dY, x)               one GEMM
 *   dw_q = slice(dW) axis=0 ...         each weight's gradient a view of dW's rows
 *
 * Each element of Y and dW is the same dot product as before, rounded once, so the merge
 * changes no value. The input gradients stay one GEMM each (dx_q = linear_dx(dq, w_q) ...):
 * PyTorch rounds each projection's dx to the compute dtype before the sum, and one GEMM over
 * dY would sum first. The projections keep their names, rules and file:lines; the report
 * names the merged GEMM. A projection merges when its weights are parameters declared one
 * after another, and when every reader of its output can read a strided view (and every
 * writer of its gradient can write one). It runs after fusion, on GEMMs that are each a
 * kernel of their own: the merged GEMM takes the first one's kernel, the others' go. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "util.h"

enum { MAX_MERGE = IR_MAX_INPUTS };

/* the parameter a weight comes from: itself, or the one param it is a cast of */
static const Node *weight_param(const Node *w) {
    if (w->op == OP_PARAM) return w;
    if (w->op == OP_CAST && w->in[0]->op == OP_PARAM) return w->in[0];
    return NULL;
}

/* may consumer c read input k as a view with rows further apart than its last dim? */
static int reads_strided(const Node *c, int k) {
    const OpInfo *info = &op_info[c->op];
    switch (info->kind) {
    case OK_ELEMENTWISE: return !(info->row_in >> k & 1);
    case OK_GEMM: return 1;
    default: break;
    }
    switch (c->op) {
    case OP_ROPE: case OP_ROPE_BACKWARD: return k == 0;
    case OP_ATTENTION: return k == 2;                                          /* v */
    case OP_ATTENTION_BACKWARD_DQ: case OP_ATTENTION_BACKWARD_DKV: return k == 3; /* v */
    default: return 0;
    }
}

/* may the kernel that makes n write it with rows further apart than its last dim? */
static int writes_strided(const Node *n) {
    if (n->op == OP_PART) return n->in[0]->op == OP_ATTENTION_BACKWARD_DKV && n->a.index == 1; /* dv */
    if (n->op == OP_ROPE || n->op == OP_ROPE_BACKWARD) return 1;
    return op_info[n->op].kind == OK_ELEMENTWISE && n->op != OP_GRAD_ACCUMULATE;
}

typedef struct Merge {
    Graph *g;
    Program *p;
    int **cons;   /* consumers by node id */
    int *n_cons, *cap_cons;
    Node **by_id;
    char *taken;  /* by node id: a weight or gradient already placed in a concat */
    int *pos;     /* by node id: position in g->nodes before the pass */
} Merge;

static int all_readers_strided(const Merge *m, const Node *n) {
    for (int i = 0; i < m->n_cons[n->id]; i++) {
        const Node *c = m->by_id[m->cons[n->id][i]];
        for (int k = 0; k < c->n_in; k++)
            if (c->in[k] == n && !reads_strided(c, k)) return 0;
    }
    return 1;
}

static Node *new_node(Graph *g, Op op, int n_in, Node **in, const Node *like, Attrs a, const char *name) {
    Node *n = ir_node(g, op, n_in, in, like->where);
    n->a = a;
    char *err = ir_infer_shape(n);
    if (err) die("internal error: merge: %s", err);
    n->dtype = like->dtype;
    n->compute = node_is_view(n) ? n->dtype : like->compute; /* a view computes nothing */
    n->backward = like->backward;
    n->rule = like->rule;
    n->name = xstrdup(name);
    n->merged = op_info[op].kind == OK_GEMM ? MERGED_GEMM : 0;
    return n;
}

/* the GEMM `by` takes n's kernel, which holds n alone */
static void take_kernel(Merge *m, Node *n, Node *by) {
    Group *gr = m->p->groups[n->group];
    if (gr->kind != GK_GEMM || gr->n_nodes != 1 || gr->nodes[0] != n) die("internal error: merge: %s is not a kernel of its own", node_label(n));
    gr->nodes[0] = by;
    gr->anchor = by;
    by->group = gr->id;
    n->group = -1;
}

/* n's kernel goes: n becomes a view */
static void drop_kernel(Merge *m, Node *n) {
    Group *gr = m->p->groups[n->group];
    if (gr->kind != GK_GEMM || gr->n_nodes != 1 || gr->nodes[0] != n) die("internal error: merge: %s is not a kernel of its own", node_label(n));
    gr->n_nodes = 0;
    gr->anchor = NULL;
    n->group = -1;
}

/* node n becomes a view of `of`, indices [begin, begin + size) of its axis; its name, rule,
 * dtype and consumers stay */
static void make_slice(Node *n, Node *of, int axis, int64_t begin) {
    int d = axis ? n->shape.rank - 1 : 0;
    int64_t size = n->shape.dim[d];
    n->op = OP_SLICE;
    n->n_in = 1;
    n->in[0] = of;
    memset(&n->a, 0, sizeof n->a);
    n->a.axis = axis, n->a.begin = begin, n->a.size = size;
    n->merged = MERGED_SLICE;
}

/* "model.layers.0.self_attn.q_proj" + "...k_proj" -> "model.layers.0.self_attn.q_proj+k_proj" */
static char *merged_name(Node **l, int n) {
    StrBuf b = {0};
    sb_append(&b, node_label(l[0]));
    const char *first = node_label(l[0]);
    const char *dot = strrchr(first, '.');
    size_t prefix = dot ? (size_t)(dot - first + 1) : 0;
    for (int i = 1; i < n; i++) {
        const char *s = node_label(l[i]);
        sb_printf(&b, "+%s", strncmp(s, first, prefix) == 0 ? s + prefix : s);
    }
    return b.s;
}

/* the weight gradient of projection l (reading x with weight param p): the linear_dw whose
 * only reader is p's grad_accumulate, or NULL */
static Node *weight_grad(const Merge *m, const Node *x, const Node *p) {
    for (int i = 0; i < m->n_cons[x->id]; i++) {
        Node *d = m->by_id[m->cons[x->id][i]];
        if (d->op != OP_LINEAR_DW || d->in[1] != x || m->n_cons[d->id] != 1) continue;
        const Node *acc = m->by_id[m->cons[d->id][0]];
        if (acc->op == OP_GRAD_ACCUMULATE && acc->a.param == p->param_index) return d;
    }
    return NULL;
}

/* the backward half: dW = linear_dw(concat(dy...), x), each weight's gradient a slice */
static void merge_weight_grads(Merge *m, Node *x, Node **l, const Node **par, int n, const char *name) {
    Node *d[MAX_MERGE], *dy[MAX_MERGE];
    int last_dy = -1, first_d = m->g->n_nodes;
    for (int i = 0; i < n; i++) {
        if (!(d[i] = weight_grad(m, x, par[i]))) return;
        dy[i] = d[i]->in[0];
        if (d[i]->dtype != d[0]->dtype || d[i]->compute != d[0]->compute) return;
        if (node_is_view(dy[i]) || op_info[dy[i]->op].kind == OK_LEAF || m->taken[dy[i]->id] || !writes_strided(dy[i]) ||
            !all_readers_strided(m, dy[i]) || dy[i]->dtype != dy[0]->dtype || !shape_eq(&d[i]->shape, &l[i]->in[1]->shape))
            return;
        for (int j = 0; j < i; j++)
            if (dy[j] == dy[i]) return;
        if (m->pos[dy[i]->id] > last_dy) last_dy = m->pos[dy[i]->id];
        if (m->pos[d[i]->id] < first_d) first_d = m->pos[d[i]->id];
    }
    if (last_dy > first_d) return; /* a gradient comes after another's weight gradient */
    Attrs a = {0};
    a.axis = 1;
    char *dname = xasprintf("d:%s", name);
    Node *cat = new_node(m->g, OP_CONCAT, n, dy, dy[0], a, dname);
    free(dname);
    char *wname = xasprintf("d:%s.weight", name);
    Node *dw = new_node(m->g, OP_LINEAR_DW, 2, (Node *[]){cat, x}, d[0], (Attrs){0}, wname);
    free(wname);
    int64_t row = 0;
    for (int i = 0; i < n; i++) {
        m->taken[dy[i]->id] = 1;
        if (i == 0) take_kernel(m, d[i], dw);
        else drop_kernel(m, d[i]);
        make_slice(d[i], dw, 0, row);
        row += d[i]->shape.dim[0];
    }
}

/* the projections reading x, in parameter order, that may merge; returns how many */
static int projections(Merge *m, Node *x, Node **l, const Node **par) {
    int n = 0;
    for (int i = 0; i < m->n_cons[x->id] && n < MAX_MERGE; i++) {
        Node *c = m->by_id[m->cons[x->id][i]];
        if (c->op != OP_LINEAR || c->in[0] != x || c->in[1] == x) continue;
        const Node *p = weight_param(c->in[1]);
        if (!p || m->taken[c->in[1]->id] || !all_readers_strided(m, c)) continue;
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= l[j] == c;
        if (dup) continue;
        l[n] = c, par[n] = p, n++;
    }
    /* by parameter, then the longest run of parameters declared one after another, of one
     * weight dtype and one result dtype */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && par[j]->param_index < par[j - 1]->param_index; j--) {
            Node *t = l[j];
            l[j] = l[j - 1], l[j - 1] = t;
            const Node *u = par[j];
            par[j] = par[j - 1], par[j - 1] = u;
        }
    int best = 0, best_len = n ? 1 : 0;
    for (int s = 0; s < n; s++) {
        int e = s + 1;
        while (e < n && par[e]->param_index == par[e - 1]->param_index + 1 && l[e]->in[1]->dtype == l[s]->in[1]->dtype &&
               l[e]->in[1]->op == l[s]->in[1]->op && l[e]->dtype == l[s]->dtype && l[e]->compute == l[s]->compute)
            e++;
        if (e - s > best_len) best = s, best_len = e - s;
    }
    for (int i = 0; i < best_len; i++) l[i] = l[best + i], par[i] = par[best + i];
    return best_len;
}

/* fp32 weights are the parameters themselves: side by side only where the flat buffer's
 * alignment leaves no gap between them */
static int params_adjacent(const Node **par, int n) {
    for (int i = 0; i + 1 < n; i++)
        if (shape_numel(&par[i]->shape) % PARAM_ALIGN_ELEMS) return 0;
    return 1;
}

static void merge_input(Merge *m, Node *x) {
    Node *l[MAX_MERGE];
    const Node *par[MAX_MERGE];
    int n = projections(m, x, l, par);
    if (n < 2) return;
    if (l[0]->in[1]->op == OP_PARAM && !params_adjacent(par, n)) return;
    Node *w[MAX_MERGE];
    for (int i = 0; i < n; i++) w[i] = l[i]->in[1], m->taken[w[i]->id] = 1;
    char *name = merged_name(l, n);
    char *wname = xasprintf("%s.weight", name);
    Attrs a = {0};
    Node *cat = new_node(m->g, OP_CONCAT, n, w, w[0], a, wname);
    free(wname);
    Node *y = new_node(m->g, OP_LINEAR, 2, (Node *[]){x, cat}, l[0], (Attrs){0}, name);
    merge_weight_grads(m, x, l, par, n, name);
    int64_t col = 0;
    for (int i = 0; i < n; i++) {
        int64_t width = l[i]->shape.dim[l[i]->shape.rank - 1];
        if (i == 0) take_kernel(m, l[i], y);
        else drop_kernel(m, l[i]);
        make_slice(l[i], y, 1, col);
        col += width;
    }
    free(name);
}

/* g->nodes in an order where every node comes after its inputs, each node as early as its
 * first reader needs it and otherwise where it was (an iterative depth-first walk) */
static void reorder(Graph *g) {
    Node **out = xmalloc((size_t)g->n_nodes * sizeof *out), **stack = xmalloc((size_t)g->n_nodes * sizeof *stack);
    int *next_in = xcalloc((size_t)g->next_id, sizeof(int));
    char *placed = xcalloc((size_t)g->next_id, 1);
    int n_out = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (placed[g->nodes[i]->id]) continue;
        int top = 0;
        stack[top++] = g->nodes[i];
        while (top) {
            Node *n = stack[top - 1];
            if (next_in[n->id] < n->n_in) {
                Node *x = n->in[next_in[n->id]++];
                if (!placed[x->id]) stack[top++] = x;
                continue;
            }
            top--;
            if (!placed[n->id]) placed[n->id] = 1, out[n_out++] = n;
        }
    }
    memcpy(g->nodes, out, (size_t)n_out * sizeof *out);
    free(out), free(stack), free(next_in), free(placed);
}

void pass_merge(Graph *g, Program *p) {
    Merge m = {.g = g, .p = p};
    int ids = g->next_id;
    m.cons = xcalloc((size_t)ids, sizeof *m.cons);
    m.n_cons = xcalloc((size_t)ids, sizeof(int));
    m.cap_cons = xcalloc((size_t)ids, sizeof(int));
    m.by_id = xcalloc((size_t)ids, sizeof *m.by_id);
    m.taken = xcalloc((size_t)ids, 1);
    m.pos = xcalloc((size_t)ids, sizeof(int));
    int n_before = g->n_nodes;
    for (int i = 0; i < n_before; i++) {
        Node *n = g->nodes[i];
        m.by_id[n->id] = n;
        m.pos[n->id] = i;
        for (int k = 0; k < n->n_in; k++) {
            int x = n->in[k]->id;
            vec_push(m.cons[x], m.n_cons[x], m.cap_cons[x], n->id);
        }
    }
    for (int i = 0; i < n_before; i++)
        if (!g->nodes[i]->backward) merge_input(&m, g->nodes[i]);
    if (g->n_nodes != n_before) {
        reorder(g);
        program_drop_empty_groups(p);
    }
    for (int i = 0; i < ids; i++) free(m.cons[i]);
    free(m.cons), free(m.n_cons), free(m.cap_cons), free(m.by_id), free(m.taken), free(m.pos);
}
