/* ref_ops: see ref_ops.h. Plain loops; clarity over speed. */
#include "ref_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "layouts.h"
#include "util.h"

double ref_inner_round(const RefOpCtx *c, DType t, double v) { return dtype_round(c->eager ? t : c->reg, v); }

static int64_t last_dim(const Shape *s) { return s->rank ? s->dim[s->rank - 1] : 1; }

/* ---- rows of a product on every core. Each output row is one thread's, and its sums run
 * in the same order whatever the thread count, so results do not depend on it. MMC_THREADS
 * sets the count (default: the cores online). */

typedef struct Rows {
    void (*fn)(const struct Rows *r, int64_t lo, int64_t hi);
    const double *a, *b;
    double *out;
    int64_t M, N, K;
} Rows;

int ref_thread_count(void) {
    static int n;
    if (!n) {
        const char *e = getenv("MMC_THREADS");
        long v = e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
        n = v < 1 ? 1 : v > 256 ? 256 : (int)v;
    }
    return n;
}

/* ---- any loop whose items are independent, on every core: fn(ctx, lo, hi) over contiguous
 * slices of [0, n). Each item is computed as it would be alone, so results do not depend on
 * the thread count; `cost` (work per item) keeps small loops on one thread. */
typedef struct Slice {
    void (*fn)(const void *ctx, int64_t lo, int64_t hi);
    const void *ctx;
    int64_t lo, hi;
} Slice;

static void *slice_thread(void *arg) {
    Slice *s = arg;
    s->fn(s->ctx, s->lo, s->hi);
    return NULL;
}

void ref_parallel(int64_t n, int64_t cost, void (*fn)(const void *ctx, int64_t lo, int64_t hi), const void *ctx) {
    int t = ref_thread_count();
    if (t > n) t = (int)(n > 0 ? n : 1);
    if (t == 1 || n * cost < (1 << 16)) {
        fn(ctx, 0, n);
        return;
    }
    pthread_t *th = xcalloc((size_t)t, sizeof *th);
    Slice *part = xcalloc((size_t)t, sizeof *part);
    for (int i = 0; i < t; i++) {
        part[i] = (Slice){fn, ctx, n * i / t, n * (i + 1) / t};
        if (pthread_create(&th[i], NULL, slice_thread, &part[i])) die("ref: cannot start a thread");
    }
    for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
    free(th), free(part);
}

static void rows_slice(const void *ctx, int64_t lo, int64_t hi) {
    const Rows *r = ctx;
    r->fn(r, lo, hi);
}

/* runs r->fn over rows [0, rows) in contiguous slices, one a thread */
static void parallel_rows(const Rows *r, int64_t rows) { ref_parallel(rows, r->N * r->K, rows_slice, r); }

/* y[M,N] = x[M,K] . W[N,K]^T, rows m. Four outputs at a time, each its own sum over k in
 * order: the same bits as one at a time, four times the additions in flight. */
static void linear_rows(const Rows *r, int64_t lo, int64_t hi) {
    const int64_t K = r->K, N = r->N;
    for (int64_t m = lo; m < hi; m++) {
        const double *x = r->a + m * K;
        int64_t j = 0;
        for (; j + 4 <= N; j += 4) {
            const double *w0 = r->b + j * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (int64_t k = 0; k < K; k++) {
                const double v = x[k];
                s0 += v * w0[k], s1 += v * w1[k], s2 += v * w2[k], s3 += v * w3[k];
            }
            r->out[m * N + j] = s0, r->out[m * N + j + 1] = s1, r->out[m * N + j + 2] = s2, r->out[m * N + j + 3] = s3;
        }
        for (; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += x[k] * r->b[j * K + k];
            r->out[m * N + j] = s;
        }
    }
}

/* out[R,K] rows r in [lo, hi): out[r][k] = sum over i in order of coef(r, i) * vec(i)[k], with
 * coef(r, i) = c[r * cs + i * ci] and vec(i) = v + i * K. Four rows at a time share each
 * vec(i); every element keeps its own sum in the order of i, so the bits are those of one row
 * at a time. (dx: rows m, i = j; dW: rows j, i = m.) */
