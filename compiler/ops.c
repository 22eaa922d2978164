/* ops: the op table (see ops.h), with the dtype rules, part rules and elementwise math
 * that are too small for a file of their own. */
#include "ops.h"

#include <math.h>
#include <string.h>

#include "codegen_internal.h"
#include "ir.h"
#include "layouts.h"
#include "op_rules.h"
#include "ref_ops.h"

/* ---- dtype rules: the result dtype once n->compute is known */

static void dtype_of_to(Node *n) { n->dtype = n->a.to; } /* cast, rope_backward: the `to` attribute */
static void dtype_of_first(Node *n) { n->dtype = n->in[0]->dtype; }
static void dtype_of_second(Node *n) { n->dtype = n->in[1]->dtype; }
static void dtype_of_third(Node *n) { n->dtype = n->in[2]->dtype; }
static void dtype_index(Node *n) { n->dtype = n->compute = DT_I32; }

/* cross_entropy: log-softmax runs in the logits' dtype (torch passes dtype=x.dtype), so its
 * output is rounded there; nll then reads it as f32. The loss itself is f32. */
static void dtype_cross_entropy(Node *n) {
    n->compute = n->in[0]->dtype;
    n->dtype = DT_F32;
}

/* target_count: the count in the `to` dtype (its caller's statistics dtype) */
static void dtype_count(Node *n) { n->dtype = n->compute = n->a.to; }

/* in-place add: computes in the promoted dtype, stores in the destination's. */
static void dtype_inplace(Node *n) { n->dtype = n->in[0]->dtype; }

static void dtype_part(Node *n) {
    Node *p = n->in[0];
    op_info[p->op].part(p, n->a.index, n);
}

/* ---- part rules: shapes and dtypes of extra outputs */

/* statistics kept for a backward pass: f32, or f64 when the op computes in f64 */
static DType stats_dtype(const Node *p) { return p->compute == DT_F64 ? DT_F64 : DT_F32; }

static void part_attention(Node *p, int index, Node *part) {
    /* 1: log-sum-exp of each score row, [B, H, T], kept for the backward pass */
    (void)index;
    part->shape = shape_make(3, p->shape.dim[0], (int64_t)p->a.heads, p->shape.dim[1]);
    part->dtype = part->compute = stats_dtype(p);
}

static void part_attention_backward_dq(Node *p, int index, Node *part) {
    /* 1: dsum = rowsum(dO * O) of each query row, [B, H, T], for the dk/dv kernel */
    (void)index;
    part->shape = shape_make(3, p->shape.dim[0], (int64_t)p->a.heads, p->shape.dim[1]);
    part->dtype = part->compute = stats_dtype(p);
}

static void part_attention_backward_dkv(Node *p, int index, Node *part) {
    /* 1: dv, in the shape and dtype of v */
    (void)index;
    part->shape = p->in[3]->shape;
    part->dtype = part->compute = p->in[3]->dtype;
}

static void part_rms_normalize(Node *p, int index, Node *part) {
    /* 1: each row's factor rsqrt(mean(x^2) + eps), the input's shape without its last dim, so
     * that the backward pass can remake the output from x (scale_rows) instead of keeping it */
    (void)index;
    const Shape *x = &p->in[0]->shape;
    part->shape = *x;
    part->shape.rank = x->rank - 1;
    part->dtype = part->compute = stats_dtype(p);
}

static void part_embedding_sort(Node *p, int index, Node *part) {
    /* 1: where each id's rows start in the sorted order, [vocab + 1] */
    (void)index;
    part->shape = shape_make(1, p->a.vocab + 1);
    part->dtype = part->compute = DT_I32;
}

static void part_cross_entropy(Node *p, int index, Node *part) {
    /* 1: per row (max, log-sum-exp, loss) of the logits (layouts.h); 2: count of targets not ignored */
    const Shape *x = &p->in[0]->shape;
    if (index == 1) part->shape = shape_make(2, shape_numel(x) / x->dim[x->rank - 1], (int64_t)MMC_CE_STATS);
    else part->shape = (Shape){0};
    part->dtype = part->compute = stats_dtype(p);
}

