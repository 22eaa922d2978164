/* plan_read: parses a plan back into the Graph and Program structures the compiler made, so
 * both backends execute exactly what codegen saw. Nothing in the text is trusted: first its
 * content hash (a plan edited or cut after mmc compile wrote it stops there), then every
 * number is parsed whole and in range, and every value a backend indexes with, divides by or
 * launches with is checked against what it must fit: nodes defined once and before use, each
 * op's arity and its own shape and dtype rules, locations inside their buffers, parameters
 * inside the flat buffer, launch shapes inside CUDA's limits, the vocabulary the lookups
 * assume. Each failure is one line, FILE:LINE: what. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "layouts.h"
#include "codegen.h"
#include "plan.h"
#include "step_state.h"
#include "util.h"

/* Bounds far above any plan mmc writes, so that no product, sum or allocation made from a
 * plan's numbers can overflow or run away: node ids (the backends keep arrays by id), the
 * bytes of one buffer or offset; a tensor's elements are the frontend's IR_MAX_NUMEL. */
enum { MAX_NODE_ID = 1 << 22 };
#define MAX_BYTES ((int64_t)1 << 46)
#define MAX_INT 2147483647LL
/* CUDA's launch limits as the cuda backend launches a kernel: grid.x < 2^31, grid.y up to
 * 65535, up to 1024 threads a block and 227 KiB of dynamic shared memory (sm_90's most) */
#define MAX_GRID_Y 65535
#define MAX_BLOCK 1024
#define MAX_SMEM (227 * 1024)

/* the header's lines: each once, every one needed */
static const char *const header_words[] = {"graph", "source", "hash", "kernels", "policy", "config", "train", "grad_norm", NULL};

/* what a param line said that can be checked only once its leaf is read */
typedef struct ParamLine {
    int line;
    Shape shape;
    char *name;
} ParamLine;

/* what a kernel or gemm line said that can be checked only once its op lines are read */
typedef struct GroupLine {
    int line;
    int64_t anchor; /* node id, -1 if none */
    int64_t m, n, k;
    const char *layout;
} GroupLine;

typedef struct Reader {
    const char *path;
    int line;
    Plan *pl;
    int cap_ids;
    int *node_line;             /* by node id: the line that defines it */
    unsigned header_seen;       /* bit i: header_words[i] was read */
    int buffer_line[BUF_COUNT]; /* the line of each buffer, 0 before it */
    int grad_norm_line;
    int model_line;             /* where the `model` line is, 0 before it */
    long role_id[ROLE_COUNT];   /* the inputs it names, resolved once the leaves are read */
    ParamLine *param_line;      /* by param */
    int cap_param;
    GroupLine *group_line;      /* by group */
    int cap_group;
    int loss_line;
} Reader;

static MMC_NORETURN void bad(Reader *r, const char *fmt, ...) MMC_PRINTF(2, 3);
static void bad(Reader *r, const char *fmt, ...) {
    StrBuf m = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&m, fmt, ap);
    va_end(ap);
    char *w = xasprintf("%s:%d", r->path, r->line);
    die_at(w, "%s", m.s);
}

/* tokens of a line: words split on spaces; key=value pairs found by key */
typedef struct Line {
    char *words[256];
    int n;
} Line;

static void split(Reader *r, char *s, Line *l) {
    l->n = 0;
    for (char *t = strtok(s, " \t"); t; t = strtok(NULL, " \t")) {
        if (l->n == 256) bad(r, "too many fields");
        l->words[l->n++] = t;
    }
}

static const char *field(const Line *l, const char *key) {
    size_t n = strlen(key);
    for (int i = 0; i < l->n; i++)
        if (strncmp(l->words[i], key, n) == 0 && l->words[i][n] == '=') return l->words[i] + n + 1;
    return NULL;
}

static const char *need(Reader *r, const Line *l, const char *key) {
    const char *v = field(l, key);
    if (!v) bad(r, "missing field %s", key);
    return v;
}

/* the words from `first` on are key=value with a key of `known` (NULL-terminated), each once */
static void check_fields(Reader *r, const Line *l, int first, const char *const *known) {
    for (int i = first; i < l->n; i++) {
        const char *w = l->words[i], *eq = strchr(w, '=');
        if (!eq || eq == w) bad(r, "bad field '%s' (key=value)", w);
        size_t len = (size_t)(eq - w);
        int k = 0;
        while (known[k] && (strlen(known[k]) != len || strncmp(known[k], w, len))) k++;
        if (!known[k]) bad(r, "unknown field '%.*s'", (int)len, w);
        for (int j = first; j < i; j++)
            if (!strncmp(l->words[j], w, len + 1)) bad(r, "field %s given twice", known[k]);
    }
}

/* a whole decimal number in [lo, hi]: a fraction, an exponent, an overflow or trailing text
 * is refused, so that no cast of the value can wrap */
static int64_t int_field(Reader *r, const char *what, const char *s, int64_t lo, int64_t hi) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno) bad(r, "%s: '%s' is not a whole number", what, s);
    if (v < lo || v > hi) bad(r, "%s: %lld is outside [%lld, %lld]", what, v, (long long)lo, (long long)hi);
    return v;
}

static DType dtype_field(Reader *r, const char *s) {
    DType t = dtype_parse(s);
    if (t == DT_NONE) bad(r, "unknown dtype '%s'", s);
    return t;
}

/* %N: the id of a node, defined or not yet */
static int64_t node_id_field(Reader *r, const char *s) {
    if (s[0] != '%') bad(r, "bad node reference '%s'", s);
    return int_field(r, "node id", s + 1, 0, MAX_NODE_ID - 1);
}

static Node *node_by_id(const Plan *pl, int64_t id) { return id >= 0 && id < pl->n_ids ? pl->by_id[id] : NULL; }

static Node *node_ref(Reader *r, const char *s) {
    Node *n = node_by_id(r->pl, node_id_field(r, s));
    if (!n) bad(r, "node %s used before it is defined", s);
    return n;
}

/* a name of one of the tables (the kernel kinds, phases, optimizer kernels, lr schedules):
 * its index, or an error that lists the names */
static int name_field(Reader *r, const char *what, const char *s, int (*parse)(const char *), const char *const *names) {
    int i = parse(s);
    if (i < 0) bad(r, "unknown %s '%s' (known: %s)", what, s, word_list(names));
    return i;
}

/* scalar, or dims each >= 1, at most IR_MAX_DIMS of them and IR_MAX_NUMEL elements in all,
 * so that shape_numel and every byte count made from it stay far from overflow */
static Shape shape_field(Reader *r, const char *s) {
    Shape sh = {0};
    if (strcmp(s, "scalar") == 0) return sh;
    int64_t numel = 1;
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        if (sh.rank == IR_MAX_DIMS) bad(r, "shape %s has more than %d dims", s, IR_MAX_DIMS);
        char *dim = xstrndup(p, comma ? (size_t)(comma - p) : strlen(p));
        int64_t d = int_field(r, "a dim of the shape", dim, 1, IR_MAX_NUMEL);
        free(dim);
        if (numel > IR_MAX_NUMEL / d) bad(r, "shape %s has more than 2^40 elements", s);
        numel *= d;
        sh.dim[sh.rank++] = d;
        if (!comma) break;
        p = comma + 1;
    }
    return sh;
}

static char *shape_text(const Shape *s) { return s->rank ? shape_str(s) : xstrdup("scalar"); }

