/* codegen: renders a scheduled, planned program as one CUDA source (kernels.cu): the prelude,
 * then one extern "C" kernel per group from templates/, with pointers, shapes and offsets
 * written in as constants, and sets each group's launch shape. */
#ifndef MMC_CODEGEN_H
#define MMC_CODEGEN_H

#include "program.h"
#include "util.h"

/* reference_kernels: the exact one-block-per-row kernels for attention, sum_to and the
 * embedding gradient instead of the fast ones (the slow references the GPU tests compare
 * the fast kernels with) */
char *codegen_cuda(const Graph *g, Program *p, int reference_kernels);
/* hash of every template, so the plan hash changes when a template does */
void codegen_hash_templates(Sha256 *h);
const char *template_text(const char *name);

#endif