static void sum_rows(double *out, const double *c, int64_t cs, int64_t ci, const double *v, int64_t n, int64_t K,
                     int64_t lo, int64_t hi) {
    int64_t r = lo;
    for (; r + 4 <= hi; r += 4) {
        double *o0 = out + r * K, *o1 = o0 + K, *o2 = o1 + K, *o3 = o2 + K;
        for (int64_t k = 0; k < 4 * K; k++) o0[k] = 0;
        for (int64_t i = 0; i < n; i++) {
            const double d0 = c[r * cs + i * ci], d1 = c[(r + 1) * cs + i * ci], d2 = c[(r + 2) * cs + i * ci],
                         d3 = c[(r + 3) * cs + i * ci], *w = v + i * K;
            for (int64_t k = 0; k < K; k++) {
                const double x = w[k];
                o0[k] += d0 * x, o1[k] += d1 * x, o2[k] += d2 * x, o3[k] += d3 * x;
            }
        }
    }
    for (; r < hi; r++) {
        double *o = out + r * K;
        for (int64_t k = 0; k < K; k++) o[k] = 0;
        for (int64_t i = 0; i < n; i++) {
            const double d = c[r * cs + i * ci], *w = v + i * K;
            for (int64_t k = 0; k < K; k++) o[k] += d * w[k];
        }
    }
}

/* dx[M,K] = dy[M,N] . W[N,K], rows m; each element sums over j in order */
static void linear_dx_rows(const Rows *r, int64_t lo, int64_t hi) { sum_rows(r->out, r->a, r->N, 1, r->b, r->N, r->K, lo, hi); }

/* dW[N,K] = dy[M,N]^T . x[M,K], rows j of dW; each element sums over m in order */
static void linear_dw_rows(const Rows *r, int64_t lo, int64_t hi) { sum_rows(r->out, r->a, 1, r->N, r->b, r->M, r->K, lo, hi); }

/* y[M,N] = x[M,K] . W[N,K]^T and the two backward products, accumulated in double */
void ref_gemm(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    const Shape *a = &n->in[0]->shape, *b = &n->in[1]->shape;
    Rows r = {0};
    r.a = in[0], r.b = in[1], r.out = out;
    if (n->op == OP_LINEAR) {
        r.K = last_dim(a), r.M = shape_numel(a) / r.K, r.N = b->dim[0], r.fn = linear_rows;
        parallel_rows(&r, r.M);
    } else if (n->op == OP_LINEAR_DX) {
        r.N = last_dim(a), r.M = shape_numel(a) / r.N, r.K = b->dim[1], r.fn = linear_dx_rows;
        parallel_rows(&r, r.M);
    } else {
        r.N = last_dim(a), r.M = shape_numel(a) / r.N, r.K = last_dim(b), r.fn = linear_dw_rows;
        parallel_rows(&r, r.N);
    }
}

/* what the slices of one op share */
typedef struct OpArgs {
    const RefOpCtx *c;
    const Node *n;
    double **in, *out, **parts;
} OpArgs;

static void elementwise_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const Node *n = a->n;
    int64_t D = last_dim(&n->shape), sz[IR_MAX_INPUTS];
    for (int k = 0; k < n->n_in; k++) sz[k] = shape_numel(&n->in[k]->shape);
    double x[IR_MAX_INPUTS];
    for (int64_t i = lo; i < hi; i++) {
        for (int k = 0; k < n->n_in; k++) x[k] = (op_info[n->op].row_in >> k & 1) ? a->in[k][i / D] : a->in[k][i % sz[k]];
        a->out[i] = op_info[n->op].eval(x, n);
    }
}

static void elementwise(const Node *n, double **in, double *out) {
    OpArgs a = {NULL, n, in, out, NULL};
    ref_parallel(shape_numel(&n->shape), 8, elementwise_slice, &a);
}

/* The row factor is rounded to the op's dtype before the product, as torch's rsqrt result is
 * a tensor of it; the factors are the part (for scale_rows in the backward pass). */