static int is_identifier(const char *s) {
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
    return 1;
}

static int is_sha256(const char *s) {
    if (strlen(s) != 64) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
    return 1;
}

/* ---- the node lines */

/* The node fields every op line may have; the rest of its key=value words must be the
 * attributes its op uses (attrs.h), each present once. */
static const char *const node_fields[] = {"in", "shape", "dtype", "compute", "at", "ld", "bwd", "src", "name", NULL};

static void read_attrs(Reader *r, const Line *l, Node *n) {
    unsigned mask = op_info[n->op].attrs, seen = 0, seen_fields = 0;
    for (int i = 3; i < l->n; i++) {
        const char *w = l->words[i], *eq = strchr(w, '=');
        if (!eq) bad(r, "bad field '%s' (key=value)", w);
        char *k = xstrndup(w, (size_t)(eq - w));
        int known = -1;
        for (int f = 0; node_fields[f]; f++)
            if (!strcmp(node_fields[f], k)) known = f;
        AttrId id = known >= 0 ? ATTR_COUNT : attr_by_key(k);
        if (known < 0 && (id == ATTR_COUNT || !(mask & (1u << id))))
            bad(r, "field '%s' is no attribute of %s", k, op_info[n->op].name);
        free(k);
        if (known >= 0) {
            if (seen_fields & (1u << known)) bad(r, "field %s given twice", node_fields[known]);
            seen_fields |= 1u << known;
            continue;
        }
        if (seen & (1u << id)) bad(r, "attribute %s given twice", attr_info[id].key);
        seen |= 1u << id;
        char *err = attr_parse(&n->a, id, eq + 1);
        if (err) bad(r, "%s", err);
        /* the kernels take reals as constants and dtypes as float types: what the frontend gives */
        if (attr_info[id].kind == AK_REAL && !isfinite(*(const double *)((const char *)&n->a + attr_info[id].offset)))
            bad(r, "%s: %s is not a finite number", attr_info[id].key, eq + 1);
        if (attr_info[id].kind == AK_DTYPE && !dtype_is_float(*(const DType *)((const char *)&n->a + attr_info[id].offset)))
            bad(r, "%s: %s is not a float dtype", attr_info[id].key, eq + 1);
    }
    for (int id = 0; id < ATTR_COUNT; id++)
        if ((mask & (1u << id)) && !(seen & (1u << id)))
            bad(r, "%s needs attribute %s", op_info[n->op].name, attr_info[id].key);
}

static void need_buffers(Reader *r) {
    for (int b = 0; b < BUF_COUNT; b++)
        if (!r->buffer_line[b]) bad(r, "no 'buffer %s' line before the first tensor", buffer_name(b));
}

/* at=BUFFER+OFFSET: a known buffer, the offset aligned to the dtype, the whole value inside
 * the bytes the buffer line gives */
static void read_location(Reader *r, Node *n, const char *v) {
    const char *plus = strchr(v, '+');
    char *name = plus ? xstrndup(v, (size_t)(plus - v)) : NULL;
    int b = name ? buffer_parse(name) : -1;
    free(name);
    if (b < 0) bad(r, "bad location '%s' (BUFFER+OFFSET)", v);
    int64_t offset = int_field(r, "offset", plus + 1, 0, MAX_BYTES);
    int64_t size = (int64_t)dtype_size(n->dtype), bytes = node_extent_bytes(n); /* rows ld apart, where it has ld= */
    if (offset % size) bad(r, "at=%s: the offset is not a multiple of %s's %lld bytes", v, dtype_name(n->dtype), (long long)size);
    if (offset + bytes > r->pl->p->buffer_bytes[b])
        bad(r, "at=%s: its %lld bytes end at %lld, past the %lld bytes of buffer %s", v, (long long)bytes,
            (long long)(offset + bytes), (long long)r->pl->p->buffer_bytes[b], buffer_name(b));
    n->buffer = b;
    n->offset = offset;
    n->materialized = 1;
}

/* an initialiser init.c draws from: ones, zeros, fan_in (over the last dim), normal(mean,std)
 * or uniform(lo,hi) of finite numbers */
static void check_init(Reader *r, const Node *n) {
    const char *s = n->a.init;
    double a, b;
    int used = -1;
    if (!strcmp(s, "ones") || !strcmp(s, "zeros")) return;
    if (!strcmp(s, "fan_in")) {
        if (n->shape.rank < 1) bad(r, "init=fan_in needs a param with at least one dim");
        return;
    }
    if (((sscanf(s, "normal(%lf,%lf)%n", &a, &b, &used) == 2 && used == (int)strlen(s)) ||
         (used = -1, sscanf(s, "uniform(%lf,%lf)%n", &a, &b, &used) == 2 && used == (int)strlen(s))) &&
        isfinite(a) && isfinite(b))
        return;
    bad(r, "unknown initialiser '%s' (ones, zeros, fan_in, normal(mean,std) or uniform(lo,hi))", s);
}

/* a constant's generator as init.c fills it: rope_cos or rope_sin(seq,head_dim,theta), the
 * table [seq, head_dim] with head_dim even */
static void check_generator(Reader *r, const Node *n) {
    long long seq, hd;
    double theta;
    char kind[4];
    int used = -1;
    if (sscanf(n->a.gen, "rope_%3[a-z](%lld,%lld,%lf)%n", kind, &seq, &hd, &theta, &used) != 4 || used != (int)strlen(n->a.gen) ||
        (strcmp(kind, "cos") && strcmp(kind, "sin")))
        bad(r, "unknown constant generator '%s' (rope_cos or rope_sin(seq,head_dim,theta))", n->a.gen);
    Shape want = shape_make(2, (int64_t)seq, (int64_t)hd);
    if (!shape_eq(&n->shape, &want) || hd < 2 || hd % 2 || !(theta > 0) || isinf(theta))
        bad(r, "%s: the table must be [seq, head_dim] with an even head_dim and theta > 0", n->a.gen);
}

/* an extra output (part) of a node of the same kernel, which computes it beside its result;
 * each of its parts once, shaped and typed by the producer's part rule */
static void check_part(Reader *r, const Group *gr, const Node *n) {
    const Node *p = n->in[0];
    const OpInfo *info = &op_info[p->op];
    if (!info->part || n->a.index < 1 || n->a.index > info->n_parts)
        bad(r, "part %d of %%%d: %s has %d extra outputs", n->a.index, p->id, info->name, info->n_parts);
    if (p->group != gr->id) bad(r, "part of %%%d, which another kernel computes", p->id);
    for (int i = 0; i < gr->n_nodes; i++)
        if (gr->nodes[i] != n && gr->nodes[i]->op == OP_PART && gr->nodes[i]->in[0] == p && gr->nodes[i]->a.index == n->a.index)
            bad(r, "part %d of %%%d given twice", n->a.index, p->id);
    Node copy = *n;
    info->part((Node *)p, n->a.index, &copy);
    if (!shape_eq(&copy.shape, &n->shape) || copy.dtype != n->dtype || copy.compute != n->compute)
        bad(r, "part %d of %%%d is %s %s, but %s gives %s %s", n->a.index, p->id, shape_text(&n->shape), dtype_name(n->dtype),
            info->name, shape_text(&copy.shape), dtype_name(copy.dtype));
}

