/* compile_cli: `mmc compile`. Writes DIR/kernels.cu and DIR/plan (each atomically), with a
 * precision schedule or a fallback the other plans and phases.json too (compile_plans.h), and
 * prints the report; with --dump PASS prints the IR after that pass and writes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "codegen.h"
#include "compile.h"
#include "compile_plans.h"
#include "util.h"

int cmd_compile(int argc, char **argv) {
    CompileOptions copt = {0};
    FrontendOptions opt = {0};
    const char *out = NULL, *dump = NULL;
    int quiet = 0, cap = 0, cap_dirs = 0;
    /* always a list, maybe empty: the graph reads below its own folder and the -I folders */
    const char **dirs = xcalloc(1, sizeof *dirs);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-o") || !strcmp(a, "--policy") || !strcmp(a, "-D") || !strcmp(a, "--dump") || !strcmp(a, "-I") ||
             !strcmp(a, "--lua-memory") || !strcmp(a, "--lua-steps")) && i + 1 >= argc)
            die("compile: %s needs a value", a);
        if (!strcmp(a, "-o")) out = argv[++i];
        else if (!strcmp(a, "--policy")) opt.policy_path = argv[++i];
        else if (!strcmp(a, "-I") || !strncmp(a, "-I", 2)) {
            const char *dir = !strcmp(a, "-I") ? argv[++i] : a + 2;
            vec_push(dirs, opt.n_include_dirs, cap_dirs, dir);
        }
        else if (!strcmp(a, "--lua-memory"))
            opt.lua_memory = option_range("compile", a, argv[++i], 1, (int64_t)1 << 20) << 20; /* MiB, up to 1 TiB */
        else if (!strcmp(a, "--lua-steps")) opt.lua_steps = option_range("compile", a, argv[++i], 10000, (int64_t)1e15);
        else if (!strcmp(a, "--dump")) dump = argv[++i];
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!strcmp(a, "--no-fusion")) copt.no_fusion = 1;
        else if (!strcmp(a, "--reference-kernels")) copt.reference_kernels = REF_ALL;
        else if (!strncmp(a, "--reference-kernels=", 20)) {
            int m = codegen_reference_parse(a + 20);
            if (m < 0) die("compile: --reference-kernels=%s: kinds are attention, sum_to, embedding, wide, gemm (or all)", a + 20);
            copt.reference_kernels = (unsigned)m;
        }
        else if (!strcmp(a, "--no-remat")) copt.no_remat = 1;
        else if (!strcmp(a, "--no-merge")) copt.no_merge = 1;
        else if (!strcmp(a, "--no-dw-add")) copt.no_dw_add = 1;
        else if (!strcmp(a, "--gemm-epilogues")) copt.gemm_epilogues = GEMM_EPILOGUES_ALL;
        else if (!strcmp(a, "--no-gemm-epilogues")) copt.gemm_epilogues = GEMM_EPILOGUES_NONE;
        else if (!strcmp(a, "--remat-gemm-inputs")) copt.remat_gemm_inputs = 1;
        else if (!strcmp(a, "--fuse-loss-grad")) copt.fuse_loss_grad = 1;
        else if (!strcmp(a, "--forward")) copt.forward_only = 1;
        else if (!strcmp(a, "-D") || !strncmp(a, "-D", 2)) {
            const char *kv = !strcmp(a, "-D") ? argv[++i] : a + 2;
            const char *eq = strchr(kv, '=');
            if (!eq || eq == kv) die("compile: -D needs key=value, got '%s'", kv);
            Define d = {xstrndup(kv, (size_t)(eq - kv)), xstrdup(eq + 1)};
            vec_push(opt.defines, opt.n_defines, cap, d);
        } else if (a[0] == '-') {
            static const char *const known[] = {"-o", "--policy", "--dump", "--quiet", "--no-fusion", "--reference-kernels",
                                                "--no-remat", "--no-merge", "--no-dw-add", "--gemm-epilogues", "--no-gemm-epilogues", "--remat-gemm-inputs", "--fuse-loss-grad", "--forward", "-D", "-I",
                                                "--lua-memory", "--lua-steps", NULL};
            die_unknown_option("compile", a, known);
        }
        else if (!opt.graph_path) opt.graph_path = a;
        else die("compile: one graph file at a time (got %s and %s)", opt.graph_path, a);
    }
    if (!opt.graph_path) die("compile: which graph file? usage: mmc compile GRAPH.lua [-o DIR]");
    opt.include_dirs = dirs;
    /* generated/ holds the plans of the graphs as committed; a plan made with other settings
     * goes to a folder of its own */
    const char *changes = opt.n_defines ? "-D" : opt.policy_path ? "--policy" : copt.no_fusion ? "--no-fusion"
                          : copt.no_remat ? "--no-remat" : copt.no_merge ? "--no-merge"
                          : copt.no_dw_add ? "--no-dw-add"
                          : copt.gemm_epilogues == GEMM_EPILOGUES_ALL ? "--gemm-epilogues"
                          : copt.gemm_epilogues == GEMM_EPILOGUES_NONE ? "--no-gemm-epilogues"
                          : copt.remat_gemm_inputs ? "--remat-gemm-inputs"
                          : copt.fuse_loss_grad ? "--fuse-loss-grad"
                          : copt.reference_kernels ? "--reference-kernels" : copt.forward_only ? "--forward" : NULL;
    if (changes && !out && !dump)
        die("compile: %s makes another plan than the committed one in generated/: give it a folder with -o DIR", changes);
    copt.front = opt;
    copt.dump_after = dump;
    CompiledPlans plans = compile_plans(&copt); /* with a precision schedule, a plan a phase */
    if (dump) {
        char *text = compiled_plans_dump(&plans);
        fputs(text, stdout);
        free(text);
        return 0;
    }
    char *dir = out ? xstrdup(out) : xasprintf("generated/%s", plans.phase[0].g->name);
    compiled_plans_write(&plans, dir);
    if (!quiet) {
        char *rep = compiled_plans_report(&plans, dir);
        fputs(rep, stdout);
        free(rep);
    }
    free(dir);
    return 0;
}
