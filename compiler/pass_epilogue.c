/* pass_epilogue: an elementwise kernel that reads a GEMM's product, or the product's two
 * column halves, becomes the GEMM's epilogue where codegen_gemm.c's rule allows it: SwiGLU's
 * forward (silu(gate) * up from the merged gate/up projection) and backward (the gradients
 * of gate and up from dh = dy W_down). The product then leaves the tensor cores through
 * registers and shared memory instead of a round trip through memory. After merge, whose
 * merged projections the forward's pairing needs; on the kernels.
 *
 * By default only epilogues that read nothing from memory but the product join their GEMM:
 * those pay (H200, ncu, MiniMind b64: the GEMM and SwiGLU's forward 208 -> 196 us a layer),
 * while one that also loads operands runs its loads and arithmetic on the consumer
 * warpgroups and holds the tensor cores up (SwiGLU's backward, gate and up: 188 -> 214 us);
 * `with_loads` (mmc compile --gemm-epilogues) takes those too. */
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "passes.h"
#include "util.h"

typedef struct Epi {
    Program *p;
    Node **by_id;
    int **cons; /* consumers by node id */
    int *n_cons, *cap_cons;
    int *pos;   /* by node id: position in the graph */
    char *seen; /* by group */
    int *stack;
} Epi;

/* a list of kernels */
typedef struct Groups {
    int *at;
    int n, cap;
} Groups;

/* appends the kernels that read node n, through views too (with repeats) */
static void reader_groups(const Epi *e, const Node *n, Groups *out) {
    for (int c = 0; c < e->n_cons[n->id]; c++) {
        const Node *r = e->by_id[e->cons[n->id][c]];
        if (node_is_view(r)) reader_groups(e, r, out);
        else if (r->group >= 0) vec_push(out->at, out->n, out->cap, r->group);
    }
}

/* some kernel other than `from` and `to` is downstream of `from` and upstream of `to`:
 * the two as one kernel would depend on itself */
static int path_through_other(Epi *e, int from, int to) {
    memset(e->seen, 0, (size_t)e->p->n_groups);
    int sp = 0, found = 0;
    e->seen[from] = e->seen[to] = 1;
    e->stack[sp++] = from;
    Groups rd = {0};
    while (sp && !found) {
        int x = e->stack[--sp];
        const Group *gr = e->p->groups[x];
        rd.n = 0;
        for (int i = 0; i < gr->n_nodes; i++) reader_groups(e, gr->nodes[i], &rd);
        for (int k = 0; k < rd.n && !found; k++) {
            found = rd.at[k] == to && x != from;
            if (e->seen[rd.at[k]]) continue;
            e->seen[rd.at[k]] = 1;
            e->stack[sp++] = rd.at[k];
        }
    }
    free(rd.at);
    return found;
}

static int by_position(const Epi *e, const Node *a, const Node *b) { return e->pos[a->id] - e->pos[b->id]; }

/* the elementwise kernel h joins the GEMM's kernel ga if the rule allows and no cycle comes
 * of it; its ops keep the graph's order, after the GEMM */
static int try_join(Epi *e, int ga, int h, unsigned reference, int with_loads) {
    Group *gemm = e->p->groups[ga], *w = e->p->groups[h];
    if (h == ga || w->kind != GK_ELEMENTWISE || w->n_nodes == 0 || w->stream != gemm->stream) return 0;
    Node **epi = xmalloc((size_t)w->n_nodes * sizeof *epi);
    memcpy(epi, w->nodes, (size_t)w->n_nodes * sizeof *epi);
    for (int i = 1; i < w->n_nodes; i++)
        for (int j = i; j > 0 && by_position(e, epi[j], epi[j - 1]) < 0; j--) {
            Node *t = epi[j];
            epi[j] = epi[j - 1], epi[j - 1] = t;
        }
    GemmEpilogue shape;
    int ok = !gemm_epilogue_refusal(gemm->anchor, epi, w->n_nodes, reference, &shape) && (with_loads || !shape.loads) &&
             !path_through_other(e, ga, h);
    if (ok) {
        for (int i = 0; i < w->n_nodes; i++) group_add(gemm, epi[i]);
        w->n_nodes = 0;
    }
    free(epi);
    return ok;
}

void pass_epilogue(Graph *g, Program *p, unsigned reference, int with_loads) {
    Epi e = {p, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int ids = g->next_id;
    e.by_id = xcalloc((size_t)ids, sizeof *e.by_id);
    e.cons = xcalloc((size_t)ids, sizeof *e.cons);
    e.n_cons = xcalloc((size_t)ids, sizeof(int));
    e.cap_cons = xcalloc((size_t)ids, sizeof(int));
    e.pos = xcalloc((size_t)ids, sizeof(int));
    e.seen = xcalloc((size_t)p->n_groups + 1, 1);
    e.stack = xmalloc(((size_t)p->n_groups + 1) * sizeof(int));
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        e.by_id[n->id] = n;
        e.pos[n->id] = i;
        for (int k = 0; k < n->n_in; k++) {
            int x = n->in[k]->id;
            vec_push(e.cons[x], e.n_cons[x], e.cap_cons[x], n->id);
        }
    }
    Groups rd = {0};
    for (int i = 0; i < p->n_groups; i++) {
        Group *gr = p->groups[i];
        if (gr->kind != GK_GEMM || gr->n_nodes != 1) continue;
        rd.n = 0;
        reader_groups(&e, gr->anchor, &rd);
        for (int k = 0; k < rd.n && !try_join(&e, i, rd.at[k], reference, with_loads); k++) {}
    }
    free(rd.at);
    program_drop_empty_groups(p);
    for (int i = 0; i < ids; i++) free(e.cons[i]);
    free(e.by_id), free(e.cons), free(e.n_cons), free(e.cap_cons), free(e.pos), free(e.seen), free(e.stack);
}
