/* Layouts that a kernel and the C code both index: the compiler sizes the memory, a template
 * and the ref backend write and read it. Shared by the C code and the generated kernels (codegen
 * writes it into kernels.cu after the step state), so both use the same names. */
#ifndef MMC_LAYOUTS_H
#define MMC_LAYOUTS_H

/* The cross-entropy stats part, [rows, MMC_CE_STATS]: for each row of logits, its max, the
 * log of its sum of exp(x - max), and its loss (0 where the target is ignored). Shaped by
 * ops.c (part_cross_entropy); written by cross_entropy*.cu and the ref backend's
 * cross_entropy, whose last step sums the loss column; max and log-sum read by
 * cross_entropy_backward*.cu and the ref backend's cross_entropy_backward. */
#define MMC_CE_STATS 3  /* values a row */
#define MMC_CE_MAX 0    /* the row's max logit */
#define MMC_CE_LOGSUM 1 /* log(sum(exp(x - max))) */
#define MMC_CE_LOSS 2   /* -log_softmax(x)[target], rounded as F.cross_entropy rounds it */

/* The scratch buffer of the grad-norm kernel, for its `chunks` blocks over `params`
 * parameters: byte offsets of partial[chunks] (double: each block's sum of squares, written
 * by its block), norms[params] (double: each parameter's, written by the last block),
 * bad[chunks] (int: the block saw an inf or nan) and zeros[chunks] (unsigned int: gradient
 * elements of the block exactly zero). Sized by pass_memplan.c; written and read
 * by grad_norm.cu alone (the ref backend sums in place). */
#define MMC_GRAD_NORM_PARTIAL(chunks, params) 0
#define MMC_GRAD_NORM_NORMS(chunks, params) ((chunks) * sizeof(double))
#define MMC_GRAD_NORM_BAD(chunks, params) (((chunks) + (params)) * sizeof(double))
#define MMC_GRAD_NORM_ZEROS(chunks, params) (MMC_GRAD_NORM_BAD(chunks, params) + (chunks) * sizeof(int))
#define MMC_GRAD_NORM_BYTES(chunks, params) (MMC_GRAD_NORM_ZEROS(chunks, params) + (chunks) * sizeof(unsigned int))

#endif
