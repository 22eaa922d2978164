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

typedef struct CompileOptions {
    FrontendOptions front;
    const char *dump_after; /* stop after this pass and return its dump in report */
    int no_fusion;          /* every op its own kernel (for comparing with the fused plan) */
    unsigned reference_kernels; /* REF_ bits: the exact slow kernels where fast ones exist (for comparing) */
    int no_remat;           /* keep every forward value the backward pass reads (for comparing) */
    int remat_gemm_inputs;  /* also recompute values only GEMMs read: less memory, one more write */
    int forward_only;       /* no backward pass and no optimizer: a plan that computes the loss */
    int no_merge;           /* every projection a GEMM of its own (for comparing with the merged plan) */
    int no_dw_add;          /* weight gradients written as dW and added by a kernel (for comparing) */
    int gemm_epilogues;     /* elementwise kernels as the epilogue of the GEMM they read (pass_epilogue.c):
                             * GEMM_EPILOGUES_ below */
    int fuse_loss_grad;     /* the cross-entropy's gradient written by the loss's kernel (pass_fusion's step 7) */
} CompileOptions;
/* which elementwise kernels join the GEMM they read: by default those that read nothing
 * from memory but the product (SwiGLU's forward), with --gemm-epilogues every one the rule
 * allows (also SwiGLU's backward, which loads gate and up), with --no-gemm-epilogues none */
enum { GEMM_EPILOGUES_PRODUCT = 0, GEMM_EPILOGUES_ALL = 1, GEMM_EPILOGUES_NONE = 2 };

/* Runs every pass. Dies with a located message on bad input. */
CompileResult compile_graph(const CompileOptions *opt);
const char *compile_pass_names(void);
char *compile_report(const Graph *g, const Program *p, const char *out_dir);

#endif
