/* pass_memplan: decides where every value that leaves registers lives. Parameters, their
 * gradients and AdamW moments are flat buffers with one layout, so the optimizer is a flat
 * loop; weight casts fill the `weights` buffer; the loss-gradient seed lives in the step
 * state; every other stored value gets an offset in one arena from its lifetime over
 * the schedule (first writer to last reader), so values that are never alive together
 * share bytes, and a kernel that reads an input only where it writes may write over it.
 * Views take no bytes of their own: a slice lies in what it slices, and the inputs of a
 * concat lie side by side in it (its rows ld elements apart, along the last dim), so each
 * is alive as long as any of them is read. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "layouts.h"
#include "passes.h"
#include "step_state.h"
#include "util.h"

enum { ALIGN = 256 };

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

static int64_t node_bytes(const Node *n) { return shape_numel(&n->shape) * (int64_t)dtype_size(n->dtype); }

/* ---- the arena planner: greedy by size, lowest offset that fits among the live ones */

static int by_size_desc(const void *a, const void *b) {
    const Interval *x = *(Interval *const *)a, *y = *(Interval *const *)b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    if (x->first != y->first) return x->first - y->first;
    return x < y ? -1 : x > y;
}

static int by_offset(const void *a, const void *b) {
    const Interval *x = *(Interval *const *)a, *y = *(Interval *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

int64_t plan_intervals(Interval *iv, int n, int64_t align) {
    Interval **sorted = xmalloc((size_t)n * sizeof *sorted), **live = xmalloc((size_t)n * sizeof *live);
    for (int i = 0; i < n; i++) sorted[i] = &iv[i];
    qsort(sorted, (size_t)n, sizeof *sorted, by_size_desc);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        Interval *x = sorted[i];
        int n_live = 0;
        for (int j = 0; j < i; j++) {
            Interval *y = sorted[j];
            if (y->first <= x->last && x->first <= y->last) live[n_live++] = y;
        }
        qsort(live, (size_t)n_live, sizeof *live, by_offset);
        int64_t at = 0;
        for (int j = 0; j < n_live; j++) {
            if (live[j]->offset >= at + x->size) break;
            int64_t end = align_up(live[j]->offset + live[j]->size, align);
            if (end > at) at = end;
        }
        x->offset = at;
        if (at + x->size > total) total = at + x->size;
    }
    free(sorted);
    free(live);
    return align_up(total, align);
}

/* ---- views */

/* x is read by group g: it, and what a view x is made of, stay alive until then */
static void use(int *last_use, const Node *x, int g) {
    if (g > last_use[x->id]) last_use[x->id] = g;
    if (node_is_view(x))
        for (int k = 0; k < x->n_in; k++) use(last_use, x->in[k], g);
}

/* the inputs of a concat, once it is placed; fp32 weights were placed as parameters and
 * must already lie side by side (pass_merge merges only such) */
static void place_concat_inputs(Node *cat) {
    for (int k = 0; k < cat->n_in; k++) {
        Node *x = cat->in[k];
        int64_t at = cat->offset + concat_part_offset(cat, k);
        if (x->op == OP_PARAM) {
            if (x->buffer != cat->buffer || x->offset != at) die("internal error: memplan: the weights of %s are not side by side", node_label(cat));
            continue;
        }
        x->buffer = cat->buffer;
        x->offset = at;
        x->ld = concat_part_ld(cat);
        x->materialized = 1;
    }
}

/* a slice lies in what it slices: the same rows further on (axis 0), or columns of them */
static void place_slice(Node *s) {
    Node *x = s->in[0];
    if (!x->materialized || x->buffer < 0) die("internal error: memplan: %s slices a value that is not stored", node_label(s));
    if (s->a.axis == 0 && x->ld) die("internal error: memplan: %s takes rows of a strided value", node_label(s));
    s->buffer = x->buffer;
    s->materialized = 1;
    s->offset = x->offset + slice_offset(s, &s->ld);
}

/* ---- results written over an input */

/* An anchor that may write its result over an input (op_info.overwrites) gets that input's
 * bytes where the input dies in its kernel and the result is the kernel's one stored value,
 * dense, of the input's size and element size: cross-entropy's gradient over the logits,
 * which would otherwise be alive together (2 x 419 MB for MiniMind at batch 64). The input's
 * interval then lasts as long as the result's, and the result takes no interval of its own.
 * alias[i]: the interval whose bytes interval i takes, or -1. */
static void alias_overwrites(const Graph *g, const Program *p, const int *last_use, Interval *iv, Node **iv_node, int n_iv,
                             int *alias) {
    int *at = xmalloc((size_t)g->next_id * sizeof(int));
    for (int i = 0; i < g->next_id; i++) at[i] = -1;
    for (int i = 0; i < n_iv; i++) at[iv_node[i]->id] = i, alias[i] = -1;
    for (int gi = 0; gi < p->n_groups; gi++) {
        const Group *gr = p->groups[gi];
        const Node *w = group_overwriter(gr), *x = w ? node_overwritable_input(w) : NULL;
        if (!x) continue;
        /* the value written over x is w's own or, when w is not stored, that of the one stored
         * node computed from it (its epilogue's); values the kernel stores apart from w (a
         * loss and its statistics) have bytes of their own */
        int xi = at[x->id], ni = at[w->id], stored = ni >= 0;
        for (int k = 0; k < gr->n_nodes; k++)
            if (gr->nodes[k] != w && at[gr->nodes[k]->id] >= 0 && depends_on(gr->nodes[k], w, gr)) ni = at[gr->nodes[k]->id], stored++;
        /* x dies here: no later kernel reads it, and it is not kept past the step (the loss,
         * a forward plan's logits) */
        if (xi < 0 || stored != 1 || x->group == gi || last_use[x->id] != gi || iv[xi].last != gi || alias[xi] >= 0) continue;
        const Node *n = iv_node[ni];
        if (n->ld || x->ld || shape_numel(&n->shape) != shape_numel(&x->shape) || dtype_size(n->dtype) != dtype_size(x->dtype))
            continue;
        alias[ni] = xi;
        if (iv[ni].last > iv[xi].last) iv[xi].last = iv[ni].last;
    }
    free(at);
}

/* ---- placement */

static int stored(const Node *n, const int *last_use, const char *in_concat, const Graph *g) {
    if (n == g->loss || node_adds_to_grads(n)) return 1;
    /* the loss kernel's own extra outputs (cross-entropy's row statistics, which its last block
     * reads back, and the count of targets, which a forward-only plan's reader needs) */
    if (n->op == OP_PART && n->in[0] == g->loss) return 1;
    if (op_info[n->op].kind == OK_GEMM) return 1;
    if (in_concat[n->id]) return 1;
    return last_use[n->id] > n->group;
}

void pass_memplan(Graph *g, Program *p) {
    /* A plan without a backward pass (compile --forward) ends with the loss: its input, the
     * logits, stays readable after the step, for `mmc generate` to sample from. */
    const Node *logits = NULL;
    int backward = 0;
    for (int i = 0; i < g->n_nodes; i++) backward |= node_adds_to_grads(g->nodes[i]);
    if (!backward && g->loss->n_in && g->loss->in[0]->group != g->loss->group) logits = g->loss->in[0];
    int *last_use = xmalloc((size_t)g->next_id * sizeof(int));
    for (int i = 0; i < g->next_id; i++) last_use[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        n->ld = 0;
        if (n->group < 0) continue; /* leaves, and views, which are read where they are used */
        for (int k = 0; k < n->n_in; k++) {
            Node *x = n->in[k];
            if (x->group != n->group) use(last_use, x, n->group);
        }
    }
    char *in_concat = xcalloc((size_t)g->next_id, 1); /* placed inside a concat */
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == OP_CONCAT)
            for (int k = 0; k < g->nodes[i]->n_in; k++) in_concat[g->nodes[i]->in[k]->id] = 1;
    int64_t size[BUF_COUNT] = {0};
    /* parameters, in declaration order; grads and moments share the layout */
    size_t master = dtype_size(g->policy.master);
    int64_t elems = 0;
    for (int i = 0; i < g->n_params; i++) {
        Param *pa = &g->params[i];
        pa->offset = elems;
        pa->node->buffer = BUF_PARAMS;
        pa->node->offset = elems * (int64_t)master;
        elems = align_up(elems + shape_numel(&pa->node->shape), PARAM_ALIGN_ELEMS);
    }
    size[BUF_PARAMS] = size[BUF_GRADS] = size[BUF_ADAM_M] = size[BUF_ADAM_V] = elems * (int64_t)master;
    size[BUF_STATE] = (int64_t)MMC_STATE_BYTES(g->n_params);
    Interval *iv = NULL;
    Node **iv_node = NULL;
    int n_iv = 0, cap_iv = 0, cap_ivn = 0, n_ivn = 0;
    p->arena_unplanned = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        Node *n = g->nodes[i];
        n->materialized = 0;
        switch (n->op) {
        case OP_PARAM: n->materialized = 1; continue;
        case OP_INPUT:
        case OP_CONST: {
            int b = n->op == OP_INPUT ? BUF_IO : BUF_CONSTS;
            n->buffer = b;
            n->offset = size[b];
            size[b] = align_up(size[b] + node_bytes(n), ALIGN);
            n->materialized = 1;
            continue;
        }
        case OP_STATE:
            n->buffer = BUF_STATE;
            n->offset = (int64_t)offsetof(MmcStepState, loss_seed);
            n->materialized = 1;
            continue;
        case OP_SLICE: continue; /* placed with what it slices, below */
        case OP_CONCAT:
            n->materialized = 1;
            if (n->in[0]->op == OP_PARAM) { /* fp32 weights: the parameters themselves */
                n->buffer = BUF_PARAMS;
                n->offset = n->in[0]->offset;
                continue;
            }
            if (!n->a.axis) { /* the cast weights, side by side in the weights buffer */
                n->buffer = BUF_WEIGHTS;
                n->offset = size[BUF_WEIGHTS];
                size[BUF_WEIGHTS] = align_up(size[BUF_WEIGHTS] + node_bytes(n), ALIGN);
                continue;
            }
            { /* gradients written side by side: alive from the first one's writer on */
                int first = p->n_groups, last = last_use[n->id];
                for (int k = 0; k < n->n_in; k++) {
                    const Node *x = n->in[k];
                    if (x->group < first) first = x->group;
                    if (last_use[x->id] > last) last = last_use[x->id];
                }
                n->buffer = BUF_ARENA;
                Interval x = {align_up(node_bytes(n), ALIGN), first, last < first ? first : last, 0};
                vec_push(iv, n_iv, cap_iv, x);
                vec_push(iv_node, n_ivn, cap_ivn, n);
                p->arena_unplanned += x.size;
            }
            continue;
        default: break;
        }
        if (in_concat[n->id]) continue; /* placed in the concat, below */
        if (!stored(n, last_use, in_concat, g) && n != logits) continue;
        n->materialized = 1;
        if (node_adds_to_grads(n)) {
            n->buffer = BUF_GRADS;
            n->offset = g->params[n->a.param].offset * (int64_t)master;
        } else if (n->group >= 0 && p->groups[n->group]->kind == GK_CAST_PARAMS) {
            n->buffer = BUF_WEIGHTS;
            n->offset = size[BUF_WEIGHTS];
            size[BUF_WEIGHTS] = align_up(size[BUF_WEIGHTS] + node_bytes(n), ALIGN);
        } else {
            n->buffer = BUF_ARENA;
            /* the loss stays until the trainer reads it after the micro phase */
            int last = n == g->loss || n == logits ? p->n_groups : last_use[n->id] < n->group ? n->group : last_use[n->id];
            Interval x = {align_up(node_bytes(n), ALIGN), n->group, last, 0};
            vec_push(iv, n_iv, cap_iv, x);
            vec_push(iv_node, n_ivn, cap_ivn, n);
            p->arena_unplanned += x.size;
        }
    }
    int *alias = xmalloc(((size_t)n_iv + 1) * sizeof(int));
    alias_overwrites(g, p, last_use, iv, iv_node, n_iv, alias);
    Interval *own = xmalloc(((size_t)n_iv + 1) * sizeof *own); /* the intervals that take bytes of their own */
    int n_own = 0;
    for (int i = 0; i < n_iv; i++)
        if (alias[i] < 0) own[n_own++] = iv[i];
    size[BUF_ARENA] = plan_intervals(own, n_own, ALIGN);
    for (int i = 0, j = 0; i < n_iv; i++)
        if (alias[i] < 0) iv[i].offset = own[j++].offset;
    for (int i = 0; i < n_iv; i++) iv_node[i]->offset = iv[alias[i] < 0 ? i : alias[i]].offset;
    free(alias), free(own);
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i]->op == OP_CONCAT) place_concat_inputs(g->nodes[i]);
        if (g->nodes[i]->op == OP_SLICE) place_slice(g->nodes[i]);
    }
    /* the grad-norm kernel: one block per chunk of a parameter, partial sums in scratch */
    p->grad_chunk = 8192;
    p->n_chunks = 0;
    for (int i = 0; i < g->n_params; i++)
        p->n_chunks += (int)((shape_numel(&g->params[i].node->shape) + p->grad_chunk - 1) / p->grad_chunk);
    size[BUF_SCRATCH] = align_up((int64_t)MMC_GRAD_NORM_BYTES((int64_t)p->n_chunks, (int64_t)g->n_params), ALIGN);
    memcpy(p->buffer_bytes, size, sizeof size);
    free(iv);
    free(iv_node);
    free(last_use);
    free(in_concat);
}
