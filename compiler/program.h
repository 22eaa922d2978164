/* program: what the compiler lowers a graph to: kernel groups in schedule order and the
 * buffers their tensors live in. Codegen renders it as kernels.cu and the plan file. */
#ifndef MMC_PROGRAM_H
#define MMC_PROGRAM_H

#include <stdint.h>

#include "ir.h"

/* kernels.cu: the line between what every kernel needs (buffers, prelude, shared templates)
 * and the kernels, each of which starts with a "// ---- NAME" line. The runtime compiles the
 * kernels in several translation units at once, each the part above this line and a few of
 * the kernels (runtime/nvrtc_compile.c). */
#define KERNELS_MARKER "// ==== kernels: each compiles with the part above this line"
#define KERNEL_START "\n// ---- "

/*        enum        name       what it holds */
#define MMC_BUFFERS(X)                                                                   \
    X(IO,      "io",      "input tensors the runtime fills each micro-step (ids, labels)") \
    X(PARAMS,  "params",  "master weights, flat, in the policy's master dtype")            \
    X(WEIGHTS, "weights", "low-precision working copies of weights, cast once per step")   \
    X(GRADS,   "grads",   "gradients, flat, same layout as params")                        \
    X(ADAM_M,  "adam_m",  "AdamW first moments, same layout as params")                    \
    X(ADAM_V,  "adam_v",  "AdamW second moments, same layout as params")                   \
    X(CONSTS,  "consts",  "constant tables computed once (RoPE cos/sin)")                  \
    X(STATE,   "state",   "the step state (templates/step_state.h)")                       \
    X(SCRATCH, "scratch", "per-launch partial results of the optimizer kernels")           \
    X(ARENA,   "arena",   "activations, placed by lifetime")

typedef enum BufferId {
#define X(e, name, doc) BUF_##e,
    MMC_BUFFERS(X)
#undef X
    BUF_COUNT
} BufferId;

const char *buffer_name(int b);
int buffer_parse(const char *name); /* -1 if unknown */

/*        enum         name               what a group of the kind is */
#define MMC_GROUP_KINDS(X)                                                                          \
    X(ELEMENTWISE, "elementwise",     "a fused chain of elementwise ops")                           \
    X(ANCHOR,      "anchor",          "an anchor op's template with fused prologue/epilogue ops")   \
    X(GEMM,        "gemm",            "one cuBLASLt call")                                          \
    X(CAST_PARAMS, "cast_weights",    "every weight cast of the step, in one launch")               \
    X(OPTIMIZER,   "optimizer",       "a fixed kernel of the update phase (MMC_OPTIMIZER_KERNELS)") \
    X(GRADS,       "grad_accumulate", "every gradient sum no kernel took (a GEMM's dW), in one launch")

typedef enum GroupKind {
#define X(e, name, doc) GK_##e,
    MMC_GROUP_KINDS(X)
#undef X
    GK_COUNT
} GroupKind;

const char *group_kind_name(GroupKind k);
int group_kind_parse(const char *name); /* -1 if unknown */

/*        enum    name      when it runs */
#define MMC_PHASES(X)                                                                      \
    X(MICRO,  "micro",  "each micro-step: forward and backward, gradients accumulated")    \
    X(UPDATE, "update", "once per update: unscale, inf check, norm, clip, AdamW, scaler")

typedef enum Phase {
#define X(e, name, doc) PHASE_##e,
    MMC_PHASES(X)
#undef X
    PHASE_COUNT
} Phase;

const char *phase_name(Phase ph);
int phase_parse(const char *name); /* -1 if unknown */

/* The update phase's kernels, in the order they run; each has a template of its name
 * (templates/NAME.cu) and a function of the ref backend.
 *        enum         name           what it computes */
#define MMC_OPTIMIZER_KERNELS(X)                                                                          \
    X(GRAD_NORM,   "grad_norm",   "unscale, inf check, per-tensor norms, clip coefficient, learning rate") \
    X(ADAMW,       "adamw",       "AdamW on the flat buffers (skipped on inf/nan), gradients zeroed")      \
    X(STEP_FINISH, "step_finish", "GradScaler update and step counters")

typedef enum OptimizerKernel {
#define X(e, name, doc) OPT_##e,
    MMC_OPTIMIZER_KERNELS(X)
#undef X
    OPT_COUNT
} OptimizerKernel;

const char *optimizer_kernel_name(OptimizerKernel k);
int optimizer_kernel_parse(const char *name); /* -1 if unknown */
/* each table's names, NULL-terminated, for the messages that list them */
extern const char *const group_kind_names[GK_COUNT + 1];
extern const char *const phase_names[PHASE_COUNT + 1];
extern const char *const optimizer_kernel_names[OPT_COUNT + 1];

enum { GROUP_MAX_TILES = 16 };
typedef struct Tile {
    const char *key; /* the template's hole */
    int64_t value;
} Tile;

typedef struct Group {
    int id;
    GroupKind kind;
    Phase phase;
    int stream;            /* 0: the phase's main stream; 1: the side stream (a side_stream
                              anchor), joined before its first consumer */
    Node *anchor;          /* the anchor or GEMM node; NULL otherwise */
    Node *row_sum;         /* a sum_to over the rows the anchor walks, reduced in the same
                              pass (a row_sums anchor); NULL otherwise */
    Node **nodes;          /* members in topological order */
    int n_nodes, cap_nodes;
    OptimizerKernel optimizer; /* GK_OPTIMIZER: which one */
    char *kernel;          /* kernel name in kernels.cu */
    /* set by the launch step (codegen_launch.c), before any code is written */
    const char *tmpl;            /* the template that renders the kernel; NULL for a GEMM */
    int wide;                    /* 8 consecutive elements a thread, with 16-byte accesses */
    int64_t grid, grid_y, block; /* launch shape; block is every template's {{BLOCK}} */
    int64_t smem;                /* dynamic shared memory bytes */
    Tile tiles[GROUP_MAX_TILES]; /* the tile sizes and counts the template is filled with */
    int n_tiles;
} Group;

typedef struct Program {
    Group **groups; /* schedule order once pass_schedule ran */
    int n_groups, cap_groups;
    int64_t buffer_bytes[BUF_COUNT];
    int64_t arena_unplanned; /* bytes the arena would need without reuse */
    int n_ops_unfused;       /* kernels + GEMMs one per op, for the report */
    int64_t grad_chunk;      /* elements per block of the grad-norm kernel */
    int n_chunks;            /* blocks of the grad-norm kernel */
} Program;

Group *program_add_group(Program *p, GroupKind kind, Phase phase);
void program_drop_empty_groups(Program *p);

/* A GEMM node as row-major C[m, n] = sum over k of A . B, with A [m, k] or (transposed)
 * [k, m] and B [k, n] or [n, k]: linear is x . W^T (layout "NT"), linear_dx dy . W ("NN"),
 * linear_dw dy^T . x ("TN"). */
typedef struct GemmShape {
    int64_t m, n, k;
    int trans_a, trans_b;
    const Node *a, *b;
} GemmShape;
GemmShape gemm_shape(const Node *n);
void group_add(Group *gr, Node *n);
/* n is `anchor` or computed from it within gr */
int depends_on(const Node *n, const Node *anchor, const Group *gr);
const Node *group_overwriter(const Group *gr);

#endif
