/* compile: runs the passes in order, with an IR dump available after each. */
#include "compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "op_rules.h"
#include "passes.h"
#include "plan.h"
#include "util.h"

static int dump_here(const char *dump_after, const char *pass, CompileResult *r) {
    if (!dump_after || strcmp(dump_after, pass) != 0) return 0;
    StrBuf o = {0};
    ir_dump(r->g, r->p, pass, &o);
    if (r->p && r->p->n_groups) {
        sb_append(&o, "# kernels\n");
        for (int i = 0; i < r->p->n_groups; i++) {
            Group *gr = r->p->groups[i];
            if (gr->kernel) sb_printf(&o, "%s:", gr->kernel);
            else sb_printf(&o, "group %d:", i); /* before the schedule names the kernels */
            for (int k = 0; k < gr->n_nodes; k++) sb_printf(&o, " %%%d", gr->nodes[k]->id);
            sb_append(&o, "\n");
            if (gr->kind == GK_GEMM && gr->kernel) { /* from the schedule on */
                GemmShape g = gemm_shape(gr->anchor);
                sb_printf(&o, "    %s m=%lld n=%lld k=%lld layout=%c%c\n", gr->n_nodes > 1 ? "GEMM + epilogue" : "cuBLASLt", (long long)g.m, (long long)g.n, (long long)g.k,
                          g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N');
            }
            if (gr->tmpl) { /* from the launch step on */
                sb_printf(&o, "    %s grid=%lld", gr->tmpl, (long long)gr->grid);
                if (gr->grid_y > 1) sb_printf(&o, "x%lld", (long long)gr->grid_y);
                sb_printf(&o, " block=%lld smem=%lld%s", (long long)gr->block, (long long)gr->smem, gr->wide ? " wide" : "");
                for (int t = 0; t < gr->n_tiles; t++) sb_printf(&o, " %s=%lld", gr->tiles[t].key, (long long)gr->tiles[t].value);
                sb_append(&o, "\n");
            }
        }
    }
    r->report = o.s;
    return 1;
}

/* ---- the passes in order, one table: --dump names them from it */

typedef struct Compile {
    const CompileOptions *opt;
    CompileResult r;
    int remat; /* 0 off, 1 on, 2 also the values only GEMMs read */
} Compile;

static void run_frontend(Compile *c) {
    c->r.g = frontend_load(&c->opt->front);
    /* the options change the kernels, so they are part of the plan's identity */
    char *options = xasprintf("fusion=%d remat=%d reference=%u forward=%d merge=%d%s%s%s", !c->opt->no_fusion, c->remat,
                              c->opt->reference_kernels, c->opt->forward_only, !c->opt->no_merge,
                              c->opt->no_dw_add ? " dw_add=0" : "", c->opt->fuse_loss_grad ? " loss_grad=1" : "",
                              c->opt->gemm_epilogues == GEMM_EPILOGUES_ALL    ? " epilogues=1"
                              : c->opt->gemm_epilogues == GEMM_EPILOGUES_NONE ? " epilogues=0"
                                                                              : "");
    char *hash = plan_hash(c->r.g, options); /* of the sources (the frontend's hash) and the options */
    free(c->r.g->hash);
    c->r.g->hash = hash;
    free(options);
}
static void run_precision(Compile *c) { pass_precision(c->r.g); }
static void run_autodiff(Compile *c) {
    Graph *g = c->r.g;
    if (!c->opt->forward_only) pass_autodiff(g);
    else /* the loss kernel's extra outputs, which autodiff would have asked for */
        for (int k = 1; k <= op_info[g->loss->op].n_parts; k++) ir_part(g, g->loss, k);
}
static void run_simplify(Compile *c) { pass_simplify(c->r.g); }
static void run_remat(Compile *c) {
    if (c->remat) pass_remat(c->r.g, c->remat == 2);
}
static void run_fusion(Compile *c) {
    c->r.p = xcalloc(1, sizeof *c->r.p);
    pass_fusion(c->r.g, c->r.p, !c->opt->no_fusion, !(c->opt->reference_kernels & REF_SUM_TO), c->opt->reference_kernels,
                c->opt->fuse_loss_grad);
}
static void run_merge(Compile *c) {
    if (!c->opt->no_merge) pass_merge(c->r.g, c->r.p);
}
static void run_dw_add(Compile *c) {
    if (!c->opt->no_dw_add && !c->opt->forward_only) pass_dw_add(c->r.g, c->r.p);
}
static void run_epilogue(Compile *c) {
    if (c->opt->gemm_epilogues != GEMM_EPILOGUES_NONE && !c->opt->no_fusion)
        pass_epilogue(c->r.g, c->r.p, c->opt->reference_kernels, c->opt->gemm_epilogues == GEMM_EPILOGUES_ALL);
}
static void run_schedule(Compile *c) { pass_schedule(c->r.g, c->r.p); }
static void run_memplan(Compile *c) { pass_memplan(c->r.g, c->r.p); }
static void run_launch(Compile *c) { pass_launch(c->r.g, c->r.p, c->opt->reference_kernels); }

static const struct {
    const char *name;
    void (*run)(Compile *c);
} passes[] = {
    {"frontend", run_frontend}, {"precision", run_precision}, {"autodiff", run_autodiff}, {"simplify", run_simplify},
    {"remat", run_remat},       {"fusion", run_fusion},       {"merge", run_merge},       {"dw_add", run_dw_add},
    {"epilogue", run_epilogue}, {"schedule", run_schedule}, {"memplan", run_memplan},   {"launch", run_launch},
};
enum { N_PASSES = sizeof passes / sizeof passes[0] };

const char *compile_pass_names(void) {
    static char names[256];
    if (!names[0])
        for (int i = 0; i < N_PASSES; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", passes[i].name);
    return names;
}

CompileResult compile_graph(const CompileOptions *opt) {
    const char *dump_after = opt->dump_after;
    int stop = N_PASSES - 1;
    if (dump_after) {
        stop = -1;
        for (int i = 0; i < N_PASSES; i++)
            if (!strcmp(passes[i].name, dump_after)) stop = i;
        if (stop < 0) die("--dump %s: no such pass (passes: %s)", dump_after, compile_pass_names());
    }
    Compile c = {opt, {0}, opt->no_remat || opt->forward_only ? 0 : opt->remat_gemm_inputs ? 2 : 1};
    for (int i = 0; i < N_PASSES; i++) {
        passes[i].run(&c);
        if (dump_after && i == stop && dump_here(dump_after, passes[i].name, &c.r)) return c.r;
    }
    c.r.kernels = codegen_cuda(c.r.g, c.r.p, opt->reference_kernels);
    c.r.plan = plan_write(c.r.g, c.r.p, c.r.kernels);
    return c.r;
}
