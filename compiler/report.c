/* report: what `mmc compile` prints: the policy (and a precision schedule's phases and
 * fallback), parameters, ops before and after fusion, each kernel with the ops it fuses, the
 * precision table of the forward pass, and the memory plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "compile.h"
#include "compile_plans.h"
#include "util.h"

static void thousands(StrBuf *o, int64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    int n = (int)strlen(buf);
    for (int i = 0; i < n; i++) {
        sb_appendn(o, &buf[i], 1);
        if (i < n - 1 && (n - 1 - i) % 3 == 0) sb_append(o, ",");
    }
}

static void bytes(StrBuf *o, int64_t b) {
    if (b >= (1ll << 30)) sb_printf(o, "%.2f GiB", (double)b / (1ll << 30));
    else if (b >= (1ll << 20)) sb_printf(o, "%.2f MiB", (double)b / (1ll << 20));
    else sb_printf(o, "%.1f KiB", (double)b / 1024);
}

/* "precision schedule: updates 1-1000 fp32 (phase1/), 1001- amp_fp16 (this plan); fallback:
 * amp_bf16 (fallback/) when more than 1% of 100 updates overflow" */
static void schedule_line(StrBuf *o, const CompiledPlans *c) {
    const PrecisionSchedule *s = c->schedule;
    if (s->n_phases) {
        sb_append(o, "precision schedule: updates ");
        int64_t first = 1;
        for (int k = 0; k < c->n_phases; k++) {
            const int64_t n = s->phases[k].updates;
            sb_printf(o, "%s%lld-", k ? ", " : "", (long long)first);
            const char *name = c->phase[k].g->policy.name;
            if (k + 1 == c->n_phases) {
                sb_printf(o, " %s (this plan)", name);
                break;
            }
            char *dir = compiled_plan_dir(c, k);
            sb_printf(o, "%lld %s (%s/)", (long long)(first + n - 1), name, dir);
            free(dir);
            first += n;
        }
    }
    if (c->has_fallback) {
        char d[32], *when = schedule_fallback_condition(s);
        sb_printf(o, "%sfallback: %s", s->n_phases ? "; " : "", c->fallback.g->policy.name);
        if (s->to_scale > 0) sb_printf(o, " at a fixed loss scale of %s", fmt_double(d, s->to_scale));
        sb_printf(o, " (fallback/) %s", when);
        free(when);
    }
    sb_append(o, "\n");
}