/* The op's own rules on what the line says: its arity, its inputs' types, and the shape and
 * dtype its shape rule and dtype rule give (which is where the attributes the kernels divide
 * by or index with are checked: heads, kv_heads, vocab, eps). */
static void check_op(Reader *r, const Group *gr, const Node *n) {
    const OpInfo *info = &op_info[n->op];
    if (info->n_in >= 0 && n->n_in != info->n_in) bad(r, "%s takes %d inputs, got %d", info->name, info->n_in, n->n_in);
    for (int k = 0; k < n->n_in; k++) {
        const Node *x = n->in[k];
        if ((info->float_in >> k & 1) && !dtype_is_float(x->dtype))
            bad(r, "input %d of %s (%%%d) is %s, not a float tensor", k + 1, info->name, x->id, dtype_name(x->dtype));
        /* a value of another kernel is read from memory: one that none stores does not exist */
        if (x->group != gr->id && !x->materialized) bad(r, "%s reads %%%d, which is not stored (no at=)", info->name, x->id);
    }
    if (n->op == OP_PART) {
        check_part(r, gr, n);
        return;
    }
    Node copy = *n;
    char *err = ir_infer_shape(&copy);
    if (err) bad(r, "%s", err);
    if (!shape_eq(&copy.shape, &n->shape))
        bad(r, "%s: shape %s, but its inputs give %s", info->name, shape_text(&n->shape), shape_text(&copy.shape));
    if (info->dtype) {
        /* the policy may widen a float result (fp64's at_least), never make it another kind */
        info->dtype(&copy);
        if (dtype_is_float(copy.dtype) != dtype_is_float(n->dtype) || dtype_is_float(copy.compute) != dtype_is_float(n->compute))
            bad(r, "%s: dtype=%s compute=%s, but its dtype rule gives dtype=%s compute=%s", info->name, dtype_name(n->dtype),
                dtype_name(n->compute), dtype_name(copy.dtype), dtype_name(copy.compute));
    } else if (n->compute != n->dtype || !dtype_is_float(n->dtype)) {
        bad(r, "%s: dtype=%s compute=%s, but it computes and stores one float dtype", info->name, dtype_name(n->dtype),
            dtype_name(n->compute));
    }
    if (node_adds_to_grads(n) && !n->materialized) bad(r, "%s without at= (it adds into the gradient buffer)", info->name);
}

static void check_leaf(Reader *r, const Node *n) {
    if (n->n_in) bad(r, "in= on a leaf line (a leaf has no inputs)");
    if (n->op != OP_INPUT && !dtype_is_float(n->dtype)) bad(r, "a %s leaf of dtype %s (a float dtype)", op_info[n->op].name, dtype_name(n->dtype));
    if (n->compute != n->dtype) bad(r, "a leaf computes nothing (compute=%s)", dtype_name(n->compute));
    if (n->op == OP_PARAM) check_init(r, n);
    if (n->op == OP_CONST) check_generator(r, n);
    if (n->op == OP_STATE && (!n->materialized || n->buffer != BUF_STATE || n->shape.rank || n->dtype != DT_F32 ||
                              strcmp(n->a.slot, "loss_seed") || n->offset != (int64_t)offsetof(MmcStepState, loss_seed)))
        bad(r, "the state leaf is the f32 loss_seed at state+%d", (int)offsetof(MmcStepState, loss_seed));
}

/* ld=N: rows N elements apart, more than the last dim of a value of two or more dims */
static void read_row_stride(Reader *r, Node *n, const char *v) {
    if (n->shape.rank < 2) bad(r, "ld=%s on a value of %d dims (rows of a value of two or more)", v, n->shape.rank);
    int64_t w = n->shape.dim[n->shape.rank - 1];
    n->ld = int_field(r, "ld", v, w + 1, IR_MAX_NUMEL);
}

/* a view names the memory of what it is made of: a slice lies where its rows or columns lie
 * in its input, and each input of a concat lies side by side in it */
static void check_view(Reader *r, const Node *n) {
    const OpInfo *info = &op_info[n->op];
    if (info->n_in >= 0 && n->n_in != info->n_in) bad(r, "%s takes %d inputs, got %d", info->name, info->n_in, n->n_in);
    Node copy = *n;
    char *err = ir_infer_shape(&copy);
    if (err) bad(r, "%s", err);
    if (!shape_eq(&copy.shape, &n->shape))
        bad(r, "%s: shape %s, but its inputs give %s", info->name, shape_text(&n->shape), shape_text(&copy.shape));
    if (n->dtype != n->in[0]->dtype || n->compute != n->dtype) bad(r, "%s: a view has its input's dtype and computes nothing", info->name);
    if (!n->materialized) bad(r, "%s without at=", info->name);
    if (n->op == OP_SLICE) {
        const Node *x = n->in[0];
        if (n->a.axis == 0 && x->ld) bad(r, "slice: rows of %%%d, whose rows are apart (ld=)", x->id);
        int64_t ld, at = x->offset + slice_offset(n, &ld);
        if (!x->materialized || n->buffer != x->buffer || n->offset != at || n->ld != ld)
            bad(r, "slice: at=%s+%lld ld=%lld, but it lies at %s+%lld with ld=%lld in %%%d", buffer_name(n->buffer), (long long)n->offset,
                (long long)n->ld, buffer_name(x->buffer), (long long)at, (long long)ld, x->id);
        return;
    }
    if (n->ld) bad(r, "concat: ld= on a concat (its rows are dense)");
    for (int k = 0; k < n->n_in; k++) {
        const Node *x = n->in[k];
        int64_t at = n->offset + concat_part_offset(n, k), ld = concat_part_ld(n);
        if (!x->materialized || x->buffer != n->buffer || x->offset != at || x->ld != ld)
            bad(r, "concat: input %d (%%%d) must lie at %s+%lld with ld=%lld", k + 1, x->id, buffer_name(n->buffer), (long long)at, (long long)ld);
    }
}

