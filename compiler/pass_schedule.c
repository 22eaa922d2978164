/* pass_schedule: puts the kernel groups in an order that respects their dependencies (ties
 * go to the group whose first node came first, which keeps the forward then backward order
 * the graph was written in), names each kernel after its order and contents, and appends
 * the optimizer kernels of the update phase. A side_stream anchor that reads only leaves
 * goes first and is marked for the side stream: the runtime starts it with the phase, so
 * its outputs must be live (in pass_memplan's schedule-order lifetimes) from the start. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "util.h"

static char *kernel_name(int order, const Group *gr) {
    const char *what = "elementwise";
    const Node *named = NULL;
    if (gr->kind == GK_CAST_PARAMS) what = "cast_weights";
    else if (gr->kind == GK_GRADS) what = "grad_accumulate";
    else if (gr->kind == GK_OPTIMIZER) what = optimizer_kernel_name(gr->optimizer);
    else if (gr->anchor) what = op_info[gr->anchor->op].name, named = gr->anchor;
    if (!named || !named->name)
        for (int i = gr->n_nodes - 1; i >= 0 && gr->kind != GK_CAST_PARAMS && gr->kind != GK_GRADS; i--)
            if (gr->nodes[i]->name && gr->nodes[i]->op != OP_PART) {
                named = gr->nodes[i];
                break;
            }
    StrBuf b = {0};
    sb_printf(&b, "k%03d_%s", order, what);
    if (named && named->name) {
        sb_append(&b, "_");
        const char *s = named->name;
        if (strncmp(s, "model.", 6) == 0) s += 6;
        for (; *s; s++) {
            char c = isalnum((unsigned char)*s) ? *s : '_';
            if (c == '_' && b.s[b.len - 1] == '_') continue;
            sb_appendn(&b, &c, 1);
        }
    }
    return b.s;
}

/* A side_stream anchor whose inputs are all leaves (written before the phase, never during
 * it) can run from the phase's start, beside everything else. */
static int on_side_stream(const Group *gr) {
    if (gr->kind != GK_ANCHOR || !gr->anchor || !op_info[gr->anchor->op].side_stream) return 0;
    for (int i = 0; i < gr->n_nodes; i++)
        for (int k = 0; k < gr->nodes[i]->n_in; k++) {
            const Node *x = gr->nodes[i]->in[k];
            if (node_is_view(x) || (x->group >= 0 && x->group != gr->id)) return 0;
        }
    return 1;
}

/* the next group to schedule among the ready ones: side-stream groups first, then by
 * first node */
static int goes_before(int i, int j, const char *side, const int *first) {
    if (side[i] != side[j]) return side[i];
    return first[i] < first[j];
}

/* group b reads x: b depends on x's kernel, or on the kernels of what a view x is made of */
static void depend(const Node *x, int b, int n, char *edge, int *indeg) {
    if (node_is_view(x)) {
        for (int k = 0; k < x->n_in; k++) depend(x->in[k], b, n, edge, indeg);
        return;
    }
    int a = x->group;
    if (a < 0 || a == b || edge[(size_t)a * n + b]) return;
    edge[(size_t)a * n + b] = 1;
    indeg[b]++;
}

void pass_schedule(Graph *g, Program *p) {
    int n = p->n_groups;
    int *first = xmalloc((size_t)n * sizeof(int)), *indeg = xcalloc((size_t)n, sizeof(int));
    char *edge = xcalloc((size_t)n * (size_t)n, 1); /* edge[a*n+b]: b depends on a */
    for (int i = 0; i < n; i++) first[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *x = g->nodes[i];
        if (x->group < 0) continue;
        if (first[x->group] < 0) first[x->group] = i;
        for (int k = 0; k < x->n_in; k++) depend(x->in[k], x->group, n, edge, indeg);
    }
    char *side = xcalloc((size_t)n, 1);
    for (int i = 0; i < n; i++) side[i] = (char)on_side_stream(p->groups[i]);
    Group **order = xmalloc((size_t)n * sizeof *order);
    char *done = xcalloc((size_t)n, 1);
    for (int k = 0; k < n; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!done[i] && indeg[i] == 0 && (best < 0 || goes_before(i, best, side, first))) best = i;
        if (best < 0) die("internal error: kernel groups form a cycle");
        done[best] = 1;
        order[k] = p->groups[best];
        order[k]->stream = side[best];
        for (int j = 0; j < n; j++)
            if (edge[(size_t)best * n + j]) indeg[j]--;
    }
    for (int k = 0; k < n; k++) {
        p->groups[k] = order[k];
        order[k]->id = k;
        for (int i = 0; i < order[k]->n_nodes; i++) order[k]->nodes[i]->group = k;
    }
    /* the update phase, for a plan with gradients (a forward-only plan has none) */
    int grads = 0;
    for (int i = 0; i < g->n_nodes; i++) grads |= node_adds_to_grads(g->nodes[i]);
    for (int i = 0; i < OPT_COUNT && grads; i++) {
        Group *gr = program_add_group(p, GK_OPTIMIZER, PHASE_UPDATE);
        gr->optimizer = (OptimizerKernel)i;
    }
    for (int k = 0; k < p->n_groups; k++) p->groups[k]->kernel = kernel_name(k, p->groups[k]);
    free(first), free(indeg), free(edge), free(order), free(done), free(side);
}
