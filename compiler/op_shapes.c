/* op_shapes: the shape rule of every op. Each sets n->shape from the inputs' shapes and
 * attributes, or returns a message naming the shapes that do not fit. */
#include "op_rules.h"

#include <math.h>
#include <stdlib.h>

#include "layouts.h"
#include "util.h"

#define IN(i) (&n->in[i]->shape)

static char *mismatch(Node *n, const char *what) {
    StrBuf b = {0};
    sb_printf(&b, "%s: %s (", op_info[n->op].name, what);
    for (int i = 0; i < n->n_in; i++) {
        char *s = shape_str(IN(i));
        sb_printf(&b, "%s%s %s", i ? ", " : "", node_label(n->in[i]), s);
        free(s);
    }
    sb_append(&b, ")");
    return b.s;
}

char *shape_same(Node *n) {
    n->shape = *IN(0);
    return NULL;
}

/* Elementwise with broadcasting: the smaller input must equal the trailing dims of the
 * larger (a [D] weight against [B,T,D] activations, a scalar against anything). */
char *shape_broadcast(Node *n) {
    const Shape *a = IN(0), *b = IN(1);
    const Shape *big = a->rank >= b->rank ? a : b, *small = big == a ? b : a;
    if (!shape_is_suffix(big, small)) return mismatch(n, "shapes do not broadcast");
    n->shape = *big;
    return NULL;
}

/* In-place add: the result has the destination's shape; the source broadcasts to it. */
char *shape_inplace(Node *n) {
    if (!shape_is_suffix(IN(0), IN(1))) return mismatch(n, "source does not broadcast to destination");
    n->shape = *IN(0);
    return NULL;
}

char *shape_scale_rows(Node *n) {
    const Shape *x = IN(0), *r = IN(1);
    int ok = x->rank >= 1 && r->rank == x->rank - 1;
    for (int d = 0; ok && d < r->rank; d++) ok = r->dim[d] == x->dim[d];
    if (!ok) return mismatch(n, "the factors are not one per row of x");
    n->shape = *x;
    return NULL;
}

char *shape_silu_backward(Node *n) {
    if (!shape_eq(IN(0), IN(1))) return mismatch(n, "gradient and input differ in shape");
    n->shape = *IN(0);
    return NULL;
}

/* expand and sum_to: the target shape is set on the node when it is made. */
char *shape_expand(Node *n) {
    if (!shape_is_suffix(&n->shape, IN(0))) return mismatch(n, "input is not a suffix of the target shape");
    return NULL;
}

char *shape_sum_to(Node *n) {
    if (!shape_is_suffix(IN(0), &n->shape)) return mismatch(n, "target is not a suffix of the input shape");
    return NULL;
}

char *shape_scalar(Node *n) {
    n->shape = (Shape){0};
    return NULL;
}

/* slice(x) axis=0|1 begin size: x with dim 0 (axis 0) or its last dim (axis 1) cut to
 * [begin, begin + size) */
char *shape_slice(Node *n) {
    const Shape *x = IN(0);
    if (x->rank < 1 || (n->a.axis != 0 && n->a.axis != 1)) return mismatch(n, "axis must be 0 (the first dim) or 1 (the last)");
    int d = n->a.axis ? x->rank - 1 : 0;
    if (n->a.begin < 0 || n->a.size < 1 || n->a.begin > x->dim[d] - n->a.size)
        return mismatch(n, "begin and size must lie inside the dim");
    n->shape = *x;
    n->shape.dim[d] = n->a.size;
    return NULL;
}

/* concat(a, b, ...) axis=0|1: inputs of one dtype and rank, equal but in the axis' dim */
char *shape_concat(Node *n) {
    const Shape *x = IN(0);
    if (n->n_in < 2 || x->rank < 1 || (n->a.axis != 0 && n->a.axis != 1))
        return mismatch(n, "concat takes two or more tensors, along axis 0 (the first dim) or 1 (the last)");
    int d = n->a.axis ? x->rank - 1 : 0;
    n->shape = *x;
    for (int k = 1; k < n->n_in; k++) {
        const Shape *y = IN(k);
        if (y->rank != x->rank || n->in[k]->dtype != n->in[0]->dtype) return mismatch(n, "inputs differ in rank or dtype");
        for (int i = 0; i < x->rank; i++)
            if (i != d && y->dim[i] != x->dim[i]) return mismatch(n, "inputs differ outside the axis");
        n->shape.dim[d] += y->dim[d];
    }
    return NULL;
}

/* linear(x [..., K], W [N, K]) -> [..., N], as torch.nn.functional.linear without bias. */
char *shape_linear(Node *n) {
    const Shape *x = IN(0), *w = IN(1);
    if (w->rank != 2) return mismatch(n, "weight must be 2-D [out_features, in_features]");
    if (x->rank < 1 || x->dim[x->rank - 1] != w->dim[1]) return mismatch(n, "last dim of x != in_features of weight");
    n->shape = *x;
    n->shape.dim[x->rank - 1] = w->dim[0];
    return NULL;
}