static Node *read_node(Reader *r, const Line *l, Group *gr) {
    Plan *pl = r->pl;
    need_buffers(r);
    if (l->n < 3) bad(r, "short node line");
    int64_t id = node_id_field(r, l->words[1]);
    Op op = op_parse(l->words[2]);
    if (op == OP_COUNT) bad(r, "unknown op '%s'", l->words[2]);
    const char *want = op_info[op].kind == OK_LEAF ? "leaf" : op_info[op].kind == OK_VIEW ? "view" : "op";
    if (strcmp(l->words[0], want)) bad(r, "%s on %s %s line", op_info[op].name, l->words[0][0] == 'o' ? "an" : "a", l->words[0]);
    if (node_by_id(pl, id)) bad(r, "node %s defined twice", l->words[1]);
    Node *n = xcalloc(1, sizeof *n);
    n->id = (int)id;
    n->op = op;
    n->group = n->buffer = n->param_index = n->rule = -1;
    n->where = xstrdup("");
    const char *in = field(l, "in");
    if (in) {
        char *copy = xstrdup(in);
        for (char *p = copy;;) {
            char *comma = strchr(p, ',');
            if (comma) *comma = 0;
            if (n->n_in == IR_MAX_INPUTS) bad(r, "more than %d inputs", IR_MAX_INPUTS);
            n->in[n->n_in++] = node_ref(r, p);
            if (!comma) break;
            p = comma + 1;
        }
        free(copy);
    }
    n->shape = shape_field(r, need(r, l, "shape"));
    n->dtype = dtype_field(r, need(r, l, "dtype"));
    const char *c = field(l, "compute");
    n->compute = c ? dtype_field(r, c) : n->dtype;
    const char *v;
    read_attrs(r, l, n);
    if ((v = field(l, "name"))) {
        if (!*v) bad(r, "an empty name");
        n->name = xstrdup(v);
    }
    if ((v = field(l, "src"))) { /* the graph file's line that made the node, for messages */
        if (!*v) bad(r, "an empty src=");
        for (const char *c = v; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) bad(r, "src=: a control character");
        free(n->where);
        n->where = xstrdup(v);
    }
    if ((v = field(l, "bwd"))) {
        if (strcmp(v, "1")) bad(r, "bwd=%s (bwd=1 marks a node of the backward pass)", v);
        n->backward = 1;
    }
    if ((v = field(l, "ld"))) read_row_stride(r, n, v);
    if ((v = field(l, "at"))) read_location(r, n, v);
    else if (n->ld) bad(r, "ld= without at=");
    if (gr) group_add(gr, n);
    if (gr) check_op(r, gr, n);
    else if (node_is_view(n)) check_view(r, n);
    else check_leaf(r, n);
    if (id >= pl->n_ids) {
        int old = pl->n_ids;
        pl->n_ids = (int)id + 1;
        if (pl->n_ids > r->cap_ids) {
            r->cap_ids = pl->n_ids * 2;
            pl->by_id = xrealloc(pl->by_id, (size_t)r->cap_ids * sizeof *pl->by_id);
            r->node_line = xrealloc(r->node_line, (size_t)r->cap_ids * sizeof *r->node_line);
        }
        for (int i = old; i < pl->n_ids; i++) pl->by_id[i] = NULL;
    }
    pl->by_id[id] = n;
    r->node_line[id] = r->line;
    Graph *g = pl->g;
    vec_push(g->nodes, g->n_nodes, g->cap_nodes, n);
    if (g->next_id <= n->id) g->next_id = n->id + 1;
    return n;
}

/* ---- the header lines */

/* model vocab=6400 pad_id=0 bos_id=1 eos_id=2 max_positions=32768 tokens=%0 targets=%1 */
static void read_model(Reader *r, const Line *l) {
    ModelInfo *m = &r->pl->g->model;
    if (r->model_line) bad(r, "a second 'model' line");
    r->model_line = r->line;
    const char *known[MF_COUNT + ROLE_COUNT + 1];
    for (int k = 0; k < MF_COUNT; k++) known[k] = model_field_names[k];
    for (int k = 0; k < ROLE_COUNT; k++) known[MF_COUNT + k] = role_names[k];
    known[MF_COUNT + ROLE_COUNT] = NULL;
    check_fields(r, l, 1, known);
    for (int k = 0; k < MF_COUNT; k++) {
        const char *v = field(l, model_field_names[k]);
        if (v) m->value[k] = int_field(r, model_field_names[k], v, model_field_is_id[k] ? 0 : 1, MAX_INT), m->given |= 1u << k;
    }
    for (int k = 0; k < MF_COUNT; k++)
        if (model_field_is_id[k] && model_has(m, (ModelField)k) && (!model_has(m, MF_VOCAB) || m->value[k] >= m->value[MF_VOCAB]))
            bad(r, "%s=%lld is not below vocab", model_field_names[k], (long long)m->value[k]);
    if (m->given) m->where = xasprintf("%s:%d", r->path, r->line);
    for (int k = 0; k < ROLE_COUNT; k++) {
        const char *v = field(l, role_names[k]);
        r->role_id[k] = v ? node_id_field(r, v) : -1;
    }
}

/* checkpoint_config key=json ...: a config.json's fields, each value JSON text */
static void read_json_fields(Reader *r, const Line *l, JsonFile file) {
    JsonFields *jf = &r->pl->g->json[file];
    if (jf->where) bad(r, "a second '%s' line", json_file_names[file]);
    jf->where = xasprintf("%s:%d", r->path, r->line);
    for (int i = 1; i < l->n; i++) {
        const char *eq = strchr(l->words[i], '=');
        if (!eq || eq == l->words[i] || !eq[1]) bad(r, "bad field '%s' (key=value)", l->words[i]);
        JsonField e = {xstrndup(l->words[i], (size_t)(eq - l->words[i])), xstrdup(eq + 1)};
        /* sorted and once each, as the frontend writes them; the key mmc writes itself no one's */
        if (jf->n && strcmp(jf->f[jf->n - 1].key, e.key) >= 0) bad(r, "%s: the keys are not sorted, or one is given twice", e.key);
        if (!strcmp(e.key, json_file_added_key[file])) bad(r, "%s: mmc writes this key itself", e.key);
        json_error_t err;
        json_t *v = json_loads(e.json, JSON_DECODE_ANY, &err);
        if (!v) bad(r, "%s=%s is no JSON value: %s", e.key, e.json, err.text);
        json_decref(v);
        vec_push(jf->f, jf->n, jf->cap, e);
    }
}

static void read_train(Reader *r, const Line *l) {
    Graph *g = r->pl->g;
    /* every setting of the table (train_settings.h), and nothing else */
    const char **keys = xcalloc((size_t)n_train_settings + 1, sizeof *keys);
    for (int k = 0; k < n_train_settings; k++) keys[k] = train_settings[k].key;
    check_fields(r, l, 1, keys);
    free(keys);
    for (int k = 0; k < n_train_settings; k++) {
        char *err = train_setting_parse(&g->train, &train_settings[k], need(r, l, train_settings[k].key));
        if (err) bad(r, "%s", err);
    }
    char *err = train_scaler_check(&g->train);
    if (err) bad(r, "%s", err);
}

