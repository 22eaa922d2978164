/* dump: the IR as text, one node a line, for `mmc compile --dump PASS`:
 *   %12 = linear(%10, %11) [4,32,64] f16 (compute f16)  model.layers.0.self_attn.q_proj  @ graphs/tiny.lua:20
 * After fusion each node also shows its kernel group; after memplan, where it is stored. */
#include <stdlib.h>

#include "passes.h"
#include "util.h"

static void dump_attrs(const Node *n, StrBuf *o) {
    const Attrs *a = &n->a;
    switch (n->op) {
    case OP_CAST: sb_printf(o, " to=%s", dtype_name(a->to)); break;
    case OP_SCALE: sb_printf(o, " scale=%.9g", a->scale); break;
    case OP_RMS_NORMALIZE:
    case OP_RMS_NORMALIZE_BACKWARD: sb_printf(o, " eps=%.9g", a->eps); break;
    case OP_ROPE: sb_printf(o, " heads=%d", a->heads); break;
    case OP_ROPE_BACKWARD: sb_printf(o, " heads=%d round=%s", a->heads, dtype_name(a->to)); break;
    case OP_ATTENTION:
    case OP_ATTENTION_BACKWARD: sb_printf(o, " heads=%d kv_heads=%d causal=%d", a->heads, a->kv_heads, a->causal); break;
    case OP_CROSS_ENTROPY:
    case OP_CROSS_ENTROPY_BACKWARD: sb_printf(o, " ignore=%lld", (long long)a->ignore_index); break;
    case OP_PART: sb_printf(o, " index=%d", a->index); break;
    case OP_GRAD_ACCUMULATE: sb_printf(o, " param=%d", a->param); break;
    case OP_EMBEDDING_BACKWARD: sb_printf(o, " vocab=%lld", (long long)a->vocab); break;
    case OP_PARAM: sb_printf(o, " init=%s", a->init); break;
    case OP_CONST: sb_printf(o, " gen=%s", a->gen); break;
    case OP_STATE: sb_printf(o, " slot=%s", a->slot); break;
    default: break;
    }
}

void ir_dump(const Graph *g, const Program *p, const char *title, StrBuf *o) {
    sb_printf(o, "# %s: %s, %d nodes\n", title, g->name, g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        char *s = shape_str(&n->shape);
        sb_printf(o, "%%%d = %s(", n->id, op_info[n->op].name);
        for (int k = 0; k < n->n_in; k++) sb_printf(o, "%s%%%d", k ? ", " : "", n->in[k]->id);
        sb_append(o, ")");
        dump_attrs(n, o);
        sb_printf(o, " %s %s", s, dtype_name(n->dtype));
        if (n->compute != n->dtype && n->compute != DT_NONE) sb_printf(o, " (compute %s)", dtype_name(n->compute));
        if (n->name) sb_printf(o, "  %s", n->name);
        if (p && n->group >= 0) sb_printf(o, "  [%s]", p->groups[n->group]->kernel ? p->groups[n->group]->kernel : "?");
        if (p && n->buffer >= 0) sb_printf(o, "  {%s+%lld}", buffer_name(n->buffer), (long long)n->offset);
        if (n->rule >= 0) sb_printf(o, "  rule %s", g->policy.rules[n->rule].where);
        if (n->where && *n->where) sb_printf(o, "  @ %s", n->where);
        sb_append(o, "\n");
        free(s);
    }
}
