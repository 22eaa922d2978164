/* plan: the text file that is the only thing passing from compiler to runtime. A person can
 * read and diff it: a header (format version, hash of the inputs, the SHA-256 of its
 * kernels.cu, graph, policy, config, training settings), the buffers, the parameters, the
 * leaf tensors, then the schedule: one `kernel` or `gemm` line per group followed by one
 * `op` line per node it computes, and a `view` line for each slice or concat once what it is
 * made of is named (a view computes nothing: it names memory, rows ld= elements apart where
 * they are further apart than the last dim). Every op line carries everything the ref backend
 * needs to execute it. The last lines are `content sha256=` (of every byte before it) and `end`:
 * a plan changed after mmc compile wrote it, or cut, is refused. */
#ifndef MMC_PLAN_H
#define MMC_PLAN_H

#include "program.h"

#define MMC_PLAN_FORMAT 3

char *plan_hash(const Graph *g, const char *options); /* of the frontend inputs, compile options, templates, format */
/* the plan's text; `kernels` is the kernels.cu written beside it, whose SHA-256 it keeps */
char *plan_write(const Graph *g, const Program *p, const char *kernels);
/* the text with its `content` and `end` lines made again for what it holds: how plan_write
 * ends a plan, and how tests make the malformed plans that must be refused for what they hold */
char *plan_seal(const char *text);

/* A plan read back: the same Graph and Program structures the compiler made. */
typedef struct Plan {
    Graph *g;
    Program *p;
    Node **by_id;
    int n_ids;
    char *path;
    char *kernels; /* kernels.cu when held in memory (tests); else read from beside the plan */
    char kernels_sha256[65]; /* of the kernels.cu made with the plan */
} Plan;

/* Checks everything before anything is trusted: a plan that is cut, edited, or holds a value
 * the backends would index with out of range is refused with FILE:LINE: what. */
Plan *plan_read(const char *text, const char *path);
Plan *plan_load(const char *dir); /* reads DIR/plan; plans live as long as the process */
/* The plan's kernels.cu (pl->kernels, else the file beside the plan), refused unless it is
 * the one made with the plan (caller frees). */
char *plan_kernels(const Plan *pl);

#endif
