/* codegen_internal: what codegen.c shares with codegen_anchors.c and codegen_optimizer.c. */
#ifndef MMC_CODEGEN_INTERNAL_H
#define MMC_CODEGEN_INTERNAL_H

#include "codegen.h"

typedef struct Gen {
    const Graph *g;
    Program *p;
    Group *gr;
    const char *R;  /* register type: float, or double under an f64 policy */
    int reg_f64;
    int eager;      /* round at every op boundary, as PyTorch eager */
    unsigned reference; /* REF_ bits (codegen.h): the exact kernels instead of those fast ones */
    int uses_flash; /* some kernel calls templates/flash_attention.cuh */
    int uses_gemm;  /* some kernel is a GEMM with an epilogue (templates/gemm_sm90.cuh) */
    StrBuf ptrs;    /* pointer declarations of the kernel being made */
    char *declared; /* by node id: its pointer is declared */
    char *scope;    /* by node id: its register value v<id> is in scope */
    /* Wide mode: the code being emitted computes element k of 8 consecutive ones, i = i0 + k.
     * A value read from memory is L<id>[k], loaded by one wide access before the elements; a
     * value stored goes to S<id>[k], written by one wide access after them. */
    int wide;
    StrBuf wloads, wstores; /* the section's wide loads (and store arrays), its wide stores */
    char *wloaded, *wstored; /* by node id, within the section */
    const char *wind;        /* indentation of the section's loads and stores */
    /* Wide mode over `runs` runs of 8 (c = 0 .. runs-1): a value read is L<id>[c][k], every
     * load of the runs is in wloads, to be issued before any of the code that uses them,
     * and the arrays are declared once in wdecls. */
    int runs;
    StrBuf wdecls;
    /* Wide mode into a GEMM's epilogue (codegen_gemm.c): a value read is L<id>[k], its bytes
     * r.L<id> (declared in wdecls, the Regs struct), converted in sdecls with the store
     * arrays. */
    int regs;
    StrBuf sdecls;
} Gen;

/* An anchor group's other nodes: computed per element of the anchor's input (pro), of its
 * output (epi), or of its row sum (sum). */
typedef struct Split {
    Node **pro, **epi, **sum;
    int n_pro, n_epi, n_sum, cap_pro, cap_epi, cap_sum;
    char *in_array; /* by node id: a prologue value the epilogue reads, kept in pv<id>[k] */
} Split;

typedef struct Keys {
    const char *k[40];
    char *v[40];
    unsigned char optional[40]; /* a key every kernel of a kind gets, which a template may leave out */
    int n;
} Keys;

void key(Keys *ks, const char *k, const char *fmt, ...) MMC_PRINTF(3, 4);
/* a key that render does not require the template to use */
void key_optional(Keys *ks, const char *k, const char *v);
void render(StrBuf *o, const char *tmpl_name, Keys *ks);
char *literal(const Gen *G, double v);
const char *rounder(const Gen *G, DType t); /* "" when no rounding applies */
const char *ptr(Gen *G, const Node *n);
const char *ptr_raw(Gen *G, const Node *n);
char *index_for(const Node *x, const Shape *space);
char *operand(Gen *G, const Node *x, const Shape *space);
void finish_value(Gen *G, StrBuf *o, const Node *n, const char *ind);
void emit_node(Gen *G, StrBuf *o, const Node *n, const Shape *space, const char *ind);
int64_t blocks_for(int64_t n, int64_t threads);
/* Wide mode for the nodes that follow until wide_end; wide_ok says whether a set of nodes
 * computed over `space` can run in it (8 divides every length; no int operands). */
int wide_ok(const Gen *G, Node *const *nodes, int n, const Shape *space);
int wide_operand(const Node *x); /* x can be read 8 elements at a time */
void wide_begin(Gen *G, const char *ind);
void wide_end(Gen *G, char **loads, char **stores);
char *wide_take_stores(Gen *G); /* the stores so far, and a fresh buffer for the next section */

/* ---- the launch step (codegen_launch.c) */
void gen_init(Gen *G, const Graph *g, Program *p, unsigned reference);
void gen_free(Gen *G);
void begin_kernel(Gen *G, Group *gr);
void tile(Group *gr, const char *key, int64_t value); /* a {{KEY}} of the template, decided with the launch */
int64_t tile_of(const Group *gr, const char *key);
void launch_keys(const Group *gr, Keys *ks); /* BLOCK and the tiles, for render */

/* ---- anchors (codegen_anchors.c, codegen_attention.c): the op table's launch and gen */
Split split_group(Gen *G);
void free_split(Split *s);
int split_wide(const Gen *G, const Split *s, const Shape *pro_space, const Shape *epi_space, unsigned read_inputs);
Node *part_of(const Group *gr, int index);   /* the group's part `index` of its anchor, or NULL */
Node *need_part(const Group *gr, int index);
void launch_rms_rows(Gen *G, const Split *s);
void gen_rms_rows(Gen *G, Keys *ks, Split *s);
void launch_sum(Gen *G, const Split *s);
void gen_sum(Gen *G, Keys *ks, Split *s);
void launch_embedding(Gen *G, const Split *s);
void gen_embedding(Gen *G, Keys *ks, Split *s);
void launch_embedding_sort(Gen *G, const Split *s);
void gen_embedding_sort(Gen *G, Keys *ks, Split *s);
void launch_embedding_backward(Gen *G, const Split *s);
void gen_embedding_backward(Gen *G, Keys *ks, Split *s);
void launch_rope(Gen *G, const Split *s);
void gen_rope(Gen *G, Keys *ks, Split *s);
void launch_attention(Gen *G, const Split *s);
void gen_attention(Gen *G, Keys *ks, Split *s);
void launch_cross_entropy(Gen *G, const Split *s);
void gen_cross_entropy(Gen *G, Keys *ks, Split *s);
void launch_cross_entropy_backward(Gen *G, const Split *s);
void gen_cross_entropy_backward(Gen *G, Keys *ks, Split *s);
void launch_target_count(Gen *G, const Split *s);
void gen_target_count(Gen *G, Keys *ks, Split *s);

void launch_gemm_epilogue(Gen *G);
void gen_gemm_epilogue(Gen *G, StrBuf *o);
void gen_anchor(Gen *G, StrBuf *o);
void gen_segments(Gen *G, StrBuf *o); /* the weight casts (GK_CAST_PARAMS), the gradient sums (GK_GRADS) */
void launch_segments(Gen *G);
void launch_optimizer(Gen *G);
void gen_optimizer(Gen *G, StrBuf *o);

#endif
