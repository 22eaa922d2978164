/* ops: the one table of operations. Each op has a name, an arity, a kind that says how it
 * becomes code (leaf, elementwise, GEMM, or an anchor with its own kernel template), a
 * precision class that policies match on, fusion hooks, a shape rule, a dtype rule, a
 * derivative rule, and for elementwise ops the math, once in C and once in CUDA. */
#ifndef MMC_OPS_H
#define MMC_OPS_H

#include "attrs.h"
#include "dtype.h"

/*  enum                     name                     */
#define MMC_OPS(X)                                      \
    X(INPUT,                 "input")                   \
    X(PARAM,                 "param")                   \
    X(CONST,                 "const")                   \
    X(STATE,                 "state")                   \
    X(CAST,                  "cast")                    \
    X(TYPE_AS,               "type_as")                 \
    X(ADD,                   "add")                     \
    X(ADD_,                  "add_")                    \
    X(MUL,                   "mul")                     \
    X(SCALE,                 "scale")                   \
    X(SCALE_ROWS,            "scale_rows")              \
    X(SILU,                  "silu")                    \
    X(SILU_BACKWARD,         "silu_backward")           \
    X(EXPAND,                "expand")                  \
    X(GRAD_ACCUMULATE,       "grad_accumulate")         \
    X(LINEAR,                "linear")                  \
    X(LINEAR_DX,             "linear_dx")               \
    X(LINEAR_DW,             "linear_dw")               \
    X(LINEAR_DW_ADD,         "linear_dw_add")           \
    X(EMBEDDING,             "embedding")               \
    X(EMBEDDING_SORT,        "embedding_sort")          \
    X(EMBEDDING_BACKWARD,    "embedding_backward")      \
    X(RMS_NORMALIZE,         "rms_normalize")           \
    X(RMS_NORMALIZE_BACKWARD,"rms_normalize_backward")  \
    X(ROPE,                  "rope")                    \
    X(ROPE_BACKWARD,         "rope_backward")           \
    X(ATTENTION,             "attention")               \
    X(ATTENTION_BACKWARD_DQ, "attention_backward_dq")   \
    X(ATTENTION_BACKWARD_DKV,"attention_backward_dkv")  \
    X(CROSS_ENTROPY,         "cross_entropy")           \
    X(CROSS_ENTROPY_BACKWARD,"cross_entropy_backward")  \
    X(TARGET_COUNT,          "target_count")            \
    X(SUM_TO,                "sum_to")                  \
    X(SUM_ALL,               "sum_all")                 \
    X(PART,                  "part")                    \
    X(SLICE,                 "slice")                   \
    X(CONCAT,                "concat")

typedef enum Op {
#define X(e, name) OP_##e,
    MMC_OPS(X)
#undef X
    OP_COUNT
} Op;

typedef enum OpKind {
    OK_LEAF,        /* inputs, parameters, constants, step-state slots: no code */
    OK_ELEMENTWISE, /* one output element from the same element of each input: fusable */
    OK_GEMM,        /* a cuBLASLt call */
    OK_ANCHOR,      /* a kernel template that elementwise neighbours may fuse into */
    OK_PART,        /* an extra output of a multi-output node */
    OK_VIEW,        /* no code: a part of another value's memory (slice), or memory its
                       inputs are written into side by side (concat); pass_merge makes them */
} OpKind;

typedef enum PrecClass {
    PC_NONE,   /* never changed by rules: leaves, casts, parts, backward-only ops */
    PC_LOWER,  /* autocast's lower_precision_fp list: matmuls, attention */
    PC_FP32,   /* autocast's fp32 list: pow/rsqrt/norms, sum */
    PC_FOLLOW, /* not listed: runs in the dtype of its inputs, by native promotion */
    PC_COUNT
} PrecClass;

struct Node;
struct Graph;
typedef char *(*ShapeRule)(struct Node *n);    /* sets n->shape or returns an error */
typedef void (*DTypeRule)(struct Node *n);     /* sets n->dtype from n->compute and inputs */
typedef void (*GradRule)(struct Graph *g, struct Node *n, struct Node *dy, struct Node **dx);
typedef void (*PartRule)(struct Node *producer, int index, struct Node *part);
typedef double (*EvalFn)(const double *x, const struct Node *n);
struct Gen;
struct Split;
struct Keys;
struct RefOpCtx;
typedef void (*LaunchFn)(struct Gen *G, const struct Split *s);
typedef void (*GenFn)(struct Gen *G, struct Keys *ks, struct Split *s);
typedef void (*RefFn)(const struct RefOpCtx *c, const struct Node *n, double **in, double *out, double **parts);

typedef struct OpInfo {
    const char *name;
    int n_in;
    OpKind kind;
    PrecClass prec;
    unsigned attrs;     /* bit ATTR_x set = the op uses attribute x (attrs.h) */
    int n_parts;        /* extra outputs, reached through OP_PART nodes */
    unsigned prologue;  /* anchors: bit i set = input i may be computed by fused elementwise ops */
    int epilogue;       /* anchors: elementwise consumers of the output may fuse in */
    int row_sums;       /* anchors over the rows of their inputs' last dim: a sum_to over the
                           same rows may reduce in the same kernel, in the same pass */
    int side_stream;    /* anchors that need only the step's inputs and one block: they run on
                           a second stream from the start of the phase, beside the others */
    int rope_out;       /* anchors whose kernel stages each row of a head of its output in shared
                           memory (the attention gradients dq and dk): a rope_backward that alone
                           reads that output may run in the kernel as it stores the rows */
    unsigned float_in;  /* bit i set = input i is a floating-point tensor that rules may cast */
    unsigned row_in;    /* elementwise: bit i set = input i holds one value per row of the
                           result (the result's shape without its last dim) */
    int overwrites;     /* anchors: 1 + the input whose bytes the kernel may write its result
                           over (pass_memplan), where that input dies in the kernel: it reads
                           each element of it only where, and before, it writes that element;
                           0: none */
    ShapeRule shape;
    DTypeRule dtype;    /* NULL: dtype = compute */
    GradRule grad;      /* NULL: not differentiable */
    PartRule part;
    EvalFn eval;        /* elementwise: the math on doubles, for the ref backend */
    const char *cuda;   /* elementwise: the math in CUDA, inputs written $0 $1 ..., attrs $eps $scale */
    const char *cuda_unit; /* the same math in a GEMM epilogue's unit of 8 elements, taking the
                              unit's `math` (MmcFast, then MmcExact where any element set
                              `untame`: templates/gemm_epilogue.cu); NULL: cuda */
    /* anchors: the kernel in two steps (codegen_anchors.c, codegen_attention.c) */
    LaunchFn launch;    /* the launch step: picks the template, the launch shape and the tiles */
    GenFn gen;          /* fills the template's other holes */
    const char *templates; /* the templates launch may pick, space-separated */
    RefFn ref;          /* anchors and GEMMs: the math on doubles, for the ref backend (ref_ops.c) */
    const char *doc;
} OpInfo;

extern const OpInfo op_info[OP_COUNT];
Op op_parse(const char *name); /* OP_COUNT if unknown */
PrecClass prec_class_parse(const char *name); /* PC_COUNT if unknown */

#endif