static void read_header_fields(Reader *r, const Line *l) {
    Graph *g = r->pl->g;
    Program *p = r->pl->p;
    const char *w = l->words[0];
    int h = word_index(header_words, w);
    if (h >= 0) {
        if (r->header_seen & (1u << h)) bad(r, "a second '%s' line", w);
        r->header_seen |= 1u << h;
    }
    if (!strcmp(w, "graph") || !strcmp(w, "source") || !strcmp(w, "hash")) {
        if (l->n != 2) bad(r, "bad %s line (%s VALUE)", w, w);
        if (!strcmp(w, "hash") && !is_sha256(l->words[1])) bad(r, "hash %s is not a SHA-256 (64 hex digits)", l->words[1]);
        char **to = !strcmp(w, "graph") ? &g->name : !strcmp(w, "source") ? &g->source : &g->hash;
        free(*to);
        *to = xstrdup(l->words[1]);
    } else if (!strcmp(w, "kernels")) {
        static const char *const known[] = {"sha256", NULL};
        check_fields(r, l, 1, known);
        const char *s = need(r, l, "sha256");
        if (!is_sha256(s)) bad(r, "kernels sha256=%s is not a SHA-256 (64 hex digits)", s);
        memcpy(r->pl->kernels_sha256, s, 65);
    } else if (!strcmp(w, "policy")) {
        static const char *const known[] = {"name", "rounding", "master", "source", NULL};
        check_fields(r, l, 1, known);
        g->policy.name = xstrdup(need(r, l, "name"));
        const char *rounding = need(r, l, "rounding");
        if (strcmp(rounding, "eager") && strcmp(rounding, "fused")) bad(r, "rounding=%s (eager or fused)", rounding);
        g->policy.round_eager = strcmp(rounding, "eager") == 0;
        g->policy.master = dtype_field(r, need(r, l, "master"));
        if (!dtype_is_float(g->policy.master)) bad(r, "master=%s is not a float dtype", dtype_name(g->policy.master));
        g->policy.source = xstrdup(need(r, l, "source"));
    } else if (!strcmp(w, "config")) {
        for (int i = 1; i < l->n; i++) {
            char *eq = strchr(l->words[i], '=');
            if (!eq || eq == l->words[i]) bad(r, "bad config entry '%s'", l->words[i]);
            ConfigEntry e = {xstrndup(l->words[i], (size_t)(eq - l->words[i])), 0, NULL};
            char *end;
            e.value = strtod(eq + 1, &end);
            if (*end || end == eq + 1) e.text = xstrdup(eq + 1);
            else if (!isfinite(e.value)) bad(r, "config %s is not a finite number", l->words[i]);
            vec_push(g->config, g->n_config, g->cap_config, e);
        }
    } else if (!strcmp(w, "train")) {
        read_train(r, l);
    } else if (!strcmp(w, "grad_norm")) {
        static const char *const known[] = {"chunk", "chunks", NULL};
        check_fields(r, l, 1, known);
        p->grad_chunk = int_field(r, "chunk", need(r, l, "chunk"), 1, MAX_INT);
        p->n_chunks = (int)int_field(r, "chunks", need(r, l, "chunks"), 0, MAX_INT);
        r->grad_norm_line = r->line;
    } else if (!strcmp(w, "model")) {
        read_model(r, l);
    } else if (json_file_parse(w) >= 0) {
        read_json_fields(r, l, (JsonFile)json_file_parse(w));
    } else if (!strcmp(w, "buffer")) {
        if (l->n != 3) bad(r, "bad buffer line (buffer NAME BYTES)");
        int b = buffer_parse(l->words[1]);
        if (b < 0) bad(r, "unknown buffer '%s'", l->words[1]);
        if (r->buffer_line[b]) bad(r, "a second line for buffer %s", l->words[1]);
        r->buffer_line[b] = r->line;
        p->buffer_bytes[b] = int_field(r, "bytes", l->words[2], 0, MAX_BYTES);
    } else {
        bad(r, "unknown line '%s'", w);
    }
}

/* param I NAME shape=S offset=O node=%N [alias=A]: the node comes later as a leaf line */
static void read_param(Reader *r, const Line *l) {
    Graph *g = r->pl->g;
    static const char *const known[] = {"shape", "offset", "node", "alias", NULL};
    need_buffers(r);
    if (l->n < 3 || strchr(l->words[2], '=')) bad(r, "bad param line (param INDEX NAME shape= offset= node=)");
    int_field(r, "param index", l->words[1], g->n_params, g->n_params);
    check_fields(r, l, 3, known);
    const char *alias = field(l, "alias");
    Param p = {(Node *)(intptr_t)node_id_field(r, need(r, l, "node")), /* resolved below */
               int_field(r, "offset", need(r, l, "offset"), 0, MAX_BYTES), alias ? xstrdup(alias) : NULL};
    ParamLine pl = {r->line, shape_field(r, need(r, l, "shape")), l->words[2]};
    if (g->n_params == r->cap_param) {
        r->cap_param = r->cap_param ? 2 * r->cap_param : 64;
        r->param_line = xrealloc(r->param_line, (size_t)r->cap_param * sizeof *r->param_line);
    }
    r->param_line[g->n_params] = pl;
    vec_push(g->params, g->n_params, g->cap_params, p);
}

/* stream=1 sends a kernel to the side stream, which the runtime forks at the phase's start:
 * only an anchor kernel (a cuBLASLt call shares the workspace of the others) */
static int stream_field(Reader *r, const char *s, GroupKind k) {
    if (strcmp(s, "0") && strcmp(s, "1")) bad(r, "bad stream '%s' (0: the main stream, 1: the side stream)", s);
    if (s[0] == '1' && k != GK_ANCHOR) bad(r, "stream=1 on a %s kernel: only anchor kernels run on the side stream", group_kind_name(k));
    return s[0] == '1';
}

/* kernel NAME kind= phase= grid= grid_y= block= smem= [stream=] [optimizer=] [anchor=], or
 * gemm NAME ... m= n= k= layout= anchor= */
static Group *read_group(Reader *r, const Line *l) {
    static const char *const known[] = {"kind", "grid", "grid_y", "block", "smem", "phase", "stream", "optimizer",
                                        "m",    "n",    "k",      "layout", "anchor", NULL};
    Plan *pl = r->pl;
    need_buffers(r);
    if (l->n < 2 || !is_identifier(l->words[1])) bad(r, "a %s line names its kernel first (a C identifier)", l->words[0]);
    check_fields(r, l, 2, known);
    GroupKind k = (GroupKind)name_field(r, "kernel kind", need(r, l, "kind"), group_kind_parse, group_kind_names);
    Phase ph = (Phase)name_field(r, "phase", need(r, l, "phase"), phase_parse, phase_names);
    if ((k == GK_GEMM) != !strcmp(l->words[0], "gemm")) bad(r, "kind=%s on a %s line", group_kind_name(k), l->words[0]);
    Group *cur = program_add_group(pl->p, k, ph);
    cur->kernel = xstrdup(l->words[1]);
    cur->grid = int_field(r, "grid", need(r, l, "grid"), 1, MAX_INT);
    cur->grid_y = int_field(r, "grid_y", need(r, l, "grid_y"), 1, MAX_GRID_Y);
    cur->block = int_field(r, "block", need(r, l, "block"), 1, MAX_BLOCK);
    cur->smem = int_field(r, "smem", need(r, l, "smem"), 0, MAX_SMEM);
    const char *st = field(l, "stream");
    cur->stream = st ? stream_field(r, st, k) : 0;
    const char *o = field(l, "optimizer");
    if (k == GK_OPTIMIZER)
        cur->optimizer = (OptimizerKernel)name_field(r, "optimizer kernel", need(r, l, "optimizer"), optimizer_kernel_parse,
                                                     optimizer_kernel_names);
    else if (o) bad(r, "optimizer=%s on a %s kernel (only optimizer kernels have one)", o, group_kind_name(k));
    GroupLine gl = {r->line, -1, 0, 0, 0, NULL};
    const char *a = field(l, "anchor");
    if ((k == GK_ANCHOR || k == GK_GEMM) != (a != NULL))
        bad(r, a ? "anchor= on a %s kernel (only anchor and gemm kernels have one)" : "a %s kernel needs anchor=", group_kind_name(k));
    if (a) gl.anchor = node_id_field(r, a);
    const char *gemm_fields[] = {"m", "n", "k", "layout"};
    for (int i = 0; i < 4; i++)
        if ((field(l, gemm_fields[i]) != NULL) != (k == GK_GEMM))
            bad(r, k == GK_GEMM ? "missing field %s" : "%s= on a kernel line (a gemm's)", gemm_fields[i]);
    if (k == GK_GEMM) {
        gl.m = int_field(r, "m", need(r, l, "m"), 1, IR_MAX_NUMEL);
        gl.n = int_field(r, "n", need(r, l, "n"), 1, IR_MAX_NUMEL);
        gl.k = int_field(r, "k", need(r, l, "k"), 1, IR_MAX_NUMEL);
        gl.layout = need(r, l, "layout");
    }
    if (cur->id == r->cap_group) {
        r->cap_group = r->cap_group ? 2 * r->cap_group : 64;
        r->group_line = xrealloc(r->group_line, (size_t)r->cap_group * sizeof *r->group_line);
    }
    r->group_line[cur->id] = gl;
    return cur;
}

