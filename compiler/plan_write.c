/* plan_write: the plan as text (see plan.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "plan.h"
#include "util.h"

char *plan_hash(const Graph *g) {
    Sha256 h;
    sha256_init(&h);
    char fmt[32];
    snprintf(fmt, sizeof fmt, "mmc-plan %d", MMC_PLAN_FORMAT);
    sha256_update(&h, fmt, strlen(fmt) + 1);
    sha256_update(&h, g->hash, strlen(g->hash) + 1);
    codegen_hash_templates(&h);
    char hex[65];
    sha256_hex(&h, hex);
    return xstrdup(hex);
}

static void dims(StrBuf *o, const Shape *s) {
    sb_append(o, " shape=");
    if (s->rank == 0) sb_append(o, "scalar");
    for (int i = 0; i < s->rank; i++) sb_printf(o, "%s%lld", i ? "," : "", (long long)s->dim[i]);
}

/* the attributes an op uses, as key=value */
static void attrs(StrBuf *o, const Node *n) {
    const Attrs *a = &n->a;
    switch (n->op) {
    case OP_CAST: sb_printf(o, " to=%s", dtype_name(a->to)); break;
    case OP_SCALE: sb_printf(o, " scale=%.17g", a->scale); break;
    case OP_RMS_NORMALIZE:
    case OP_RMS_NORMALIZE_BACKWARD: sb_printf(o, " eps=%.17g", a->eps); break;
    case OP_ROPE: sb_printf(o, " heads=%d", a->heads); break;
    case OP_ROPE_BACKWARD: sb_printf(o, " heads=%d to=%s", a->heads, dtype_name(a->to)); break;
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

static void node_line(StrBuf *o, const char *word, const Node *n) {
    sb_printf(o, "%s %%%d %s", word, n->id, op_info[n->op].name);
    if (n->n_in) {
        sb_append(o, " in=");
        for (int k = 0; k < n->n_in; k++) sb_printf(o, "%s%%%d", k ? "," : "", n->in[k]->id);
    }
    dims(o, &n->shape);
    sb_printf(o, " dtype=%s", dtype_name(n->dtype));
    if (n->compute != DT_NONE && n->compute != n->dtype) sb_printf(o, " compute=%s", dtype_name(n->compute));
    attrs(o, n);
    if (n->materialized && n->buffer >= 0) sb_printf(o, " at=%s+%lld", buffer_name(n->buffer), (long long)n->offset);
    if (n->backward) sb_append(o, " bwd=1");
    if (n->name) sb_printf(o, " name=%s", n->name);
    sb_append(o, "\n");
}

static const char *phase_name(Phase ph) { return ph == PHASE_MICRO ? "micro" : "update"; }

const char *group_kind_name(GroupKind k) {
    static const char *const names[] = {"elementwise", "anchor", "gemm", "cast_weights", "optimizer"};
    return names[k];
}

char *plan_write(const Graph *g, const Program *p) {
    StrBuf o = {0};
    const Policy *pol = &g->policy;
    const TrainConfig *t = &g->train;
    sb_printf(&o, "mmc-plan %d\n", MMC_PLAN_FORMAT);
    sb_printf(&o, "graph %s\nsource %s\nhash %s\n", g->name, g->source, g->hash);
    sb_printf(&o, "policy name=%s rounding=%s master=%s source=%s\n", pol->name, pol->round_eager ? "eager" : "fused",
              dtype_name(pol->master), pol->source ? pol->source : "-");
    sb_append(&o, "config");
    for (int i = 0; i < g->n_config; i++) {
        const ConfigEntry *e = &g->config[i];
        if (e->text) sb_printf(&o, " %s=%s", e->key, e->text);
        else sb_printf(&o, " %s=%.17g", e->key, e->value);
    }
    sb_append(&o, "\n");
    sb_printf(&o,
              "train lr=%.17g beta1=%.17g beta2=%.17g eps=%.17g weight_decay=%.17g schedule=%s clip=%.17g "
              "loss_scaling=%d scale_init=%.17g scale_growth=%.17g scale_backoff=%.17g scale_interval=%d "
              "accumulation=%d epochs=%d log_interval=%d\n",
              t->lr, t->beta1, t->beta2, t->eps, t->weight_decay, t->schedule, t->clip, t->loss_scaling, t->scale_init,
              t->scale_growth, t->scale_backoff, t->scale_interval, t->accumulation, t->epochs, t->log_interval);
    sb_printf(&o, "grad_norm chunk=%lld chunks=%d\n", (long long)p->grad_chunk, p->n_chunks);
    for (int b = 0; b < BUF_COUNT; b++) sb_printf(&o, "buffer %s %lld\n", buffer_name(b), (long long)p->buffer_bytes[b]);
    for (int i = 0; i < g->n_params; i++) {
        const Param *pa = &g->params[i];
        sb_printf(&o, "param %d %s", i, pa->node->name);
        dims(&o, &pa->node->shape);
        sb_printf(&o, " offset=%lld node=%%%d", (long long)pa->offset, pa->node->id);
        if (pa->alias) sb_printf(&o, " alias=%s", pa->alias);
        sb_append(&o, "\n");
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (op_info[g->nodes[i]->op].kind == OK_LEAF) node_line(&o, "leaf", g->nodes[i]);
    for (int i = 0; i < p->n_groups; i++) {
        const Group *gr = p->groups[i];
        const char *kind = gr->kind == GK_GEMM ? "gemm" : "kernel";
        sb_printf(&o, "%s %s kind=%s phase=%s grid=%lld grid_y=%lld block=%lld smem=%lld", kind, gr->kernel,
                  group_kind_name(gr->kind), phase_name(gr->phase), (long long)gr->grid, (long long)gr->grid_y, (long long)gr->block, (long long)gr->smem);
        if (gr->kind == GK_OPTIMIZER) sb_printf(&o, " optimizer=%s", gr->optimizer);
        if (gr->kind == GK_GEMM) {
            GemmShape s = gemm_shape(gr->anchor);
            sb_printf(&o, " m=%lld n=%lld k=%lld layout=%c%c", (long long)s.m, (long long)s.n, (long long)s.k,
                      s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N');
        }
        if (gr->anchor) sb_printf(&o, " anchor=%%%d", gr->anchor->id);
        sb_append(&o, "\n");
        for (int k = 0; k < gr->n_nodes; k++) node_line(&o, "op", gr->nodes[k]);
    }
    sb_printf(&o, "loss %%%d\n", g->loss->id);
    sb_append(&o, "end\n");
    return o.s;
}