/* linear_dx(dy [..., N], W [N, K]) -> [..., K] */
char *shape_linear_dx(Node *n) {
    const Shape *dy = IN(0), *w = IN(1);
    if (w->rank != 2 || dy->rank < 1 || dy->dim[dy->rank - 1] != w->dim[0]) return mismatch(n, "last dim of dy != out_features");
    n->shape = *dy;
    n->shape.dim[dy->rank - 1] = w->dim[1];
    return NULL;
}

/* linear_dw(dy [..., N], x [..., K]) -> [N, K] */
char *shape_linear_dw(Node *n) {
    const Shape *dy = IN(0), *x = IN(1);
    if (dy->rank < 1 || x->rank < 1) return mismatch(n, "dy and x must have at least one dim");
    if (shape_numel(dy) / dy->dim[dy->rank - 1] != shape_numel(x) / x->dim[x->rank - 1])
        return mismatch(n, "dy and x have different numbers of rows");
    n->shape = shape_make(2, dy->dim[dy->rank - 1], x->dim[x->rank - 1]);
    return NULL;
}

/* embedding(W [V, D], ids [...]) -> [..., D] */
char *shape_embedding(Node *n) {
    const Shape *w = IN(0), *ids = IN(1);
    if (w->rank != 2) return mismatch(n, "weight must be 2-D [vocab, dim]");
    if (ids->rank + 1 > IR_MAX_DIMS) return mismatch(n, "ids have too many dims");
    if (n->in[1]->dtype != DT_NONE && n->in[1]->dtype != DT_I32) return mismatch(n, "ids must be i32");
    n->shape = *ids;
    n->shape.dim[n->shape.rank++] = w->dim[1];
    return NULL;
}

/* ids, as the embedding ops read them: i32 (once the dtypes are known) */
static int ids_ok(const Node *ids) { return ids->dtype == DT_NONE || ids->dtype == DT_I32; }

/* the vocabulary an embedding's gradient sums into: its rows, and one start past them */
static int vocab_ok(const Node *n) { return n->a.vocab >= 1 && n->a.vocab < INT32_MAX; }

/* embedding_backward(dy [..., D], ids [...], sorted [numel(ids)], starts [vocab + 1]) -> [vocab, D] */
char *shape_embedding_backward(Node *n) {
    const Shape *dy = IN(0), *ids = IN(1);
    if (!vocab_ok(n)) return mismatch(n, "vocab must be at least 1");
    if (!ids_ok(n->in[1])) return mismatch(n, "ids must be i32");
    int ok = dy->rank == ids->rank + 1;
    for (int d = 0; ok && d < ids->rank; d++) ok = dy->dim[d] == ids->dim[d];
    if (!ok) return mismatch(n, "dy must be [..., dim] over the ids' shape");
    Shape sorted = shape_make(1, shape_numel(ids)), starts = shape_make(1, n->a.vocab + 1);
    if (!shape_eq(IN(2), &sorted) || !shape_eq(IN(3), &starts))
        return mismatch(n, "the sorted rows must be [numel(ids)] and the starts [vocab + 1]");
    n->shape = shape_make(2, n->a.vocab, dy->dim[dy->rank - 1]);
    return NULL;
}

/* rms_normalize(x [..., D]): rows of the last dim, eps >= 0 under the square root */
char *shape_rows(Node *n) {
    if (IN(0)->rank < 1) return mismatch(n, "x must have at least one dim");
    if (!(n->a.eps >= 0) || isinf(n->a.eps)) return mismatch(n, "eps must be a finite number >= 0");
    n->shape = *IN(0);
    return NULL;
}

char *shape_rms_normalize_backward(Node *n) {
    if (!shape_eq(IN(0), IN(1))) return mismatch(n, "gradient and input differ in shape");
    if (IN(0)->rank < 1) return mismatch(n, "x must have at least one dim");
    if (!(n->a.eps >= 0) || isinf(n->a.eps)) return mismatch(n, "eps must be a finite number >= 0");
    n->shape = *IN(0);
    return NULL;
}

/* rope(x [B, T, heads*hd], cos [>=T, hd], sin [>=T, hd]) -> x's shape; rope_backward reads
 * dy, cos and sin the same way. */
char *shape_rope(Node *n) {
    const Shape *x = IN(0), *c = IN(1), *s = IN(2);
    if (x->rank != 3) return mismatch(n, "x must be [batch, seq, heads*head_dim]");
    if (n->a.heads <= 0 || x->dim[2] % n->a.heads) return mismatch(n, "last dim of x is not a multiple of heads");
    int64_t hd = x->dim[2] / n->a.heads;
    if (hd % 2) return mismatch(n, "head_dim must be even");
    if (!shape_eq(c, s) || c->rank != 2 || c->dim[1] != hd || c->dim[0] < x->dim[1])
        return mismatch(n, "cos and sin must be [>= seq, head_dim]");
    n->shape = *x;
    return NULL;
}

/* q [B,T,H*hd], k and v [B,T,KV*hd], H a positive multiple of KV: what attention and both
 * of its backward kernels read */