static void rms_normalize_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const Node *n = a->n;
    double **in = a->in, *out = a->out, **parts = a->parts;
    int64_t D = last_dim(&n->shape);
    for (int64_t r = lo; r < hi; r++) {
        const double *x = in[0] + r * D;
        double ss = 0;
        for (int64_t j = 0; j < D; j++) ss += x[j] * x[j];
        double rs = dtype_round(n->compute, 1.0 / sqrt(ss / (double)D + n->a.eps));
        if (parts[0]) parts[0][r] = rs;
        for (int64_t j = 0; j < D; j++) out[r * D + j] = x[j] * rs;
    }
}

void ref_rms_normalize(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    OpArgs a = {NULL, n, in, out, parts};
    int64_t D = last_dim(&n->shape);
    ref_parallel(shape_numel(&n->shape) / D, 3 * D, rms_normalize_slice, &a);
}

static void rms_normalize_backward_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const Node *n = a->n;
    double **in = a->in, *out = a->out;
    int64_t D = last_dim(&n->shape);
    for (int64_t r = lo; r < hi; r++) {
        const double *dy = in[0] + r * D, *x = in[1] + r * D;
        double ss = 0, sdx = 0;
        for (int64_t j = 0; j < D; j++) ss += x[j] * x[j], sdx += dy[j] * x[j];
        double rs = 1.0 / sqrt(ss / (double)D + n->a.eps);
        double c = sdx / (double)D * rs * rs * rs;
        for (int64_t j = 0; j < D; j++) out[r * D + j] = rs * dy[j] - x[j] * c;
    }
}

void ref_rms_normalize_backward(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    OpArgs a = {NULL, n, in, out, NULL};
    int64_t D = last_dim(&n->shape);
    ref_parallel(shape_numel(&n->shape) / D, 4 * D, rms_normalize_backward_slice, &a);
}

/* x [B,T,heads*hd]; cos/sin rows indexed by position t */
static void rope_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const RefOpCtx *c = a->c;
    const Node *n = a->n;
    double **in = a->in, *out = a->out;
    int64_t row = n->shape.dim[2], hd = row / n->a.heads, half = hd / 2, T = n->shape.dim[1];
    for (int64_t i = lo; i < hi; i++) {
        int64_t j = i % hd, t = (i / row) % T;
        double cs = in[1][t * hd + j], sn = in[2][t * hd + j];
        if (n->op == OP_ROPE) {
            double xr = j < half ? -in[0][i + half] : in[0][i - half];
            out[i] = ref_inner_round(c, n->compute, in[0][i] * cs) + ref_inner_round(c, n->compute, xr * sn);
        } else {
            int64_t ip = j < half ? i + half : i - half, jp = j < half ? j + half : j - half;
            double direct = ref_inner_round(c, n->a.to, ref_inner_round(c, n->compute, in[0][i] * cs));
            double rot = ref_inner_round(c, n->a.to, ref_inner_round(c, n->compute, in[0][ip] * in[2][t * hd + jp]));
            out[i] = direct + (j < half ? rot : -rot);
        }
    }
}

void ref_rope(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    OpArgs a = {c, n, in, out, NULL};
    ref_parallel(shape_numel(&n->shape), 8, rope_slice, &a);
}

/* one query row (b, h, i) a item, in that order */
static void attention_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const Node *n = a->n;
    double **in = a->in, *out = a->out, **parts = a->parts;
    const Shape *q = &n->in[0]->shape;
    int64_t T = q->dim[1], H = n->a.heads, KV = n->a.kv_heads, hd = q->dim[2] / H;
    double scale = 1.0 / sqrt((double)hd);
    double *s = xmalloc((size_t)T * sizeof *s);
    for (int64_t row = lo; row < hi; row++) {
        int64_t i = row % T, h = row / T % H, b = row / (T * H), kvh = h / (H / KV);
        const double *qi = in[0] + (b * T + i) * H * hd + h * hd;
        int64_t n_keys = n->a.causal ? i + 1 : T;
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j < n_keys; j++) {
            const double *kj = in[1] + (b * T + j) * KV * hd + kvh * hd;
            double d = 0;
            for (int64_t e = 0; e < hd; e++) d += qi[e] * kj[e];
            s[j] = d * scale;
            if (s[j] > m) m = s[j];
        }
        for (int64_t j = 0; j < n_keys; j++) l += s[j] = exp(s[j] - m);
        double *o = out + (b * T + i) * H * hd + h * hd;
        for (int64_t e = 0; e < hd; e++) {
            double acc = 0;
            for (int64_t j = 0; j < n_keys; j++) acc += s[j] * in[2][(b * T + j) * KV * hd + kvh * hd + e];
            o[e] = acc / l;
        }
        if (parts[0]) parts[0][(b * H + h) * T + i] = m + log(l);
    }
    free(s);
}

