/* program: what the compiler lowers a graph to: kernel groups in schedule order and the
 * buffers their tensors live in. Codegen renders it as kernels.cu and the plan file. */
#ifndef MMC_PROGRAM_H
#define MMC_PROGRAM_H

#include <stdint.h>

#include "ir.h"

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

typedef enum GroupKind {
    GK_ELEMENTWISE,  /* a fused chain of elementwise ops */
    GK_ANCHOR,       /* an anchor op's template with fused prologue/epilogue ops */
    GK_GEMM,         /* one cuBLASLt call */
    GK_CAST_PARAMS,  /* every weight cast of the step, in one launch */
    GK_OPTIMIZER,    /* a fixed optimizer kernel: grad_norm, adamw, step_finish */
    GK_GRADS,        /* every gradient accumulation no kernel could take (a GEMM's dW), in one launch */
} GroupKind;

typedef enum Phase {
    PHASE_MICRO,  /* each micro-step: forward and backward, gradients accumulated */
    PHASE_UPDATE, /* once per update: unscale, inf check, norm, clip, AdamW, scaler */
} Phase;

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
    const char *optimizer; /* GK_OPTIMIZER: "grad_norm", "adamw", "step_finish" */
    char *kernel;          /* kernel name in kernels.cu */
    int64_t grid, grid_y, block; /* launch shape, set by codegen */
    int64_t smem;                /* dynamic shared memory bytes */
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

#endif
