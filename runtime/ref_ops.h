/* ref_ops: the math of every op on whole tensors of doubles, for the ref backend. The
 * results are what the CUDA templates compute; the caller rounds them to the register and
 * storage dtypes. Anchors round inside where their template does (the log-softmax to its
 * dtype, each RoPE product to the compute dtype) when the policy rounds eagerly. */
#ifndef MMC_REF_OPS_H
#define MMC_REF_OPS_H

#include "ir.h"

typedef struct RefOpCtx {
    int eager;
    DType reg; /* F32, or F64 when the kernel's registers are double */
} RefOpCtx;

/* in[k]: input k's values (numel of its shape); out: the node's values; parts[i-1]: part i */
void ref_compute(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
/* Each op's math, which its row in the op table points to (ops.c): the arguments are
 * ref_compute's. Elementwise ops have theirs in the table itself (OpInfo.eval). */
void ref_gemm(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_embedding(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_embedding_sort(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_embedding_backward(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_rms_normalize(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_rms_normalize_backward(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_rope(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts); /* and rope_backward */
void ref_attention(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_attention_backward_dq(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_attention_backward_dkv(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_cross_entropy(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_cross_entropy_backward(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_target_count(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts);
void ref_sums(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts); /* sum_to, sum_all */
/* the value rounded where a template rounds inside an op: to t when eager, else to reg */
double ref_inner_round(const RefOpCtx *c, DType t, double v);

/* the threads the ref backend uses: MMC_THREADS, else every core */
int ref_thread_count(void);
/* fn(ctx, lo, hi) over contiguous slices of [0, n) on those threads, for loops whose items
 * are independent; `cost` is the work of an item (small loops stay on one thread) */
void ref_parallel(int64_t n, int64_t cost, void (*fn)(const void *ctx, int64_t lo, int64_t hi), const void *ctx);

#endif
