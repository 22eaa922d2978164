/* pass_schedule: puts the kernel groups in an order that respects their dependencies (ties
 * go to the group whose first node came first, which keeps the forward then backward order
 * the graph was written in), names each kernel after its order and contents, and appends
 * the optimizer kernels of the update phase. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "util.h"

static char *kernel_name(int order, const Group *gr) {
    const char *what = "elementwise";
    const Node *named = NULL;
    if (gr->kind == GK_CAST_PARAMS) what = "cast_weights";
    else if (gr->kind == GK_OPTIMIZER) what = gr->optimizer;
    else if (gr->anchor) what = op_info[gr->anchor->op].name, named = gr->anchor;
    if (!named || !named->name)
        for (int i = gr->n_nodes - 1; i >= 0 && gr->kind != GK_CAST_PARAMS; i--)
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

void pass_schedule(Graph *g, Program *p) {
    int n = p->n_groups;
    int *first = xmalloc((size_t)n * sizeof(int)), *indeg = xcalloc((size_t)n, sizeof(int));
    char *edge = xcalloc((size_t)n * (size_t)n, 1); /* edge[a*n+b]: b depends on a */
    for (int i = 0; i < n; i++) first[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *x = g->nodes[i];
        if (x->group < 0) continue;
        if (first[x->group] < 0) first[x->group] = i;
        for (int k = 0; k < x->n_in; k++) {
            int a = x->in[k]->group, b = x->group;
            if (a < 0 || a == b || edge[(size_t)a * n + b]) continue;
            edge[(size_t)a * n + b] = 1;
            indeg[b]++;
        }
    }
    Group **order = xmalloc((size_t)n * sizeof *order);
    char *done = xcalloc((size_t)n, 1);
    for (int k = 0; k < n; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!done[i] && indeg[i] == 0 && (best < 0 || first[i] < first[best])) best = i;
        if (best < 0) die("internal error: kernel groups form a cycle");
        done[best] = 1;
        order[k] = p->groups[best];
        for (int j = 0; j < n; j++)
            if (edge[(size_t)best * n + j]) indeg[j]--;
    }
    for (int k = 0; k < n; k++) {
        p->groups[k] = order[k];
        order[k]->id = k;
        for (int i = 0; i < order[k]->n_nodes; i++) order[k]->nodes[i]->group = k;
    }
    static const char *const optimizer_steps[] = {"grad_norm", "adamw", "step_finish"};
    for (int i = 0; i < 3; i++) {
        Group *gr = program_add_group(p, GK_OPTIMIZER, PHASE_UPDATE);
        gr->optimizer = optimizer_steps[i];
    }
    for (int k = 0; k < p->n_groups; k++) p->groups[k]->kernel = kernel_name(k, p->groups[k]);
    free(first), free(indeg), free(edge), free(order), free(done);
}
