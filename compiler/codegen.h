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
    REF_ALL = 15
};
/* parses "attention,sum_to,embedding,wide" or "all" into REF_ bits; -1 if unknown */
int codegen_reference_parse(const char *list);
char *codegen_cuda(const Graph *g, Program *p, unsigned reference);
/* Does attention op `a` run as a flash kernel (the launch step's choice, which fusion asks
 * too: a rope_backward joins only a flash backward kernel)? Its compute dtype f16 or bf16,
 * its float inputs and its result in it, head_dim a multiple of 16 up to 128, its extra
 * output (lse, dsum, dv) of dtype `part` in the dtype the kernel writes (DT_NONE: an lse the
 * plan does not keep), and no REF_ATTENTION in `reference`. */
int attention_flash(const Node *a, DType part, unsigned reference);
/* hash of every template, so the plan hash changes when a template does */
void codegen_hash_templates(Sha256 *h);
const char *template_text(const char *name);

#endif