/* the side stream starts with the phase, before any kernel of it ran: its kernels may read
 * leaves and their own nodes only */
static void check_side_inputs(Reader *r, const Group *gr, const Node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k]->group >= 0 && n->in[k]->group != gr->id)
            bad(r, "a side-stream kernel reads %%%d, which another kernel writes (it may read only leaves)", n->in[k]->id);
}

/* ---- the whole plan, once every line is read */

static void check_buffers(Reader *r) {
    const Graph *g = r->pl->g;
    const int64_t *bytes = r->pl->p->buffer_bytes;
    int64_t msize = (int64_t)dtype_size(g->policy.master);
    r->line = r->buffer_line[BUF_PARAMS];
    if (bytes[BUF_PARAMS] % msize) bad(r, "buffer params holds %lld bytes, not whole %s values", (long long)bytes[BUF_PARAMS], dtype_name(g->policy.master));
    /* the gradients and AdamW's moments have the parameters' layout, walked as one flat loop */
    const int same[] = {BUF_GRADS, BUF_ADAM_M, BUF_ADAM_V};
    for (int i = 0; i < 3; i++)
        if (bytes[same[i]] != bytes[BUF_PARAMS]) {
            r->line = r->buffer_line[same[i]];
            bad(r, "buffer %s holds %lld bytes, buffer params %lld: they have one layout", buffer_name(same[i]),
                (long long)bytes[same[i]], (long long)bytes[BUF_PARAMS]);
        }
    r->line = r->buffer_line[BUF_STATE];
    if (bytes[BUF_STATE] < (int64_t)MMC_STATE_BYTES((int64_t)g->n_params))
        bad(r, "buffer state holds %lld bytes, fewer than the %d of the step state and the zero counts of %d parameters",
            (long long)bytes[BUF_STATE], (int)MMC_STATE_BYTES((int64_t)g->n_params), g->n_params);
    r->line = r->buffer_line[BUF_SCRATCH];
    int64_t scratch = (int64_t)MMC_GRAD_NORM_BYTES((int64_t)r->pl->p->n_chunks, (int64_t)g->n_params);
    if (bytes[BUF_SCRATCH] < scratch)
        bad(r, "buffer scratch holds %lld bytes, fewer than the %lld the grad-norm kernel's %d blocks use", (long long)bytes[BUF_SCRATCH],
            (long long)scratch, r->pl->p->n_chunks);
}

/* each param line names a param leaf of its shape in the master dtype, at its offset in the
 * flat buffer; each param leaf has one param line; the grad-norm kernel's blocks cover them */
static void check_params(Reader *r) {
    Plan *pl = r->pl;
    Graph *g = pl->g;
    int64_t msize = (int64_t)dtype_size(g->policy.master), chunks = 0;
    for (int i = 0; i < g->n_params; i++) {
        Param *p = &g->params[i];
        const ParamLine *line = &r->param_line[i];
        r->line = line->line;
        long id = (long)(intptr_t)p->node;
        Node *n = node_by_id(pl, id);
        if (!n || n->op != OP_PARAM) bad(r, "a param line names %%%ld, which is no param leaf", id);
        if (n->param_index >= 0) bad(r, "param %d names %%%ld, which param %d names too", i, id, n->param_index);
        p->node = n;
        n->param_index = i;
        int64_t numel = shape_numel(&n->shape);
        if (!shape_eq(&line->shape, &n->shape) || !n->name || strcmp(line->name, n->name))
            bad(r, "param %d is %s %s here and %s %s on its leaf line", i, line->name, shape_text(&line->shape),
                n->name ? n->name : "(no name)", shape_text(&n->shape));
        if (p->offset + numel > pl->p->buffer_bytes[BUF_PARAMS] / msize)
            bad(r, "param %d: offset %lld + %lld elements is past the %lld of buffer params", i, (long long)p->offset,
                (long long)numel, (long long)(pl->p->buffer_bytes[BUF_PARAMS] / msize));
        if (n->dtype != g->policy.master || !n->materialized || n->buffer != BUF_PARAMS || n->offset != p->offset * msize)
            bad(r, "param %d: its leaf %%%ld must be %s at params+%lld", i, id, dtype_name(g->policy.master), (long long)(p->offset * msize));
        chunks += (numel + pl->p->grad_chunk - 1) / pl->p->grad_chunk;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == OP_PARAM && g->nodes[i]->param_index < 0) {
            r->line = r->node_line[g->nodes[i]->id];
            bad(r, "the param leaf %%%d has no param line", g->nodes[i]->id);
        }
    r->line = r->grad_norm_line;
    if (chunks != pl->p->n_chunks)
        bad(r, "chunks=%d, but the params make %lld chunks of %lld", pl->p->n_chunks, (long long)chunks, (long long)pl->p->grad_chunk);
}

/* grad_accumulate adds into the gradient of its parameter, in the gradients' layout, once:
 * `summed` counts them by parameter */
static void check_grad_accumulate(Reader *r, const Node *n, int *summed) {
    const Graph *g = r->pl->g;
    r->line = r->node_line[n->id];
    if (n->a.param < 0 || n->a.param >= g->n_params) bad(r, "param=%d, but the plan has %d params", n->a.param, g->n_params);
    const Param *p = &g->params[n->a.param];
    int64_t at = p->offset * (int64_t)dtype_size(g->policy.master);
    if (!shape_eq(&n->shape, &p->node->shape) || n->dtype != g->policy.master || n->buffer != BUF_GRADS || n->offset != at)
        bad(r, "the gradient of param %d is %s %s at grads+%lld", n->a.param, shape_text(&p->node->shape),
            dtype_name(g->policy.master), (long long)at);
    if (summed[n->a.param]++) bad(r, "a second gradient sum into param %d", n->a.param);
}

/* linear_dw_add adds its [rows, cols] into the gradients of param and the params after it,
 * whose rows of cols elements each lie side by side in the gradient buffer from param's on */
static void check_dw_add(Reader *r, const Node *n, int *summed) {
    const Graph *g = r->pl->g;
    r->line = r->node_line[n->id];
    if (n->a.param < 0 || n->a.param >= g->n_params) bad(r, "param=%d, but the plan has %d params", n->a.param, g->n_params);
    int64_t size = (int64_t)dtype_size(g->policy.master), at = g->params[n->a.param].offset;
    if (n->dtype != g->policy.master || n->buffer != BUF_GRADS || n->offset != at * size)
        bad(r, "linear_dw_add adds into the %s gradients from param %d's, at grads+%lld", dtype_name(g->policy.master),
            n->a.param, (long long)(at * size));
    int64_t rows = 0, cols = n->shape.dim[1];
    for (int k = n->a.param; rows < n->shape.dim[0]; k++) {
        const Param *p = k < g->n_params ? &g->params[k] : NULL;
        if (!p || p->offset != at + rows * cols || p->node->shape.rank != 2 || p->node->shape.dim[1] != cols ||
            rows + p->node->shape.dim[0] > n->shape.dim[0])
            bad(r, "shape=%s from param %d on: rows %lld on are no param's gradient of %lld columns there", shape_text(&n->shape),
                n->a.param, (long long)rows, (long long)cols);
        if (summed[k]++) bad(r, "a second gradient sum into param %d", k);
        rows += p->node->shape.dim[0];
    }
}

