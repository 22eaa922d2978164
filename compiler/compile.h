/* compile: the pipeline from a graph file to generated/<graph>/{kernels.cu, plan}. */
#ifndef MMC_COMPILE_H
#define MMC_COMPILE_H

#include "frontend.h"
#include "program.h"

typedef struct CompileResult {
    Graph *g;
    Program *p;
    char *kernels; /* kernels.cu */
    char *plan;    /* plan text */
    char *report;
} CompileResult;

/* Runs every pass; with dump_after set, stops after that pass and returns its dump in
 * report (kernels and plan NULL). Dies with a located message on bad input. */
CompileResult compile_graph(const FrontendOptions *opt, const char *dump_after);
const char *compile_pass_names(void);
char *compile_report(const Graph *g, const Program *p, const char *out_dir);

#endif