static char *attention_qkv(Node *n, const Shape *q, const Shape *k, const Shape *v) {
    int h = n->a.heads, kv = n->a.kv_heads;
    if (q->rank != 3 || k->rank != 3 || !shape_eq(k, v)) return mismatch(n, "q, k, v must be [batch, seq, heads*head_dim]");
    if (h <= 0 || kv <= 0 || h % kv) return mismatch(n, "heads must be a positive multiple of kv_heads");
    if (q->dim[2] % h) return mismatch(n, "last dim of q is not a multiple of heads");
    int64_t hd = q->dim[2] / h;
    if (k->dim[0] != q->dim[0] || k->dim[1] != q->dim[1] || k->dim[2] != kv * hd)
        return mismatch(n, "k and v must be [batch, seq, kv_heads*head_dim]");
    return NULL;
}

/* attention(q [B,T,H*hd], k [B,T,KV*hd], v [B,T,KV*hd]) -> [B,T,H*hd]; part 1: lse [B,H,T]. */
char *shape_attention(Node *n) {
    char *err = attention_qkv(n, IN(0), IN(1), IN(2));
    if (err) return err;
    n->shape = *IN(0);
    return NULL;
}

/* the backward kernels' row statistics (lse, dsum): [B, H, T] of q [B, T, H*hd] */
static int row_stats_ok(const Node *n, const Shape *s, const Shape *q) {
    Shape want = shape_make(3, q->dim[0], (int64_t)n->a.heads, q->dim[1]);
    return shape_eq(s, &want);
}

/* attention_backward_dq(dO, q, k, v, O, lse) -> q's shape; dO and O are q's shape */
char *shape_attention_backward_dq(Node *n) {
    char *err = attention_qkv(n, IN(1), IN(2), IN(3));
    if (err) return err;
    if (!shape_eq(IN(0), IN(1)) || !shape_eq(IN(4), IN(1)) || !row_stats_ok(n, IN(5), IN(1)))
        return mismatch(n, "dO and O must be q's shape and lse [batch, heads, seq]");
    n->shape = *IN(1);
    return NULL;
}

/* attention_backward_dkv(dO, q, k, v, lse, dsum) -> k's shape (part 1: dv, v's shape) */
char *shape_attention_backward_dkv(Node *n) {
    char *err = attention_qkv(n, IN(1), IN(2), IN(3));
    if (err) return err;
    if (!shape_eq(IN(0), IN(1)) || !row_stats_ok(n, IN(4), IN(1)) || !row_stats_ok(n, IN(5), IN(1)))
        return mismatch(n, "dO must be q's shape, lse and dsum [batch, heads, seq]");
    n->shape = *IN(2);
    return NULL;
}

/* embedding_sort(ids [...]) -> [numel(ids)] row indices; the vocabulary is an attribute */
char *shape_embedding_sort(Node *n) {
    if (!vocab_ok(n)) return mismatch(n, "vocab must be at least 1");
    if (!ids_ok(n->in[0])) return mismatch(n, "ids must be i32");
    n->shape = shape_make(1, shape_numel(IN(0)));
    return NULL;
}

/* logits [..., V] and labels [...] (i32 once the dtypes are known) */
static char *logits_labels(Node *n, const Node *logits, const Node *labels) {
    const Shape *x = &logits->shape, *t = &labels->shape;
    if (x->rank != t->rank + 1) return mismatch(n, "labels must have the logits' shape without the last dim");
    for (int i = 0; i < t->rank; i++)
        if (t->dim[i] != x->dim[i]) return mismatch(n, "labels must have the logits' shape without the last dim");
    if (labels->dtype != DT_NONE && labels->dtype != DT_I32) return mismatch(n, "labels must be i32");
    return NULL;
}

/* cross_entropy(logits [..., V], labels [...]) -> [] (mean over targets not ignored). */
char *shape_cross_entropy(Node *n) {
    char *err = logits_labels(n, n->in[0], n->in[1]);
    if (err) return err;
    n->shape = (Shape){0};
    return NULL;
}

/* target_count(labels [...]) -> [] */
char *shape_target_count(Node *n) {
    if (IN(0)->rank < 1 || (n->in[0]->dtype != DT_NONE && n->in[0]->dtype != DT_I32)) return mismatch(n, "labels must be i32");
    n->shape = (Shape){0};
    return NULL;
}

/* cross_entropy_backward(dloss [], logits [..., V], labels [...], stats [rows, MMC_CE_STATS],
 * count []) -> the logits' shape */
char *shape_cross_entropy_backward(Node *n) {
    char *err = logits_labels(n, n->in[1], n->in[2]);
    if (err) return err;
    Shape stats = shape_make(2, shape_numel(IN(2)), (int64_t)MMC_CE_STATS);
    if (IN(0)->rank || IN(4)->rank || !shape_eq(IN(3), &stats))
        return mismatch(n, "dloss and the count must be scalars, the stats [rows, 3]");
    n->shape = *IN(1);
    return NULL;
}