/* The runtime writes token ids below the model's vocabulary into the role inputs, i32
 * [batch, seq] in the io buffer; so a lookup by them (an embedding and its gradient's rows, a
 * cross-entropy's classes) must have the vocabulary's rows. */
static void check_roles(Reader *r) {
    Plan *pl = r->pl;
    Graph *g = pl->g;
    for (int k = 0; k < ROLE_COUNT; k++) {
        long id = r->role_id[k];
        if (id < 0) continue;
        r->line = r->model_line;
        Node *n = node_by_id(pl, id);
        if (!n || n->op != OP_INPUT) bad(r, "the role %s names %%%ld, which is no input leaf", role_names[k], id);
        if (n->dtype != role_dtypes[k] || n->shape.rank != 2 || !n->materialized || n->buffer != BUF_IO)
            bad(r, "the role %s names %%%ld, which is not %s [batch, seq] in buffer io", role_names[k], id, dtype_name(role_dtypes[k]));
        for (int j = 0; j < k; j++)
            if (g->role[j] == n) bad(r, "the roles %s and %s name one input", role_names[j], role_names[k]);
            else if (g->role[j] && !shape_eq(&g->role[j]->shape, &n->shape))
                bad(r, "the roles %s and %s name inputs of different shapes", role_names[j], role_names[k]);
        g->role[k] = n;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        int ids = n->op == OP_EMBEDDING ? 1 : n->op == OP_EMBEDDING_SORT ? 0 : n->op == OP_EMBEDDING_BACKWARD ? 1
                : n->op == OP_CROSS_ENTROPY ? 1 : n->op == OP_CROSS_ENTROPY_BACKWARD ? 2 : -1;
        if (ids < 0) continue;
        const Node *x = n->in[ids];
        int fed = 0;
        for (int k = 0; k < ROLE_COUNT; k++) fed |= x == g->role[k];
        if (!fed) continue;
        int64_t rows = n->op == OP_EMBEDDING ? n->in[0]->shape.dim[0]
                     : n->op == OP_CROSS_ENTROPY ? n->in[0]->shape.dim[n->in[0]->shape.rank - 1]
                     : n->op == OP_CROSS_ENTROPY_BACKWARD ? n->in[1]->shape.dim[n->in[1]->shape.rank - 1] : n->a.vocab;
        r->line = r->node_line[n->id];
        if (!model_has(&g->model, MF_VOCAB) || rows != g->model.value[MF_VOCAB])
            bad(r, "%s of the %s input %%%d has %lld rows, the model's vocab is %lld", op_info[n->op].name,
                x == g->role[ROLE_TOKENS] ? "tokens" : "targets", x->id, (long long)rows, (long long)g->model.value[MF_VOCAB]);
    }
}

/* what a kernel of each kind computes: an anchor kernel its anchor op (and a sum over its
 * rows, a row_sums anchor's, or the rope_backward of a rope_out anchor's output) with
 * elementwise ops and parts around it; an elementwise
 * kernel elementwise ops; the weight casts casts; the gradient sums grad_accumulate */
static int belongs(const Group *gr, const Node *n, int *row_sums) {
    const OpInfo *info = &op_info[n->op];
    switch (gr->kind) {
    case GK_ANCHOR:
        if (info->kind == OK_ANCHOR && n != gr->anchor && n->op == OP_ROPE_BACKWARD)
            return gr->anchor && op_info[gr->anchor->op].rope_out && n->in[0] == gr->anchor;
        if (info->kind == OK_ANCHOR && n != gr->anchor && n->op == OP_CROSS_ENTROPY_BACKWARD)
            return gr->anchor && gr->anchor->op == OP_CROSS_ENTROPY && n->in[3]->op == OP_PART && n->in[3]->in[0] == gr->anchor &&
                   cross_entropy_grad_fits(gr->anchor, n, 0);
        if (info->kind == OK_ANCHOR && n != gr->anchor) return n->op == OP_SUM_TO && op_info[gr->anchor->op].row_sums && !(*row_sums)++;
        return info->kind == OK_ELEMENTWISE || info->kind == OK_PART || n == gr->anchor;
    case GK_ELEMENTWISE: return info->kind == OK_ELEMENTWISE;
    case GK_GEMM: return n == gr->anchor || info->kind == OK_ELEMENTWISE; /* an epilogue */
    case GK_CAST_PARAMS: return n->op == OP_CAST;
    case GK_GRADS: return n->op == OP_GRAD_ACCUMULATE;
    case GK_OPTIMIZER:
    case GK_COUNT: break;
    }
    return 0;
}

/* an anchor or gemm kernel computes its anchor; a cuBLASLt call has the shape the line says
 * and reads and writes memory only */
