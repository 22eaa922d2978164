/* passes: each pass takes the graph and rewrites it in place; `mmc compile --dump NAME`
 * prints the IR after the pass called NAME. Order: precision, autodiff, simplify, remat,
 * fusion, merge, dw_add, epilogue, schedule, memplan, launch. */
#ifndef MMC_PASSES_H
#define MMC_PASSES_H

#include "ir.h"
#include "program.h"
#include "util.h"

/* parameters start at multiples of this many elements of the flat buffers */
enum { PARAM_ALIGN_ELEMS = 16 };

void pass_precision(Graph *g);  /* dtypes from the policy's rules; casts inserted */
void pass_autodiff(Graph *g);   /* backward nodes from the loss to every parameter */
void pass_simplify(Graph *g);   /* no-op casts, cast chains, common subexpressions, dead nodes */
/* backward copies of cheap forward values, instead of keeping them (gemm_inputs: also those
 * only GEMMs read, which the backward kernel then writes once more) */
void pass_remat(Graph *g, int gemm_inputs);
/* projections of one input as one GEMM, their weight gradients as one (pass_merge.c);
 * after fusion, on the GEMMs' kernels */
void pass_merge(Graph *g, Program *p);
/* weight-gradient GEMMs that add into the gradient buffer themselves, where the policy's
 * rounding allows it (pass_dw_add.c); after merge */
void pass_dw_add(Graph *g, Program *p);
/* kernel groups (fuse=0: one op each; row_sums=0: every sum_to in a kernel of its own;
 * `reference`: the REF_ bits of codegen.h, which decide where the flash kernels run) */
void pass_fusion(Graph *g, Program *p, int fuse, int row_sums, unsigned reference, int loss_grad);
/* elementwise kernels as the epilogue of the GEMM whose product they read (pass_epilogue.c);
 * after dw_add, on the kernels; `reference`: REF_ bits (REF_GEMM keeps them apart);
 * `with_loads`: also epilogues that read operands from memory besides the product */
void pass_epilogue(Graph *g, Program *p, unsigned reference, int with_loads);
void pass_schedule(Graph *g, Program *p); /* group order, optimizer steps */
void pass_memplan(Graph *g, Program *p);  /* buffers and offsets */
/* each kernel's template, launch shape and tiles (codegen_launch.c); `reference`: REF_ bits */
void pass_launch(const Graph *g, Program *p, unsigned reference);

/* the planner's core, exposed for its property test: places n intervals [first, last] of
 * size bytes so that no two live at once share a byte; returns the arena size. */
typedef struct Interval {
    int64_t size;
    int first, last;
    int64_t offset; /* result */
} Interval;
int64_t plan_intervals(Interval *iv, int n, int64_t align);

void ir_dump(const Graph *g, const Program *p, const char *title, StrBuf *out);

#endif
