/* attrs: the one table of node attributes. Each row is a field of Attrs, how its value is
 * written and read (kind), its key in plans, dumps and the graph file's option tables, and
 * where a graph file gives it. Each op's row in the op table (ops.h) has the mask of the
 * attributes it uses; printing, plan parsing, the merge key of pass_simplify and the checks
 * of the graph file's option tables all walk this table under that mask, so an attribute
 * added here is printed, read back and told apart everywhere at once. */
#ifndef MMC_ATTRS_H
#define MMC_ATTRS_H

#include <stdint.h>

#include "dtype.h"

typedef enum AttrKind {
    AK_DTYPE, /* a DType, written by name (f16) */
    AK_INT,   /* an int */
    AK_I64,   /* an int64_t */
    AK_BOOL,  /* an int that is 0 or 1; true/false in the graph file */
    AK_REAL,  /* a double, written so that it reads back exactly */
    AK_TEXT,  /* a string without spaces (an initialiser, a generator, a slot name) */
} AttrKind;

typedef enum AttrSource {
    AS_OPTION,   /* the graph file's option table of the op: rope(x, cos, sin, { heads = 8 }) */
    AS_ARGUMENT, /* a positional argument of the DSL function: scale(x, 0.5), cast(x, "f16") */
    AS_DERIVED,  /* set by the frontend or a pass, never written by hand */
} AttrSource;

/*  enum      field         C type       kind      key         source       what it is */
#define MMC_ATTRS(X)                                                                                         \
    X(HEADS,    heads,        int,         AK_INT,   "heads",    AS_OPTION,   "query heads (rope: heads of x)") \
    X(KV_HEADS, kv_heads,     int,         AK_INT,   "kv_heads", AS_OPTION,   "key/value heads; default heads") \
    X(CAUSAL,   causal,       int,         AK_BOOL,  "causal",   AS_OPTION,   "attention: mask keys after the query") \
    X(TO,       to,           DType,       AK_DTYPE, "to",       AS_ARGUMENT, "cast: target dtype; rope_backward: the rope input's") \
    X(EPS,      eps,          double,      AK_REAL,  "eps",      AS_ARGUMENT, "rms_normalize: added to the mean square") \
    X(SCALE,    scale,        double,      AK_REAL,  "scale",    AS_ARGUMENT, "scale: the constant factor") \
    X(IGNORE,   ignore_index, int64_t,     AK_I64,   "ignore",   AS_OPTION,   "cross_entropy: targets equal to it are left out") \
    X(INDEX,    index,        int,         AK_INT,   "index",    AS_DERIVED,  "part: which extra output of the producer") \
    X(PARAM,    param,        int,         AK_INT,   "param",    AS_DERIVED,  "grad_accumulate, linear_dw_add: the (first) parameter's index") \
    X(VOCAB,    vocab,        int64_t,     AK_I64,   "vocab",    AS_DERIVED,  "embedding_sort/_backward: rows of the weight") \
    X(INIT,     init,         const char *, AK_TEXT, "init",     AS_ARGUMENT, "param: initialiser, e.g. normal(0,0.02)") \
    X(GEN,      gen,          const char *, AK_TEXT, "gen",      AS_DERIVED,  "const: generator, e.g. rope_cos(512,64,1e6)") \
    X(SLOT,     slot,         const char *, AK_TEXT, "slot",     AS_DERIVED,  "state: the slot's name in the step state") \
    X(AXIS,     axis,         int,         AK_INT,   "axis",     AS_DERIVED,  "slice, concat: 0 the first dim (rows of a weight), 1 the last") \
    X(BEGIN,    begin,        int64_t,     AK_I64,   "begin",    AS_DERIVED,  "slice: the first index along the axis") \
    X(SIZE,     size,         int64_t,     AK_I64,   "size",     AS_DERIVED,  "slice: how many indices along the axis")

typedef enum AttrId {
#define X(e, field, ctype, kind, key, source, doc) ATTR_##e,
    MMC_ATTRS(X)
#undef X
    ATTR_COUNT
} AttrId;

#define ATTR_BIT(e) (1u << ATTR_##e)

typedef struct Attrs {
#define X(e, field, ctype, kind, key, source, doc) ctype field;
    MMC_ATTRS(X)
#undef X
} Attrs;

typedef struct AttrInfo {
    const char *key;
    AttrKind kind;
    AttrSource source;
    size_t offset; /* of the field in Attrs */
    const char *doc;
} AttrInfo;

extern const AttrInfo attr_info[ATTR_COUNT];

struct StrBuf;
/* " key=value" for each attribute in `mask`, in table order, exactly (reals read back equal) */
void attrs_print(struct StrBuf *o, const Attrs *a, unsigned mask);
/* sets attribute `id` from its text; NULL, or what is wrong with the text (caller frees) */
char *attr_parse(Attrs *a, AttrId id, const char *text);
AttrId attr_by_key(const char *key); /* ATTR_COUNT if unknown */

#endif
