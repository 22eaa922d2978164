/* codegen: renders a scheduled, planned program as one CUDA source (kernels.cu): the prelude,
 * then one extern "C" kernel per group from templates/, with pointers, shapes and offsets
 * written in as constants, and sets each group's launch shape. */
#ifndef MMC_CODEGEN_H
#define MMC_CODEGEN_H

#include "program.h"
#include "util.h"

char *codegen_cuda(const Graph *g, Program *p);
/* hash of every template, so the plan hash changes when a template does */
void codegen_hash_templates(Sha256 *h);
const char *template_text(const char *name);

#endif
