/* dump: the IR as text, one node a line, for `mmc compile --dump PASS`:
 *   %12 = linear(%10, %11) [4,32,64] f16 (compute f16)  model.layers.0.self_attn.q_proj  @ graphs/tiny.lua:20
 * After fusion each node also shows its kernel group; after memplan, where it is stored. */
#include <stdlib.h>

#include "passes.h"
#include "util.h"

void ir_dump(const Graph *g, const Program *p, const char *title, StrBuf *o) {
    sb_printf(o, "# %s: %s, %d nodes\n", title, g->name, g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        char *s = shape_str(&n->shape);
        sb_printf(o, "%%%d = %s(", n->id, op_info[n->op].name);
        for (int k = 0; k < n->n_in; k++) sb_printf(o, "%s%%%d", k ? ", " : "", n->in[k]->id);
        sb_append(o, ")");
        ir_attrs(o, n);
        sb_printf(o, " %s %s", s, dtype_name(n->dtype));
        if (n->compute != n->dtype && n->compute != DT_NONE) sb_printf(o, " (compute %s)", dtype_name(n->compute));
        if (n->name) sb_printf(o, "  %s", n->name);
        if (p && n->group >= 0) sb_printf(o, "  [%s]", p->groups[n->group]->kernel ? p->groups[n->group]->kernel : "?");
        if (p && n->buffer >= 0) sb_printf(o, "  {%s+%lld}", buffer_name(n->buffer), (long long)n->offset);
        if (p && n->buffer >= 0 && n->ld) sb_printf(o, " {rows %lld apart}", (long long)n->ld);
        if (n->rule >= 0) sb_printf(o, "  rule %s", g->policy.rules[n->rule].where);
        if (n->where && *n->where) sb_printf(o, "  @ %s", n->where);
        sb_append(o, "\n");
        free(s);
    }
}
