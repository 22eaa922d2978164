/* codegen: renders a scheduled, planned program as one CUDA source (kernels.cu): the prelude,
 * then one extern "C" kernel per group from templates/, with pointers, shapes and offsets
 * written in as constants, and sets each group's launch shape. */
#ifndef MMC_CODEGEN_H
#define MMC_CODEGEN_H

#include "program.h"
#include "util.h"

/* The kinds of fast kernel that have an exact one kept beside them (the slow references the
 * GPU tests compare the fast kernels with): a bit set in `reference` takes the exact one. */
enum {
    REF_ATTENTION = 1, /* flash attention -> one block per row, P in f32 */
    REF_SUM_TO = 2,    /* sum_to over the whole GPU -> one block per 32 columns */
    REF_EMBEDDING = 4, /* embedding gradient over sorted rows -> one block per id scanning all ids */
    REF_WIDE = 8,      /* 8 elements per thread with 16-byte accesses -> one element per thread */
    REF_GEMM = 16,     /* a GEMM with its elementwise readers as epilogue -> cuBLASLt and a kernel */
    REF_ALL = 31
};
/* parses "attention,sum_to,embedding,wide,gemm" or "all" into REF_ bits; -1 if unknown */
int codegen_reference_parse(const char *list);
char *codegen_cuda(const Graph *g, Program *p, unsigned reference);
/* an attention op (or one of its gradients) runs on the flash kernels under `reference` */
int attention_flash_fits(const Node *a, unsigned reference);
/* the cross_entropy_backward `bwd` of cross_entropy `ce` can run in ce's kernel, which keeps each
 * row in registers between the loss and the gradient (pass_fusion's step 7) */
int cross_entropy_grad_fits(const Node *ce, const Node *bwd, unsigned reference);
/* A GEMM with its elementwise readers as its epilogue (codegen_gemm.c): why the GEMM `a` and
 * the ops epi[0..n) cannot be one kernel under `reference`, or NULL, and then its shape. */
typedef struct GemmEpilogue {
    int paired;          /* the epilogue reads the product's two column halves (SwiGLU) */
    const Node *half[2]; /* paired: the slices of columns [0, n/2) and [n/2, n) */
    int b_mn;            /* B is [k, n] (linear_dx), not [n, k] (linear) */
    int64_t m, n, k;
    int64_t width;       /* the epilogue's row: n, or n / 2 paired */
    int64_t n_tiles;     /* column blocks of the kernel's tiles */
    int loads;           /* reads of operands from memory by the epilogue's ops, besides the product */
} GemmEpilogue;
const char *gemm_epilogue_refusal(const Node *a, Node *const *epi, int n, unsigned reference, GemmEpilogue *out);
/* whether a kernel writes its GEMM's product: always, but for a GEMM with an epilogue on
 * sm_90a, whose product another kernel may not read (SwiGLU's dh): it has memory, for
 * cuBLASLt elsewhere, and nothing in it */
int gemm_product_kept(const Graph *g, const Group *gr);
/* hash of every template, so the plan hash changes when a template does */
void codegen_hash_templates(Sha256 *h);
const char *template_text(const char *name);

#endif
