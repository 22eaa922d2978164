/* pass_precision: gives every forward node a compute dtype and a storage dtype from the
 * policy's rules, and inserts the casts, the way torch.autocast does at dispatch:
 *  - a rule with a dtype casts each floating input to it (weights and constants once per
 *    step, through a cache, as autocast's cast cache; activations at every use);
 *  - "follow" leaves inputs alone: native type promotion decides (unlisted ops);
 *  - "promote" casts every floating input to the widest among them.
 * The best rule wins: highest priority, then the latest written. Explicit casts and
 * type_as in the graph are kept as written. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "util.h"

static int rule_matches(const Rule *r, const Node *n) {
    if (r->op && strcmp(r->op, op_info[n->op].name) != 0) return 0;
    if (r->cls && prec_class_parse(r->cls) != op_info[n->op].prec) return 0;
    if (r->name && (!n->name || fnmatch(r->name, n->name, 0) != 0)) return 0;
    return 1;
}

static int best_rule(const Policy *p, const Node *n) {
    int best = -1;
    for (int i = 0; i < p->n_rules; i++) {
        const Rule *r = &p->rules[i];
        if (!rule_matches(r, n)) continue;
        if (best < 0 || r->priority > p->rules[best].priority ||
            (r->priority == p->rules[best].priority && r->order > p->rules[best].order))
            best = i;
    }
    return best;
}

typedef struct Ctx {
    Graph *g;
    Node **leaf_cast; /* [leaf id * DT_COUNT + dtype] */
} Ctx;

/* A cast made by the pass; ir_node appends it to the list being rebuilt, just before its
 * consumer. */
static Node *make_cast(Ctx *c, Node *x, DType to, const Node *consumer) {
    int leaf = op_info[x->op].kind == OK_LEAF;
    Node **slot = leaf ? &c->leaf_cast[(size_t)x->id * DT_COUNT + to] : NULL;
    if (slot && *slot) return *slot;
    Node *k = ir_node1(c->g, OP_CAST, x, consumer->where);
    k->a.to = to;
    k->shape = x->shape;
    k->compute = x->dtype;
    k->dtype = to;
    if (x->name) k->name = xasprintf("%s:%s", x->name, dtype_name(to));
    if (slot) *slot = k;
    return k;
}

static DType floor_of(const Policy *p, DType t) {
    if (p->at_least == DT_NONE || !dtype_is_float(t)) return t;
    return dtype_promote(t, p->at_least) == p->at_least ? p->at_least : t;
}

static void assign(Ctx *c, Node *n) {
    const OpInfo *info = &op_info[n->op];
    const Policy *pol = &c->g->policy;
    if (info->kind == OK_LEAF) {
        n->dtype = n->compute = floor_of(pol, n->dtype);
        return;
    }
    if (n->op == OP_TYPE_AS) { /* becomes the cast it stands for, now that the dtype is known */
        n->op = OP_CAST;
        n->a.to = n->in[1]->dtype;
        n->n_in = 1;
        n->explicit_cast = 1;
    }
    if (n->op == OP_CAST) {
        n->a.to = floor_of(pol, n->a.to);
        ir_infer_dtype(n);
        return;
    }
    const char *action = "follow";
    if (info->prec != PC_NONE) {
        n->rule = best_rule(&c->g->policy, n);
        if (n->rule >= 0) action = c->g->policy.rules[n->rule].compute;
    }
    DType target = floor_of(pol, dtype_parse(action));
    if (strcmp(action, "promote") == 0) {
        target = DT_NONE;
        for (int i = 0; i < n->n_in; i++)
            if (info->float_in & (1u << i)) target = dtype_promote(target, n->in[i]->dtype);
    }
    if (target != DT_NONE)
        for (int i = 0; i < n->n_in; i++)
            if ((info->float_in & (1u << i)) && n->in[i]->dtype != target) n->in[i] = make_cast(c, n->in[i], target, n);
    ir_infer_dtype(n);
    n->dtype = floor_of(pol, n->dtype);
}

void pass_precision(Graph *g) {
    Ctx c = {g, xcalloc((size_t)g->next_id * DT_COUNT + DT_COUNT, sizeof(Node *))};
    int n_old = g->n_nodes;
    Node **old = g->nodes;
    g->nodes = NULL;
    g->n_nodes = g->cap_nodes = 0;
    /* a rule on names that matches no node is a misspelt name more likely than a choice */
    for (int r = 0; r < g->policy.n_rules; r++) {
        const Rule *rule = &g->policy.rules[r];
        int hit = 0;
        for (int i = 0; i < n_old && rule->name && !hit; i++) hit = rule_matches(rule, old[i]);
        if (rule->name && !hit)
            die("%s: rule name = \"%s\" matches no node of graph '%s' (mmc compile %s --dump frontend lists the names)",
                rule->where ? rule->where : g->policy.source, rule->name, g->name, g->source);
    }
    for (int i = 0; i < n_old; i++) {
        assign(&c, old[i]);
        vec_push(g->nodes, g->n_nodes, g->cap_nodes, old[i]);
    }
    free(old);
    free(c.leaf_cast);
}
