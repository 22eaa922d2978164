/* compile: runs the passes in order, with an IR dump available after each. */
#include "compile.h"

#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "op_rules.h"
#include "passes.h"
#include "plan.h"
#include "util.h"

static const char *const pass_names[] = {"frontend", "precision", "autodiff", "simplify", "remat", "fusion", "schedule", "memplan", NULL};

const char *compile_pass_names(void) { return "frontend, precision, autodiff, simplify, remat, fusion, schedule, memplan"; }

static int dump_here(const char *dump_after, const char *pass, CompileResult *r) {
    if (!dump_after || strcmp(dump_after, pass) != 0) return 0;
    StrBuf o = {0};
    ir_dump(r->g, r->p, pass, &o);
    if (r->p && r->p->n_groups) {
        sb_append(&o, "# kernels\n");
        for (int i = 0; i < r->p->n_groups; i++) {
            Group *gr = r->p->groups[i];
            sb_printf(&o, "%s:", gr->kernel ? gr->kernel : "?");
            for (int k = 0; k < gr->n_nodes; k++) sb_printf(&o, " %%%d", gr->nodes[k]->id);
            sb_append(&o, "\n");
        }
    }
    r->report = o.s;
    return 1;
}

CompileResult compile_graph(const CompileOptions *opt) {
    const char *dump_after = opt->dump_after;
    if (dump_after) {
        int ok = 0;
        for (int i = 0; pass_names[i]; i++) ok |= strcmp(pass_names[i], dump_after) == 0;
        if (!ok) die("--dump %s: no such pass (passes: %s)", dump_after, compile_pass_names());
    }
    CompileResult r = {0};
    r.g = frontend_load(&opt->front);
    /* the options change the kernels, so they are part of the plan's identity */
    int remat = opt->no_remat || opt->forward_only ? 0 : opt->remat_gemm_inputs ? 2 : 1;
    char *options = xasprintf("fusion=%d remat=%d reference=%u forward=%d", !opt->no_fusion, remat, opt->reference_kernels,
                              opt->forward_only);
    r.g->hash = plan_hash(r.g, options);
    free(options);
    if (dump_here(dump_after, "frontend", &r)) return r;
    pass_precision(r.g);
    if (dump_here(dump_after, "precision", &r)) return r;
    if (!opt->forward_only) pass_autodiff(r.g);
    else /* the loss kernel's extra outputs, which autodiff would have asked for */
        for (int k = 1; k <= op_info[r.g->loss->op].n_parts; k++) ir_part(r.g, r.g->loss, k);
    if (dump_here(dump_after, "autodiff", &r)) return r;
    pass_simplify(r.g);
    if (dump_here(dump_after, "simplify", &r)) return r;
    if (remat) pass_remat(r.g, remat == 2);
    if (dump_here(dump_after, "remat", &r)) return r;
    r.p = xcalloc(1, sizeof *r.p);
    pass_fusion(r.g, r.p, !opt->no_fusion, !(opt->reference_kernels & REF_SUM_TO));
    if (dump_here(dump_after, "fusion", &r)) return r;
    pass_schedule(r.g, r.p);
    if (dump_here(dump_after, "schedule", &r)) return r;
    pass_memplan(r.g, r.p);
    if (dump_here(dump_after, "memplan", &r)) return r;
    r.kernels = codegen_cuda(r.g, r.p, opt->reference_kernels);
    r.plan = plan_write(r.g, r.p);
    return r;
}