void ref_attention(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    OpArgs a = {NULL, n, in, out, parts};
    const Shape *q = &n->in[0]->shape;
    ref_parallel(q->dim[0] * n->a.heads * q->dim[1], 4 * q->dim[1] * (q->dim[2] / n->a.heads), attention_slice, &a);
}

/* The gradient of attention, as its two kernels split it. With p = exp(s * scale - lse),
 * dsum = rowsum(dO * O), ds = p (dO . v - dsum): dq = scale ds k (backward_dq, which also
 * returns dsum); dk = scale ds^T q and dv = p^T dO (backward_dkv). Exact, in double. */
typedef struct AttnDims {
    int64_t B, T, H, KV, hd;
    double scale;
} AttnDims;

static AttnDims attn_dims(const Node *n) {
    const Shape *q = &n->in[1]->shape;
    AttnDims d = {q->dim[0], q->dim[1], n->a.heads, n->a.kv_heads, q->dim[2] / n->a.heads, 0};
    d.scale = 1.0 / sqrt((double)d.hd);
    return d;
}

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t e = 0; e < n; e++) s += a[e] * b[e];
    return s;
}

/* in: dO, q, k, v, O, lse; out: dq; parts: dsum [B, H, T]. One query row (b, h, i) an item. */
static void attention_backward_dq_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const Node *n = a->n;
    AttnDims d = attn_dims(n);
    double **in = a->in, *dq = a->out, **parts = a->parts;
    const double *dO = in[0], *Q = in[1], *K = in[2], *V = in[3], *O = in[4], *lse = in[5];
    for (int64_t row = lo; row < hi; row++) {
        int64_t i = row % d.T, h = row / d.T % d.H, b = row / (d.T * d.H), kvh = h / (d.H / d.KV);
        int64_t qo = (b * d.T + i) * d.H * d.hd + h * d.hd;
        for (int64_t e = 0; e < d.hd; e++) dq[qo + e] = 0;
        double di = dot(dO + qo, O + qo, d.hd);
        if (parts[0]) parts[0][(b * d.H + h) * d.T + i] = di;
        int64_t n_keys = n->a.causal ? i + 1 : d.T;
        for (int64_t j = 0; j < n_keys; j++) {
            int64_t ko = (b * d.T + j) * d.KV * d.hd + kvh * d.hd;
            double p = exp(dot(Q + qo, K + ko, d.hd) * d.scale - lse[(b * d.H + h) * d.T + i]);
            double ds = p * (dot(dO + qo, V + ko, d.hd) - di);
            for (int64_t e = 0; e < d.hd; e++) dq[qo + e] += ds * K[ko + e] * d.scale;
        }
    }
}

void ref_attention_backward_dq(const RefOpCtx *c, const Node *n, double **in, double *dq, double **parts) {
    OpArgs a = {NULL, n, in, dq, parts};
    AttnDims d = attn_dims(n);
    ref_parallel(d.B * d.H * d.T, 6 * d.T * d.hd, attention_backward_dq_slice, &a);
}

/* in: dO, q, k, v, lse, dsum; out: dk; parts: dv. One key row (b, kv head, j) an item; its
 * sums run over the group's query heads and then the queries in order, the order of a loop
 * over (b, h, i, j). */