static char *report(const Graph *g, const Program *p, const char *out_dir, const CompiledPlans *c) {
    StrBuf o = {0};
    sb_printf(&o, "mmc compile %s -> %s\n", g->source, out_dir);
    sb_printf(&o, "policy %s (%s), rounding %s, master weights %s, loss scaling %s\n", g->policy.name,
              g->policy.source ? g->policy.source : "-", g->policy.round_eager ? "eager" : "fused",
              dtype_name(g->policy.master), g->train.loss_scaling ? "on" : "off");
    if (c && c->schedule) schedule_line(&o, c);
    int64_t total = 0;
    for (int i = 0; i < g->n_params; i++) total += shape_numel(&g->params[i].node->shape);
    sb_append(&o, "\nparameters: ");
    thousands(&o, total);
    sb_printf(&o, " in %d tensors\n", g->n_params);
    for (int i = 0; i < g->n_params; i++) {
        const Node *n = g->params[i].node;
        char *s = shape_str(&n->shape);
        sb_printf(&o, "  %-48s %-12s ", n->name, s);
        thousands(&o, shape_numel(&n->shape));
        sb_append(&o, "\n");
        free(s);
    }
    int kernels = 0, gemms = 0;
    for (int i = 0; i < p->n_groups; i++) {
        if (p->groups[i]->kind == GK_GEMM) gemms++;
        else kernels++;
    }
    sb_printf(&o, "\nops: %d before fusion; after: %d kernels + %d cuBLASLt GEMMs (%d launches a step)\n",
              p->n_ops_unfused, kernels, gemms, kernels + gemms);
    for (int i = 0; i < p->n_groups; i++) {
        const Group *gr = p->groups[i];
        sb_printf(&o, "  %-56s", gr->kernel);
        if (gr->kind == GK_OPTIMIZER) sb_printf(&o, " [update]");
        int segments = 0; /* the one-launch tables: say how many, not each */
        for (int k = 0; k < gr->n_nodes; k++) {
            if (gr->nodes[k]->op == OP_PART) continue;
            if (gr->kind == GK_CAST_PARAMS || gr->kind == GK_GRADS) segments++;
            else sb_printf(&o, " %s", op_info[gr->nodes[k]->op].name);
        }
        if (segments) sb_printf(&o, " %s x%d", gr->kind == GK_GRADS ? "grad_accumulate" : "cast", segments);
        sb_append(&o, "\n");
    }
    /* the precision table: every forward op, with the rule that decided it */
    int n_casts_rule = 0, n_casts_graph = 0, n_casts_bwd = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        if (n->op != OP_CAST) continue;
        if (n->backward) n_casts_bwd++;
        else if (n->explicit_cast) n_casts_graph++;
        else n_casts_rule++;
    }
    sb_printf(&o, "\nprecision: %d casts from rules, %d written in the graph, %d in the backward pass\n", n_casts_rule,
              n_casts_graph, n_casts_bwd);
    sb_printf(&o, "  %-46s %-14s %-8s %-8s %s\n", "node", "op", "compute", "storage", "decided by");
    /* the projections are listed as the graph file wrote them; the GEMMs they run as follow */
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        if (n->backward || op_info[n->op].kind == OK_LEAF || n->op == OP_PART || n->op == OP_CONCAT || n->merged == MERGED_GEMM)
            continue;
        const char *op = n->merged == MERGED_SLICE ? op_info[n->in[0]->op].name : op_info[n->op].name;
        const char *why = n->rule >= 0 ? g->policy.rules[n->rule].where
                          : n->op == OP_CAST ? (n->explicit_cast ? "the graph" : "rule (input cast)")
                                             : "native promotion";
        sb_printf(&o, "  %-46s %-14s %-8s %-8s %s\n", node_label(n), op, dtype_name(n->compute), dtype_name(n->dtype), why);
    }
    int merged = 0;
    for (int i = 0; i < g->n_nodes; i++) merged += g->nodes[i]->merged == MERGED_GEMM;
    if (merged) sb_printf(&o, "\nmerged: %d GEMMs each do the work of several (mmc compile --no-merge keeps them apart)\n", merged);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->merged == MERGED_GEMM) sb_printf(&o, "  %s\n", node_label(g->nodes[i]));
    int adds = 0;
    DType sums = DT_F32; /* the GEMM's accumulators */
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == OP_LINEAR_DW_ADD) adds++, sums = g->nodes[i]->compute == DT_F64 ? DT_F64 : DT_F32;
    if (adds)
        sb_printf(&o, "\nweight gradients: %d GEMMs add their %s sums into the %s gradients (beta = 1), dW never rounded to "
                      "its own dtype (rounding %s; mmc compile --no-dw-add writes dW and adds it in a kernel)\n",
                  adds, dtype_name(sums), dtype_name(g->policy.master),
                  g->policy.round_eager ? "eager, dW already in that dtype" : "fused");
    int epilogues = 0, paired = 0;
    for (int i = 0; i < p->n_groups; i++) {
        const Group *gr = p->groups[i];
        GemmEpilogue e;
        if (gr->kind != GK_GEMM || gr->n_nodes == 1) continue;
        epilogues++;
        if (!gemm_epilogue_refusal(gr->anchor, gr->nodes + 1, gr->n_nodes - 1, 0, &e)) paired += e.paired;
    }
    if (epilogues)
        sb_printf(&o, "\nepilogues: %d GEMMs compute the elementwise ops that read their product (%d of them from its two "
                      "column halves), on sm_90a in the GEMM's kernel (mmc compile --reference-kernels=gemm keeps them apart)\n",
                  epilogues, paired);
    sb_append(&o, "\nmemory: arena ");
    bytes(&o, p->buffer_bytes[BUF_ARENA]);
    sb_append(&o, " planned vs ");
    bytes(&o, p->arena_unplanned);
    if (p->arena_unplanned > 0)
        sb_printf(&o, " unplanned (%.0f%% saved)", 100.0 * (1.0 - (double)p->buffer_bytes[BUF_ARENA] / (double)p->arena_unplanned));
    sb_append(&o, "\n");
    for (int b = 0; b < BUF_COUNT; b++) {
        if (b == BUF_ARENA) continue;
        sb_printf(&o, "  %-8s ", buffer_name(b));
        bytes(&o, p->buffer_bytes[b]);
        sb_append(&o, "\n");
    }
    return o.s;
}

char *compile_report(const Graph *g, const Program *p, const char *out_dir) { return report(g, p, out_dir, NULL); }

char *compiled_plans_report(const CompiledPlans *c, const char *out_dir) {
    const CompileResult *r = &c->phase[c->n_phases - 1];
    return report(r->g, r->p, out_dir, c);
}
