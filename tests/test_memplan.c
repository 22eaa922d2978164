/* The memory planner never gives two live buffers overlapping bytes: a property test over
 * many random interval sets, and over the arena of many random graphs compiled through
 * the whole pipeline, with lifetimes re-derived from the plan text (first writer kernel to
 * last reader kernel). */
#include "test_util.h"

#include "passes.h"

static int overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) { return a0 < b1 && b0 < a1; }

static void random_intervals(int round) {
    int n = 1 + (int)(test_uniform() * 300);
    Interval *iv = xcalloc((size_t)n, sizeof *iv);
    int horizon = 1 + (int)(test_uniform() * 100);
    for (int i = 0; i < n; i++) {
        iv[i].size = 1 + (int64_t)(test_uniform() * (test_uniform() < 0.1 ? 1e6 : 5000));
        iv[i].first = (int)(test_uniform() * horizon);
        iv[i].last = iv[i].first + (int)(test_uniform() * horizon / 4);
    }
    int64_t total = plan_intervals(iv, n, 256);
    int64_t peak = 0;
    for (int t = 0; t <= horizon * 2; t++) {
        int64_t live = 0;
        for (int i = 0; i < n; i++)
            if (iv[i].first <= t && t <= iv[i].last) live += iv[i].size;
        if (live > peak) peak = live;
    }
    CHECK(total >= peak, "round %d: arena %lld smaller than the peak live bytes %lld", round, (long long)total, (long long)peak);
    for (int i = 0; i < n; i++) {
        CHECK(iv[i].offset % 256 == 0, "round %d: offset %lld not aligned", round, (long long)iv[i].offset);
        CHECK(iv[i].offset + iv[i].size <= total, "round %d: interval %d ends past the arena", round, i);
        for (int j = i + 1; j < n; j++) {
            if (iv[i].first > iv[j].last || iv[j].first > iv[i].last) continue;
            CHECK(!overlap(iv[i].offset, iv[i].offset + iv[i].size, iv[j].offset, iv[j].offset + iv[j].size),
                  "round %d: intervals %d and %d live together and share bytes", round, i, j);
        }
    }
    free(iv);
}

/* Lua text of a random graph: a pool of tensors grows by random ops on members of equal
 * shape; the loss projects the last one. */
static char *random_graph(void) {
    static const int dims[] = {8, 16, 24};
    StrBuf s = {0};
    sb_append(&s, "local function P(n, s) return param(n, s, \"normal(0,0.5)\") end\n");
    int n = 4 + (int)(test_uniform() * 40);
    int shape[64];
    sb_printf(&s, "local t0 = P(\"x0\", {2,5,%d})\n", dims[0]);
    shape[0] = dims[0];
    int count = 1;
    for (int i = 0; i < n && count < 64; i++) {
        int a = (int)(test_uniform() * count), b = -1;
        for (int k = 0; k < count; k++)
            if (k != a && shape[k] == shape[a] && test_uniform() < 0.5) b = k;
        double r = test_uniform();
        int out = shape[a];
        if (r < 0.2 && b >= 0) sb_printf(&s, "local t%d = add(t%d, t%d)\n", count, a, b);
        else if (r < 0.3 && b >= 0) sb_printf(&s, "local t%d = add_(t%d, t%d)\n", count, a, b);
        else if (r < 0.4 && b >= 0) sb_printf(&s, "local t%d = mul(t%d, t%d)\n", count, a, b);
        else if (r < 0.5) sb_printf(&s, "local t%d = silu(t%d)\n", count, a);
        else if (r < 0.6) sb_printf(&s, "local t%d = scale(t%d, 0.5)\n", count, a);
        else if (r < 0.7) sb_printf(&s, "local t%d = rms_normalize(t%d, 1e-5)\n", count, a);
        else if (r < 0.8) sb_printf(&s, "local t%d = mul(P(\"w%d\", {%d}), t%d)\n", count, count, shape[a], a);
        else {
            out = dims[(int)(test_uniform() * 3)];
            sb_printf(&s, "local t%d = linear(t%d, P(\"w%d\", {%d,%d}))\n", count, a, count, out, shape[a]);
        }
        shape[count++] = out;
    }
    sb_printf(&s, "loss(sum_all(mul(t%d, P(\"r\", {2,5,%d}))))\n", count - 1, shape[count - 1]);
    return s.s;
}