static void attention_backward_dkv_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const Node *n = a->n;
    AttnDims d = attn_dims(n);
    double **in = a->in, *dk = a->out, *dv = a->parts[0];
    const double *dO = in[0], *Q = in[1], *K = in[2], *V = in[3], *lse = in[4], *dsum = in[5];
    int64_t rep = d.H / d.KV;
    for (int64_t row = lo; row < hi; row++) {
        int64_t j = row % d.T, kvh = row / d.T % d.KV, b = row / (d.T * d.KV);
        int64_t ko = (b * d.T + j) * d.KV * d.hd + kvh * d.hd;
        for (int64_t e = 0; e < d.hd; e++) dk[ko + e] = dv[ko + e] = 0;
        for (int64_t h = kvh * rep; h < (kvh + 1) * rep; h++)
            for (int64_t i = n->a.causal ? j : 0; i < d.T; i++) {
                int64_t qo = (b * d.T + i) * d.H * d.hd + h * d.hd, st = (b * d.H + h) * d.T + i;
                double p = exp(dot(Q + qo, K + ko, d.hd) * d.scale - lse[st]);
                double ds = p * (dot(dO + qo, V + ko, d.hd) - dsum[st]);
                for (int64_t e = 0; e < d.hd; e++) {
                    dk[ko + e] += ds * Q[qo + e] * d.scale;
                    dv[ko + e] += p * dO[qo + e];
                }
            }
    }
}

void ref_attention_backward_dkv(const RefOpCtx *c, const Node *n, double **in, double *dk, double **parts) {
    OpArgs a = {NULL, n, in, dk, parts};
    AttnDims d = attn_dims(n);
    ref_parallel(d.B * d.KV * d.T, 8 * (d.H / d.KV) * d.T * d.hd, attention_backward_dkv_slice, &a);
}

/* in: logits, labels; out: mean loss; parts: stats [rows, MMC_CE_STATS] (layouts.h), count.
 * The rows on every core into the stats, then their losses summed in row order. */
static void cross_entropy_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const RefOpCtx *c = a->c;
    const Node *n = a->n;
    double **in = a->in, *stats = a->parts[2];
    int64_t V = last_dim(&n->in[0]->shape);
    for (int64_t r = lo; r < hi; r++) {
        const double *x = in[0] + r * V;
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < V; j++)
            if (x[j] > m) m = x[j];
        for (int64_t j = 0; j < V; j++) sum += exp(x[j] - m);
        double logsum = log(sum);
        int64_t t = (int64_t)in[1][r];
        double loss = 0;
        if (t != n->a.ignore_index) loss = dtype_round(c->reg, -ref_inner_round(c, n->compute, (x[t] - m) - logsum));
        double *row = stats + r * MMC_CE_STATS;
        row[MMC_CE_MAX] = m, row[MMC_CE_LOGSUM] = logsum, row[MMC_CE_LOSS] = loss;
    }
}

void ref_cross_entropy(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    const Shape *s = &n->in[0]->shape;
    int64_t V = last_dim(s), rows = shape_numel(s) / V;
    double *stats = parts[0] ? parts[0] : xmalloc((size_t)rows * MMC_CE_STATS * sizeof *stats);
    double *p3[3] = {parts[0], parts[1], stats};
    OpArgs a = {c, n, in, out, p3};
    ref_parallel(rows, 3 * V, cross_entropy_slice, &a);
    double total = 0, kept = 0;
    for (int64_t r = 0; r < rows; r++) {
        total += stats[r * MMC_CE_STATS + MMC_CE_LOSS];
        kept += (int64_t)in[1][r] != n->a.ignore_index;
    }
    if (!parts[0]) free(stats);
    /* the template sums in double, then divides in the register type */
    out[0] = kept > 0 ? dtype_round(c->reg, dtype_round(c->reg, total) / dtype_round(c->reg, kept)) : 0; /* as the template */
    if (parts[1]) parts[1][0] = kept;
}

/* in: dloss, logits, labels, stats, count */
static void cross_entropy_backward_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const RefOpCtx *c = a->c;
    const Node *n = a->n;
    double **in = a->in, *out = a->out;
    int64_t V = last_dim(&n->shape);
    double g = dtype_round(c->reg, in[0][0] / in[4][0]);
    for (int64_t r = lo; r < hi; r++) {
        int64_t t = (int64_t)in[2][r];
        double m = in[3][r * MMC_CE_STATS + MMC_CE_MAX], logsum = in[3][r * MMC_CE_STATS + MMC_CE_LOGSUM];
        double d = t == n->a.ignore_index ? 0.0 : ref_inner_round(c, n->compute, -g);
        for (int64_t j = 0; j < V; j++) {
            double lp = ref_inner_round(c, n->compute, (in[1][r * V + j] - m) - logsum);
            out[r * V + j] = (j == t ? d : 0.0) - exp(lp) * d;
        }
    }
}