static void check_groups(Reader *r) {
    Plan *pl = r->pl;
    for (int i = 0; i < pl->p->n_groups; i++) {
        Group *gr = pl->p->groups[i];
        const GroupLine *gl = &r->group_line[i];
        r->line = gl->line;
        if ((gr->kind == GK_OPTIMIZER) != (gr->n_nodes == 0))
            bad(r, "kernel %s of kind %s %s op lines", gr->kernel, group_kind_name(gr->kind), gr->n_nodes ? "with" : "without");
        gr->anchor = NULL;
        if (gl->anchor >= 0) {
            Node *a = node_by_id(pl, gl->anchor);
            if (!a || a->group != gr->id) bad(r, "anchor=%%%lld is no node of this kernel", (long long)gl->anchor);
            if (op_info[a->op].kind != (gr->kind == GK_GEMM ? OK_GEMM : OK_ANCHOR))
                bad(r, "anchor=%%%lld is a %s, not %s", (long long)gl->anchor, op_info[a->op].name,
                    gr->kind == GK_GEMM ? "a GEMM" : "an anchor op");
            gr->anchor = a;
        }
        int row_sums = 0;
        for (int k = 0; k < gr->n_nodes; k++)
            if (!belongs(gr, gr->nodes[k], &row_sums)) {
                r->line = r->node_line[gr->nodes[k]->id];
                bad(r, "%s in kernel %s of kind %s", op_info[gr->nodes[k]->op].name, gr->kernel, group_kind_name(gr->kind));
            }
        if (gr->kind != GK_GEMM) continue;
        const Node *a = gr->anchor;
        if (!a->materialized) bad(r, "the GEMM %%%d is not stored (no at=)", a->id);
        if (gr->n_nodes > 1) {
            const char *why = gr->nodes[0] != a ? "the GEMM is not its first op"
                                                : gemm_epilogue_refusal(a, gr->nodes + 1, gr->n_nodes - 1, 0, NULL);
            if (why) bad(r, "kernel %s: the GEMM %%%d cannot have these ops as its epilogue: %s", gr->kernel, a->id, why);
        }
        GemmShape s = gemm_shape(a);
        char layout[3] = {s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N', 0};
        if (s.m != gl->m || s.n != gl->n || s.k != gl->k || strcmp(layout, gl->layout))
            bad(r, "m=%lld n=%lld k=%lld layout=%s, but its op gives m=%lld n=%lld k=%lld layout=%s", (long long)gl->m,
                (long long)gl->n, (long long)gl->k, gl->layout, (long long)s.m, (long long)s.n, (long long)s.k, layout);
    }
}

/* The lines of the text, numbered as an editor numbers them. A plan ends with `content
 * sha256=` and `end`: anything after `end`, a missing end (a plan cut short) or a hash that
 * is not of the bytes before the content line is refused before any line is believed.
 * Returns the count of lines before the content line. */
static int body_lines(Reader *r, char *text, char ***lines_out) {
    char **lines = NULL;
    int n = 0, cap = 0;
    for (char *s = text; *s;) {
        char *nl = strchr(s, '\n');
        vec_push(lines, n, cap, s);
        if (!nl) break;
        *nl = 0;
        s = nl + 1;
    }
    *lines_out = lines;
    r->line = 1;
    if (n == 0) bad(r, "not an mmc plan (first line must be 'mmc-plan N')");
    return n;
}

static void check_content(Reader *r, const char *text, char **lines, int n_lines, int *n_body) {
    int last = n_lines - 1;
    while (last > 0 && !*lines[last]) last--;
    if (strcmp(lines[last], "end")) {
        for (int i = 0; i < last; i++)
            if (!strcmp(lines[i], "end")) {
                r->line = i + 2;
                bad(r, "text after 'end'");
            }
        r->line = n_lines;
        bad(r, "the plan is cut short (no 'end' line)");
    }
    if (last + 1 < n_lines) {
        r->line = last + 2;
        bad(r, "text after 'end'");
    }
    const char *mark = "content sha256=";
    r->line = last;
    if (last < 1 || strncmp(lines[last - 1], mark, strlen(mark)))
        bad(r, "no 'content sha256=' line before 'end': the plan was made by an older mmc or edited; recompile with mmc compile");
    const char *said = lines[last - 1] + strlen(mark);
    if (!is_sha256(said)) bad(r, "content sha256=%s is not a SHA-256 (64 hex digits)", said);
    Sha256 h;
    sha256_init(&h);
    sha256_update(&h, text, (size_t)(lines[last - 1] - lines[0]));
    char hex[65];
    sha256_hex(&h, hex);
    if (strcmp(hex, said))
        bad(r, "the plan's bytes hash to %s, not to the %s its content line says: it was changed after mmc compile wrote it; "
               "recompile with mmc compile",
            hex, said);
    *n_body = last - 1;
}

Plan *plan_read(const char *text, const char *path) {
    Reader r = {.path = path, .pl = xcalloc(1, sizeof(Plan))};
    Plan *pl = r.pl;
    pl->path = xstrdup(path);
    pl->g = ir_graph_new("?", "?");
    pl->p = xcalloc(1, sizeof *pl->p);
    Graph *g = pl->g;
    Group *cur = NULL;
    char *copy = xstrdup(text), **lines;
    int n_lines = body_lines(&r, copy, &lines), n_body = 0;
    {
        Line first;
        char *l0 = xstrdup(lines[0]);
        split(&r, l0, &first);
        if (first.n != 2 || strcmp(first.words[0], "mmc-plan")) bad(&r, "not an mmc plan (first line must be 'mmc-plan N')");
        int64_t v = int_field(&r, "plan format", first.words[1], 0, MAX_INT);
        if (v != MMC_PLAN_FORMAT) bad(&r, "plan format %lld, this mmc reads format %d: recompile with mmc compile", (long long)v, MMC_PLAN_FORMAT);
        free(l0);
    }
    check_content(&r, text, lines, n_lines, &n_body);
    for (int li = 1; li < n_body; li++) {
        r.line = li + 1;
        Line l;
        split(&r, lines[li], &l);
        if (l.n == 0) continue;
        const char *w = l.words[0];
        if (!strcmp(w, "end")) {
            r.line = li + 2;
            bad(&r, "text after 'end'");
        }
        if (r.loss_line) bad(&r, "a %s line after the loss line", w);
        if (!strcmp(w, "leaf")) {
            if (cur) bad(&r, "a leaf line after the first kernel");
            read_node(&r, &l, NULL);
        } else if (!strcmp(w, "param")) {
            if (g->n_nodes) bad(&r, "a param line after the first leaf");
            read_param(&r, &l);
        } else if (!strcmp(w, "loss")) {
            if (l.n != 2) bad(&r, "bad loss line (loss %%N)");
            g->loss = node_ref(&r, l.words[1]);
            r.loss_line = r.line;
            if (!g->loss->materialized || g->loss->shape.rank) bad(&r, "the loss %s is not a stored scalar", l.words[1]);
        } else if (!strcmp(w, "kernel") || !strcmp(w, "gemm")) {
            cur = read_group(&r, &l);
        } else if (!strcmp(w, "view")) {
            read_node(&r, &l, NULL);
        } else if (!strcmp(w, "op")) {
            if (!cur) bad(&r, "op line outside a kernel");
            Node *n = read_node(&r, &l, cur);
            if (cur->stream) check_side_inputs(&r, cur, n);
        } else {
            if (g->n_params || g->n_nodes) bad(&r, "a '%s' line after the first param or leaf", w);
            read_header_fields(&r, &l);
        }
    }
    r.line = 1;
    if (!r.model_line) bad(&r, "no 'model' line: the plan was made by an older mmc; recompile with mmc compile");
    for (int h = 0; header_words[h]; h++)
        if (!(r.header_seen & (1u << h))) bad(&r, "no '%s' line", header_words[h]);
    need_buffers(&r);
    r.line = n_body;
    if (!g->loss) bad(&r, "no loss line");
    check_buffers(&r);
    check_params(&r);
    check_roles(&r);
    check_groups(&r);
    int *summed = xcalloc((size_t)g->n_params + 1, sizeof *summed);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == OP_GRAD_ACCUMULATE) check_grad_accumulate(&r, g->nodes[i], summed);
        else if (g->nodes[i]->op == OP_LINEAR_DW_ADD) check_dw_add(&r, g->nodes[i], summed);
    free(summed);
    free(lines);
    free(copy);
    free(r.node_line), free(r.param_line), free(r.group_line);
    return pl;
}

Plan *plan_load(const char *dir) {
    char *path = path_join(dir, "plan");
    size_t len = 0;
    char *text = try_read_file(path, &len);
    if (!text) die("%s: no plan here (make one with: mmc compile GRAPH.lua -o %s)", path, dir);
    if (strlen(text) != len) {
        int line = 1;
        for (const char *s = text; *s; s++) line += *s == '\n';
        die_at(xasprintf("%s:%d", path, line), "a NUL byte: this is no plan text; recompile with mmc compile");
    }
    Plan *pl = plan_read(text, path);
    free(text);
    free(path);
    return pl;
}

char *plan_kernels(const Plan *pl) {
    char *dir = path_dirname(pl->path);
    char *path = path_join(dir, "kernels.cu");
    size_t len = 0;
    char *src = pl->kernels ? xstrdup(pl->kernels) : try_read_file(path, &len);
    if (!src) die("%s: missing (recompile with mmc compile)", path);
    if (pl->kernels) len = strlen(src);
    Sha256 h;
    sha256_init(&h);
    sha256_update(&h, src, len);
    char hex[65];
    sha256_hex(&h, hex);
    if (strcmp(hex, pl->kernels_sha256))
        die("%s: not the kernels of %s (its SHA-256 is %s, the plan's kernels line says %s): recompile with mmc compile", path,
            pl->path, hex, pl->kernels_sha256);
    free(dir), free(path);
    return src;
}