/* ---- elementwise math on doubles (the ref backend rounds the results) */

static double eval_first(const double *x, const Node *n) { (void)n; return x[0]; }
static double eval_add(const double *x, const Node *n) { (void)n; return x[0] + x[1]; }
static double eval_mul(const double *x, const Node *n) { (void)n; return x[0] * x[1]; }
static double eval_scale(const double *x, const Node *n) { return x[0] * n->a.scale; }
static double eval_silu(const double *x, const Node *n) { (void)n; return x[0] / (1.0 + exp(-x[0])); }
static double eval_silu_backward(const double *x, const Node *n) {
    (void)n;
    double s = 1.0 / (1.0 + exp(-x[1]));
    return x[0] * s * (1.0 + x[1] * (1.0 - s));
}

/* ---- the table */

#define B(i) (1u << (i))
#define A(e) ATTR_BIT(e)

const OpInfo op_info[OP_COUNT] = {
    [OP_INPUT] = {"input", 0, OK_LEAF, PC_NONE, .doc = "a tensor the runtime fills each micro-step (ids, labels)"},
    [OP_PARAM] = {"param", 0, OK_LEAF, PC_NONE, .attrs = A(INIT), .doc = "a trained weight, master copy in the policy's master dtype"},
    [OP_CONST] = {"const", 0, OK_LEAF, PC_NONE, .attrs = A(GEN), .doc = "a constant table computed once at start (RoPE cos/sin)"},
    [OP_STATE] = {"state", 0, OK_LEAF, PC_NONE, .attrs = A(SLOT), .doc = "a scalar of the step state (the loss-gradient seed)"},
    [OP_CAST] = {"cast", 1, OK_ELEMENTWISE, PC_NONE, .attrs = A(TO), .float_in = B(0), .shape = shape_same,
                 .dtype = dtype_of_to, .grad = grad_cast, .eval = eval_first, .cuda = "$0",
                 .doc = "round to another dtype"},
    [OP_TYPE_AS] = {"type_as", 2, OK_ELEMENTWISE, PC_NONE, .float_in = B(0), .shape = shape_same,
                    .eval = eval_first, .cuda = "$0",
                    .doc = "cast to the dtype the second input gets (torch's type_as); a cast after precision"},
    [OP_ADD] = {"add", 2, OK_ELEMENTWISE, PC_FOLLOW, .float_in = B(0) | B(1), .shape = shape_broadcast,
                .grad = grad_add, .eval = eval_add, .cuda = "mmc_add($0, $1)", .doc = "a + b"},
    [OP_ADD_] = {"add_", 2, OK_ELEMENTWISE, PC_FOLLOW, .float_in = B(0) | B(1), .shape = shape_inplace,
                 .dtype = dtype_inplace, .grad = grad_add, .eval = eval_add, .cuda = "mmc_add($0, $1)",
                 .doc = "dst += src: computed in the promoted dtype, stored in dst's (torch add_)"},
    [OP_MUL] = {"mul", 2, OK_ELEMENTWISE, PC_FOLLOW, .float_in = B(0) | B(1), .shape = shape_broadcast,
                .grad = grad_mul, .eval = eval_mul, .cuda = "mmc_mul($0, $1)", .doc = "a * b"},
    [OP_SCALE] = {"scale", 1, OK_ELEMENTWISE, PC_FOLLOW, .attrs = A(SCALE), .float_in = B(0), .shape = shape_same,
                  .grad = grad_scale, .eval = eval_scale, .cuda = "mmc_mul($0, $scale)",
                  .doc = "x * constant (a Python scalar: keeps x's dtype)"},
    [OP_SCALE_ROWS] = {"scale_rows", 2, OK_ELEMENTWISE, PC_NONE, .float_in = B(0) | B(1), .row_in = B(1),
                       .shape = shape_scale_rows, .eval = eval_mul, .cuda = "mmc_mul($0, $1)",
                       .doc = "x * r, one r per row of x (rms_normalize's output remade from its row factors)"},
    [OP_SILU] = {"silu", 1, OK_ELEMENTWISE, PC_FOLLOW, .float_in = B(0), .shape = shape_same,
                 .grad = grad_silu, .eval = eval_silu, .cuda = "mmc_silu($0)",
                 .cuda_unit = "mmc_silu(math, untame, $0)", .doc = "x * sigmoid(x)"},
    [OP_SILU_BACKWARD] = {"silu_backward", 2, OK_ELEMENTWISE, PC_NONE, .float_in = B(0) | B(1),
                          .shape = shape_silu_backward, .eval = eval_silu_backward,
                          .cuda = "mmc_silu_backward($0, $1)",
                          .cuda_unit = "mmc_silu_backward(math, untame, $0, $1)", .doc = "dy * silu'(x)"},
    [OP_EXPAND] = {"expand", 1, OK_ELEMENTWISE, PC_NONE, .float_in = B(0), .shape = shape_expand,
                   .grad = grad_expand, .eval = eval_first, .cuda = "$0",
                   .doc = "broadcast to a larger shape"},
    [OP_GRAD_ACCUMULATE] = {"grad_accumulate", 1, OK_ELEMENTWISE, PC_NONE, .attrs = A(PARAM), .float_in = B(0),
                            .shape = shape_same, .eval = eval_first, .cuda = "$0",
                            .doc = "grads[param] += g (the flat gradient buffer)"},
    [OP_LINEAR] = {"linear", 2, OK_GEMM, PC_LOWER, .float_in = B(0) | B(1), .shape = shape_linear,
                   .grad = grad_linear, .ref = ref_gemm, .doc = "x @ W^T (torch.nn.functional.linear, no bias)"},
    [OP_LINEAR_DX] = {"linear_dx", 2, OK_GEMM, PC_NONE, .float_in = B(0) | B(1), .shape = shape_linear_dx,
                      .ref = ref_gemm, .doc = "dy @ W"},
    [OP_LINEAR_DW] = {"linear_dw", 2, OK_GEMM, PC_NONE, .float_in = B(0) | B(1), .shape = shape_linear_dw,
                      .ref = ref_gemm, .doc = "dy^T @ x over all rows"},
    [OP_LINEAR_DW_ADD] = {"linear_dw_add", 2, OK_GEMM, PC_NONE, .attrs = A(PARAM), .float_in = B(0) | B(1),
                          .shape = shape_linear_dw, .ref = ref_gemm,
                          .doc = "grads[param...] += dy^T @ x: the GEMM's f32 sums added to the gradients of param and "
                                 "the params after it, side by side (cuBLASLt's beta = 1; pass_dw_add)"},
    [OP_EMBEDDING] = {"embedding", 2, OK_ANCHOR, PC_FOLLOW, .epilogue = 1, .float_in = B(0),
                      .shape = shape_embedding, .dtype = dtype_of_first, .grad = grad_embedding,
                      .launch = launch_embedding, .gen = gen_embedding,
                 .templates = "embedding_wide.cu embedding.cu", .ref = ref_embedding,
                 .doc = "rows of W picked by ids"},
    [OP_EMBEDDING_SORT] = {"embedding_sort", 1, OK_ANCHOR, PC_NONE, .attrs = A(VOCAB), .n_parts = 1, .side_stream = 1, .shape = shape_embedding_sort,
                           .dtype = dtype_index, .part = part_embedding_sort,
                           .launch = launch_embedding_sort, .gen = gen_embedding_sort,
                 .templates = "embedding_sort.cu", .ref = ref_embedding_sort,
                 .doc = "row indices grouped by id, in row order (a stable counting sort; part: starts)"},
    [OP_EMBEDDING_BACKWARD] = {"embedding_backward", 4, OK_ANCHOR, PC_NONE, .attrs = A(VOCAB), .epilogue = 1, .float_in = B(0),
                               .shape = shape_embedding_backward,
                               .launch = launch_embedding_backward, .gen = gen_embedding_backward,
                 .templates = "embedding_backward_sorted.cu embedding_backward.cu", .ref = ref_embedding_backward,
                 .doc = "dW[v] = sum of dy rows whose id is v (in: dy, ids, sorted rows, starts)"},
    [OP_RMS_NORMALIZE] = {"rms_normalize", 1, OK_ANCHOR, PC_FP32, .attrs = A(EPS), .prologue = B(0), .epilogue = 1,
                          .n_parts = 1, .float_in = B(0), .shape = shape_rows, .grad = grad_rms_normalize,
                          .part = part_rms_normalize,
                          .launch = launch_rms_rows, .gen = gen_rms_rows,
                 .templates = "rms_normalize_rows.cu", .ref = ref_rms_normalize,
                 .doc = "x * rsqrt(mean(x^2, -1) + eps) (part: the row factors rsqrt(...))"},
    [OP_RMS_NORMALIZE_BACKWARD] = {"rms_normalize_backward", 2, OK_ANCHOR, PC_NONE, .attrs = A(EPS), .prologue = B(0) | B(1),
                                   .epilogue = 1, .row_sums = 1, .float_in = B(0) | B(1),
                                   .shape = shape_rms_normalize_backward, .launch = launch_rms_rows, .gen = gen_rms_rows,
                 .templates = "rms_normalize_rows.cu", .ref = ref_rms_normalize_backward,
                 .doc = "d rms_normalize"},
    [OP_ROPE] = {"rope", 3, OK_ANCHOR, PC_FOLLOW, .attrs = A(HEADS), .epilogue = 1, .float_in = B(0) | B(1) | B(2),
                 .shape = shape_rope, .grad = grad_rope,
                 .launch = launch_rope, .gen = gen_rope,
                 .templates = "rope_wide.cu rope.cu", .ref = ref_rope,
                 .doc = "x*cos + rotate_half(x)*sin per head (MiniMind apply_rotary_pos_emb)"},
    [OP_ROPE_BACKWARD] = {"rope_backward", 3, OK_ANCHOR, PC_NONE, .attrs = A(HEADS) | A(TO), .epilogue = 1, .float_in = B(0) | B(1) | B(2),
                          .shape = shape_rope, .dtype = dtype_of_to, .launch = launch_rope, .gen = gen_rope,
                 .templates = "rope_backward_wide.cu rope_backward.cu", .ref = ref_rope,
                 .doc = "d rope"},
    [OP_ATTENTION] = {"attention", 3, OK_ANCHOR, PC_LOWER, .attrs = A(HEADS) | A(KV_HEADS) | A(CAUSAL), .n_parts = 1, .float_in = B(0) | B(1) | B(2),
                      .shape = shape_attention, .grad = grad_attention, .part = part_attention,
                      .launch = launch_attention, .gen = gen_attention,
                 .templates = "attention_flash.cu attention.cu", .ref = ref_attention,
                 .doc = "softmax(q k^T / sqrt(hd)) v, causal, grouped kv heads (SDPA)"},
    [OP_ATTENTION_BACKWARD_DQ] = {"attention_backward_dq", 6, OK_ANCHOR, PC_NONE, .attrs = A(HEADS) | A(KV_HEADS) | A(CAUSAL), .n_parts = 1, .rope_out = 1,
                                  .float_in = B(0) | B(1) | B(2) | B(3) | B(4), .shape = shape_attention_backward_dq,
                                  .dtype = dtype_of_second, .part = part_attention_backward_dq,
                                  .launch = launch_attention, .gen = gen_attention,
                 .templates = "attention_backward_dq_flash.cu attention_backward_dq.cu", .ref = ref_attention_backward_dq,
                 .doc = "dq of attention(dO, q, k, v, O, lse) (part: rowsum(dO * O))"},
    [OP_ATTENTION_BACKWARD_DKV] = {"attention_backward_dkv", 6, OK_ANCHOR, PC_NONE, .attrs = A(HEADS) | A(KV_HEADS) | A(CAUSAL), .n_parts = 1, .rope_out = 1,
                                   .float_in = B(0) | B(1) | B(2) | B(3), .shape = shape_attention_backward_dkv,
                                   .dtype = dtype_of_third, .part = part_attention_backward_dkv,
                                   .launch = launch_attention, .gen = gen_attention,
                 .templates = "attention_backward_dkv_flash.cu attention_backward_dkv.cu", .ref = ref_attention_backward_dkv,
                 .doc = "dk of attention(dO, q, k, v, lse, dsum) (part: dv)"},
    [OP_CROSS_ENTROPY] = {"cross_entropy", 2, OK_ANCHOR, PC_FOLLOW, .attrs = A(IGNORE), .n_parts = 2, .float_in = B(0),
                          .shape = shape_cross_entropy, .dtype = dtype_cross_entropy,
                          .grad = grad_cross_entropy, .part = part_cross_entropy,
                          .launch = launch_cross_entropy, .gen = gen_cross_entropy,
                 .templates = "cross_entropy_wide.cu cross_entropy.cu", .ref = ref_cross_entropy,
                 .doc = "mean over kept targets of -log_softmax(logits)[target]"},
    [OP_CROSS_ENTROPY_BACKWARD] = {"cross_entropy_backward", 5, OK_ANCHOR, PC_NONE, .attrs = A(IGNORE), .epilogue = 1,
                                   .overwrites = 1 + 1, /* dlogits over the logits */
                                   .float_in = B(1), .shape = shape_cross_entropy_backward,
                                   .launch = launch_cross_entropy_backward, .gen = gen_cross_entropy_backward,
                 .templates = "cross_entropy_backward_wide.cu cross_entropy_backward.cu", .ref = ref_cross_entropy_backward,
                 .doc = "d cross_entropy / d logits"},
    [OP_TARGET_COUNT] = {"target_count", 1, OK_ANCHOR, PC_NONE, .attrs = A(IGNORE) | A(TO), .side_stream = 1,
                         .shape = shape_target_count, .dtype = dtype_count,
                         .launch = launch_target_count, .gen = gen_target_count,
                 .templates = "target_count.cu", .ref = ref_target_count,
                 .doc = "how many labels are not ignore, as a float: the divisor of cross_entropy's gradient, "
                        "counted from the step's labels alone so the gradient can be written in the loss's pass"},
    [OP_SUM_TO] = {"sum_to", 1, OK_ANCHOR, PC_NONE, .prologue = B(0), .epilogue = 1, .float_in = B(0),
                   .shape = shape_sum_to, .grad = grad_sum_to, .launch = launch_sum, .gen = gen_sum,
                 .templates = "sum_to_split_wide.cu sum_to_split.cu sum_to.cu", .ref = ref_sums,
                 .doc = "sum over leading dims"},
    [OP_SUM_ALL] = {"sum_all", 1, OK_ANCHOR, PC_FP32, .prologue = B(0), .float_in = B(0),
                    .shape = shape_scalar, .grad = grad_sum_all, .launch = launch_sum, .gen = gen_sum,
                 .templates = "sum_all.cu", .ref = ref_sums,
                 .doc = "sum of all elements"},
    [OP_PART] = {"part", 1, OK_PART, PC_NONE, .attrs = A(INDEX), .dtype = dtype_part, .doc = "an extra output of its input"},
    [OP_SLICE] = {"slice", 1, OK_VIEW, PC_NONE, .attrs = A(AXIS) | A(BEGIN) | A(SIZE), .float_in = B(0), .shape = shape_slice,
                  .dtype = dtype_of_first, .doc = "indices [begin, begin + size) of the first or the last dim, in place"},
    [OP_CONCAT] = {"concat", -1, OK_VIEW, PC_NONE, .attrs = A(AXIS), .float_in = 0x3f, .shape = shape_concat,
                   .dtype = dtype_of_first, .doc = "inputs side by side along the first or the last dim, each written in place"},
};

Op op_parse(const char *name) {
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(op_info[i].name, name) == 0) return (Op)i;
    return OP_COUNT;
}

static const char *prec_names[PC_COUNT] = {"none", "lower_precision", "fp32", "follow"};

PrecClass prec_class_parse(const char *name) {
    for (int i = 0; i < PC_COUNT; i++)
        if (strcmp(prec_names[i], name) == 0) return (PrecClass)i;
    return PC_COUNT;
}

