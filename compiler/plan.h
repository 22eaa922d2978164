/* plan: the text file that is the only thing passing from compiler to runtime. A person can
 * read and diff it: a header (format version, hash of the inputs, graph, policy, config,
 * training settings), the buffers, the parameters, the leaf tensors, then the schedule:
 * one `kernel` or `gemm` line per group followed by one `op` line per node it computes.
 * Every op line carries everything the ref backend needs to execute it. */
#ifndef MMC_PLAN_H
#define MMC_PLAN_H

#include "program.h"

#define MMC_PLAN_FORMAT 2

char *plan_hash(const Graph *g, const char *options); /* of the frontend inputs, compile options, templates, format */
char *plan_write(const Graph *g, const Program *p);

/* A plan read back: the same Graph and Program structures the compiler made. */
typedef struct Plan {
    Graph *g;
    Program *p;
    Node **by_id;
    int n_ids;
    char *path;
    char *kernels; /* kernels.cu when held in memory (tests); else read from beside the plan */
} Plan;

Plan *plan_read(const char *text, const char *path);
Plan *plan_load(const char *dir); /* reads DIR/plan; plans live as long as the process */

#endif