/* x is read by kernel k: it, and what a view x lies in, are alive until then */
static void read_at(int *last, const Node *x, int k) {
    if (k > last[x->id]) last[x->id] = k;
    if (node_is_view(x))
        for (int j = 0; j < x->n_in; j++) read_at(last, x->in[j], k);
}

/* n is the result its kernel writes over x (pass_memplan: an anchor that may, where x dies
 * in that kernel): the same bytes */
static int written_over(const Plan *pl, const Node *n, const Node *x, const int *last) {
    if (n->group < 0) return 0;
    const Node *w = group_overwriter(pl->p->groups[n->group]);
    return w && node_overwritable_input(w) == x && last[x->id] == n->group && n->offset == x->offset;
}

/* Values never alive together may share bytes. A view owns none: a slice lies in what it
 * slices (whose life the reads of the slice extend), and a concat's inputs lie in the concat,
 * which lives from its first input's writer to the last read of any of them. A result
 * written over its kernel's input shares the input's bytes. */
static int check_plan(const char *what, Plan *pl) { /* the pairs of a result written over an input */
    const Graph *g = pl->g;
    int n_groups = pl->p->n_groups;
    int *last = xmalloc((size_t)pl->n_ids * sizeof(int)), *first = xmalloc((size_t)pl->n_ids * sizeof(int));
    char *in_concat = xcalloc((size_t)pl->n_ids, 1);
    for (int i = 0; i < pl->n_ids; i++) last[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        first[n->id] = n->group;
        if (n->group < 0) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]->group != n->group) read_at(last, n->in[k], n->group);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        if (n->op != OP_CONCAT) continue;
        first[n->id] = n_groups;
        for (int k = 0; k < n->n_in; k++) {
            const Node *x = n->in[k];
            in_concat[x->id] = 1;
            if (x->group < first[n->id]) first[n->id] = x->group;
            if (last[x->id] > last[n->id]) last[n->id] = last[x->id];
        }
    }
    const Node **arena = xmalloc((size_t)g->n_nodes * sizeof *arena);
    int m = 0, overwritten = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->buffer == BUF_ARENA && g->nodes[i]->op != OP_SLICE && !in_concat[g->nodes[i]->id]) arena[m++] = g->nodes[i];
    for (int i = 0; i < m; i++) {
        const Node *a = arena[i];
        int64_t ab = shape_numel(&a->shape) * (int64_t)dtype_size(a->dtype);
        int a0 = first[a->id], a1 = a == g->loss ? n_groups : last[a->id] < a0 ? a0 : last[a->id];
        CHECK(a->offset + ab <= pl->p->buffer_bytes[BUF_ARENA], "%s: %%%d ends past the arena", what, a->id);
        for (int j = i + 1; j < m; j++) {
            const Node *b = arena[j];
            int64_t bb = shape_numel(&b->shape) * (int64_t)dtype_size(b->dtype);
            int b0 = first[b->id], b1 = b == g->loss ? n_groups : last[b->id] < b0 ? b0 : last[b->id];
            if (a1 < b0 || b1 < a0) continue;
            if (written_over(pl, a, b, last) || written_over(pl, b, a, last)) {
                overwritten++;
                continue;
            }
            CHECK(!overlap(a->offset, a->offset + ab, b->offset, b->offset + bb),
                  "%s: %%%d (kernels %d..%d) and %%%d (kernels %d..%d) share bytes", what, a->id, a0, a1, b->id, b0, b1);
        }
    }
    free(arena);
    free(last), free(first), free(in_concat);
    return overwritten;
}

int main(void) {
    for (int round = 0; round < 300; round++) random_intervals(round);
    int graphs = 0;
    for (int round = 0; round < 60; round++) {
        char *lua = random_graph();
        char *path = test_write_graph("random_graph", lua);
        char name[64];
        snprintf(name, sizeof name, "random graph %d", round);
        check_plan(name, test_compile(path, round % 2 ? "amp_fp16" : "fp32", NULL, round % 3 != 0));
        graphs++;
        free(lua), free(path);
    }
    /* MiniMind's cross-entropy gradient is written over the logits: the one such pair */
    int over = check_plan("graphs/minimind.lua", test_compile("graphs/minimind.lua", NULL, NULL, 1));
    CHECK(over == 1, "graphs/minimind.lua: %d results written over an input, not 1 (dlogits over the logits)", over);
    check_plan("graphs/tiny.lua unfused", test_compile("graphs/tiny.lua", NULL, NULL, 0));
    printf("300 random interval sets, %d random graphs, minimind and tiny checked\n", graphs);
    return test_done("test_memplan");
}