void ref_cross_entropy_backward(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    OpArgs a = {c, n, in, out, NULL};
    int64_t V = last_dim(&n->shape);
    ref_parallel(shape_numel(&n->shape) / V, 3 * V, cross_entropy_backward_slice, &a);
}

/* in: labels; out: how many are not ignore_index (the count cross_entropy's forward kernel
 * also finds) */
void ref_target_count(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    int64_t rows = shape_numel(&n->in[0]->shape), kept = 0;
    for (int64_t r = 0; r < rows; r++) kept += (int64_t)in[0][r] != n->a.ignore_index;
    out[0] = dtype_round(c->reg, (double)kept);
}

void ref_embedding(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    int64_t D = last_dim(&n->shape), rows = shape_numel(&n->shape) / D;
    for (int64_t r = 0; r < rows; r++) {
        int64_t id = (int64_t)in[1][r];
        memcpy(out + r * D, in[0] + id * D, (size_t)D * sizeof *out);
    }
}

/* in: ids; out: the row indices in order of id, rows of one id in row order; parts: where
 * each id's rows start (vocab + 1 entries) */
void ref_embedding_sort(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    int64_t rows = shape_numel(&n->in[0]->shape), V = n->a.vocab;
    double *start = parts[0];
    int64_t *next = xcalloc((size_t)V + 1, sizeof *next);
    for (int64_t r = 0; r < rows; r++) next[(int64_t)in[0][r] + 1]++;
    for (int64_t v = 0; v < V; v++) next[v + 1] += next[v];
    for (int64_t v = 0; v <= V; v++) start[v] = (double)next[v];
    for (int64_t r = 0; r < rows; r++) out[next[(int64_t)in[0][r]]++] = (double)r;
    free(next);
}

/* in: dy, ids (the sorted order and starts are for the GPU's summation order). Columns j
 * an item: each element sums its rows in row order. */
static void embedding_backward_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    const Node *n = a->n;
    int64_t D = n->shape.dim[1], rows = shape_numel(&n->in[1]->shape), V = n->shape.dim[0];
    for (int64_t v = 0; v < V; v++)
        for (int64_t j = lo; j < hi; j++) a->out[v * D + j] = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t id = (int64_t)a->in[1][r];
        for (int64_t j = lo; j < hi; j++) a->out[id * D + j] += a->in[0][r * D + j];
    }
}

void ref_embedding_backward(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    OpArgs a = {NULL, n, in, out, NULL};
    ref_parallel(n->shape.dim[1], shape_numel(&n->in[1]->shape) + n->shape.dim[0], embedding_backward_slice, &a);
}

/* columns j an item, each summing its rows in order */
static void sums_slice(const void *ctx, int64_t lo, int64_t hi) {
    const OpArgs *a = ctx;
    int64_t C = shape_numel(&a->n->shape), M = shape_numel(&a->n->in[0]->shape) / C;
    for (int64_t j = lo; j < hi; j++) {
        double s = 0;
        for (int64_t m = 0; m < M; m++) s += a->in[0][m * C + j];
        a->out[j] = s;
    }
}

void ref_sums(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    OpArgs a = {NULL, n, in, out, NULL};
    int64_t C = shape_numel(&n->shape);
    ref_parallel(C, shape_numel(&n->in[0]->shape) / C, sums_slice, &a);
}

void ref_compute(const RefOpCtx *c, const Node *n, double **in, double *out, double **parts) {
    const OpInfo *info = &op_info[n->op];
    if (info->kind == OK_ELEMENTWISE) elementwise(n, in, out);
    else if (info->ref) info->ref(c, n, in, out, parts);
    else die("ref backend: no implementation of %s", info->name);
}
