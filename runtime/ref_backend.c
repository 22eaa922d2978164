/* ref_backend: executes a plan with plain C on the CPU. Buffers are host memory with the
 * plan's byte layout; each kernel group runs op by op on whole tensors of doubles, rounded
 * to the kernel's register type after every op, to the storage dtype after every op when
 * the policy rounds eagerly, and always when a value is stored. So a fused kernel and the
 * same ops unfused agree bit for bit under eager rounding. The optimizer kernels are
 * emulated op for op in the master dtype. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ref_ops.h"
#include "step_state.h"
#include "util.h"

typedef struct Ref {
    Backend base;
    unsigned char *buf[BUF_COUNT];
    double **val; /* by node id, while a group runs: its values (in-group or loaded) */
    RefWatch watch; /* called with every value computed, or NULL */
    void *watch_ctx;
} Ref;

void ref_backend_watch(Backend *b, RefWatch watch, void *ctx) {
    Ref *r = (Ref *)b;
    r->watch = watch;
    r->watch_ctx = ctx;
}

char *backend_bf16_refusal(const Plan *pl, int sm, const char *device, const char *what) {
    if (sm < 0 || sm >= 80) return NULL;
    for (int i = 0; i < pl->g->n_nodes; i++)
        if (pl->g->nodes[i]->dtype == DT_BF16 || pl->g->nodes[i]->compute == DT_BF16)
            return xasprintf("%s computes in bf16 (policy %s), but %s (sm_%d) has no bf16 tensor cores (sm_80 and newer "
                             "do): use the fp32 policy, or an fp16 one with a loss scaler (amp_fp16)",
                             what, pl->g->policy.name, device, sm);
    return NULL;
}

void backend_check_adopt(const Backend *b, const Backend *from) {
    for (int i = 0; i < BUF_COUNT; i++)
        if (backend_carried(i) && b->pl->p->buffer_bytes[i] != from->pl->p->buffer_bytes[i])
            die("%s backend: %s holds %lld bytes in %s and %s %lld: the plans do not share a layout", b->name, b->pl->path,
                (long long)b->pl->p->buffer_bytes[i], buffer_name(i), from->pl->path, (long long)from->pl->p->buffer_bytes[i]);
}

void backend_check_range(const Backend *b, int buffer, int64_t offset, int64_t bytes, const char *what) {
    if (offset < 0 || offset + bytes > b->pl->p->buffer_bytes[buffer])
        die("%s backend: %s of %lld bytes at %s+%lld is outside the buffer", b->name, what, (long long)bytes,
            buffer_name(buffer), (long long)offset);
}

static void ref_write(Backend *b, int buffer, int64_t offset, const void *src, int64_t bytes) {
    Ref *r = (Ref *)b;
    backend_check_range(b, buffer, offset, bytes, "write");
    memcpy(r->buf[buffer] + offset, src, (size_t)bytes);
}

static void ref_read(Backend *b, int buffer, int64_t offset, void *dst, int64_t bytes) {
    Ref *r = (Ref *)b;
    backend_check_range(b, buffer, offset, bytes, "read");
    memcpy(dst, r->buf[buffer] + offset, (size_t)bytes);
}

static void *at(Ref *r, const Node *n) { return r->buf[n->buffer] + n->offset; }

/* a tensor's elements converted to or from their stored dtype, on every core */
typedef struct Convert {
    DType from, to; /* settle: round to `from` (the register type), then to `to` under eager */
    int eager, store;
    const void *src;
    void *dst;
    double *v;
    const Node *n; /* whose layout the memory has: rows ld apart where it has ld */
} Convert;

static size_t mem_index(const Convert *c, int64_t i) { return (size_t)(c->n->ld ? node_mem_index(c->n, i) : i); }

static void load_slice(const void *ctx, int64_t lo, int64_t hi) {
    const Convert *c = ctx;
    for (int64_t i = lo; i < hi; i++) c->v[i] = dtype_load(c->from, c->src, mem_index(c, i));
}

static double *load(Ref *r, const Node *x) {
    if (!x->materialized || x->buffer < 0) die("ref backend: %s is read but was never stored", node_label(x));
    int64_t N = shape_numel(&x->shape);
    double *v = xmalloc((size_t)N * sizeof *v);
    Convert c = {x->dtype, x->dtype, 0, 0, at(r, x), NULL, v, x};
    ref_parallel(N, 4, load_slice, &c);
    return v;
}

static void settle_slice(const void *ctx, int64_t lo, int64_t hi) {
    const Convert *c = ctx;
    for (int64_t i = lo; i < hi; i++) {
        c->v[i] = dtype_round(c->from, c->v[i]);
        if (c->eager) c->v[i] = dtype_round(c->to, c->v[i]);
        if (c->store) dtype_store(c->to, c->dst, mem_index(c, i), c->v[i]);
    }
}

/* Rounds a computed value and stores it if the plan says so. */
static void settle(Ref *r, const RefOpCtx *c, const Node *n, double *v) {
    int store = n->materialized && n->buffer >= 0;
    Convert cv = {c->reg, n->dtype, c->eager, store, NULL, store ? at(r, n) : NULL, v, n};
    ref_parallel(shape_numel(&n->shape), 8, settle_slice, &cv);
}

static DType group_reg(const Group *gr) {
    for (int i = 0; i < gr->n_nodes; i++) {
        const Node *n = gr->nodes[i];
        if (n->dtype == DT_F64 || n->compute == DT_F64) return DT_F64;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]->dtype == DT_F64) return DT_F64;
    }
    return DT_F32;
}

static void run_nodes(Ref *r, Group *gr) {
    const Graph *g = r->base.pl->g;
    RefOpCtx c = {g->policy.round_eager, group_reg(gr)};
    int n_loaded = 0;
    int *loaded = xmalloc((size_t)(gr->n_nodes * IR_MAX_INPUTS + 1) * sizeof *loaded);
    for (int i = 0; i < gr->n_nodes; i++) {
        Node *n = gr->nodes[i];
        if (n->op == OP_PART) continue;
        double *in[IR_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++) {
            Node *x = n->in[k];
            if (!r->val[x->id]) {
                r->val[x->id] = load(r, x);
                loaded[n_loaded++] = x->id;
            }
            in[k] = r->val[x->id];
        }
        double *out = xcalloc((size_t)shape_numel(&n->shape) + 1, sizeof *out);
        double *parts[2] = {NULL, NULL};
        Node *part_nodes[2] = {NULL, NULL};
        for (int k = 0; k < gr->n_nodes; k++) {
            Node *p = gr->nodes[k];
            if (p->op == OP_PART && p->in[0] == n) {
                part_nodes[p->a.index - 1] = p;
                parts[p->a.index - 1] = xcalloc((size_t)shape_numel(&p->shape) + 1, sizeof(double));
            }
        }
        /* an op writes all its extra outputs; one the plan keeps no node for goes to scratch */
        double *scratch[2] = {NULL, NULL};
        for (int k = 0; k < op_info[n->op].n_parts && k < 2; k++)
            if (!parts[k]) {
                Node shape_of = {0};
                op_info[n->op].part(n, k + 1, &shape_of);
                parts[k] = scratch[k] = xcalloc((size_t)shape_numel(&shape_of.shape) + 1, sizeof(double));
            }
        if (n->op == OP_GRAD_ACCUMULATE) {
            int64_t N = shape_numel(&n->shape);
            const void *old = at(r, n);
            for (int64_t e = 0; e < N; e++) out[e] = dtype_load(n->dtype, old, (size_t)e) + in[0][e];
        } else if (n->op == OP_LINEAR_DW_ADD) {
            /* as cuBLASLt with beta = 1: the sums in the GEMM's accumulator type (f32, f64 for
             * an f64 GEMM), added to the gradient */
            ref_compute(&c, n, in, out, parts);
            int64_t N = shape_numel(&n->shape);
            const void *old = at(r, n);
            DType acc = n->compute == DT_F64 ? DT_F64 : DT_F32;
            for (int64_t e = 0; e < N; e++) out[e] = dtype_load(n->dtype, old, (size_t)e) + dtype_round(acc, out[e]);
        } else {
            ref_compute(&c, n, in, out, parts);
        }
        settle(r, &c, n, out);
        r->val[n->id] = out;
        if (r->watch) r->watch(r->watch_ctx, n, out, in);
        for (int k = 0; k < 2; k++)
            if (part_nodes[k]) {
                settle(r, &c, part_nodes[k], parts[k]);
                r->val[part_nodes[k]->id] = parts[k];
            }
        free(scratch[0]), free(scratch[1]);
    }
    for (int i = 0; i < gr->n_nodes; i++) {
        free(r->val[gr->nodes[i]->id]);
        r->val[gr->nodes[i]->id] = NULL;
    }
    for (int i = 0; i < n_loaded; i++) {
        free(r->val[loaded[i]]);
        r->val[loaded[i]] = NULL;
    }
    free(loaded);
}

/* ---- the update phase, op for op as templates/{grad_norm,adamw,step_finish}.cu */

static void grad_norm(Ref *r) {
    const Graph *g = r->base.pl->g;
    const TrainConfig *t = &g->train;
    DType m = g->policy.master;
    MmcStepState *s = (MmcStepState *)r->buf[BUF_STATE];
    const void *grads = r->buf[BUF_GRADS];
    float inv_scale = t->loss_scaling ? (float)(1.0 / (double)s->scale) : 1.0f;
    unsigned int *zeros = (unsigned int *)(r->buf[BUF_STATE] + MMC_STATE_ZEROS);
    int found = 0;
    float total_sq = 0;
    for (int p = 0; p < g->n_params; p++) {
        int64_t start = g->params[p].offset, len = shape_numel(&g->params[p].node->shape);
        double ss = 0;
        zeros[p] = 0;
        for (int64_t k = 0; k < len; k++) {
            double gv = dtype_load(m, grads, (size_t)(start + k));
            found |= !isfinite(gv);
            zeros[p] += gv == 0.0;
            double u = inv_scale == 1.0f ? gv : dtype_round(m, gv * inv_scale);
            ss += u * u;
        }
        float n = (float)sqrt(ss);
        total_sq = total_sq + n * n;
    }
    float total = sqrtf(total_sq);
    s->grad_norm = found ? NAN : total;
    s->found_inf = t->loss_scaling ? (float)found : 0.0f;
    float coef = t->clip > 0 ? (float)t->clip / (total + 1e-6f) : 1.0f;
    s->clip_coef = coef < 1.0f ? coef : 1.0f;
    double step = (double)s->update * t->accumulation + (t->accumulation - 1);
    s->lr = (t->schedule == SCHED_MINIMIND_COSINE
                 ? t->lr / 10.0 + 0.5 * t->lr * (1.0 + cos(3.14159265358979323846 * step / s->total_micro))
                 : t->lr) *
            (s->update < t->warmup ? (s->update + 1.0) / t->warmup : 1.0); /* linear warm-up */
}

static void adamw(Ref *r) {
    const Graph *g = r->base.pl->g;
    const TrainConfig *t = &g->train;
    DType M = g->policy.master;
    MmcStepState *s = (MmcStepState *)r->buf[BUF_STATE];
    void *p = r->buf[BUF_PARAMS], *gr = r->buf[BUF_GRADS], *m = r->buf[BUF_ADAM_M], *v = r->buf[BUF_ADAM_V];
    int64_t n = r->base.pl->p->buffer_bytes[BUF_PARAMS] / (int64_t)dtype_size(M);
#define R(x) dtype_round(M, (x))
    const int skip = s->found_inf != 0.0f;
    const double lr = s->lr;
    const int step = s->adam_step + 1;
    const double inv_scale = t->loss_scaling ? R(1.0 / (double)s->scale) : 1.0;
    const double coef = s->clip_coef;
    const double decay = R(1.0 - lr * t->weight_decay);
    const double bc1 = 1.0 - pow(t->beta1, (double)step), bc2 = 1.0 - pow(t->beta2, (double)step);
    const double step_size = R(-(lr / bc1)), bc2_sqrt = R(sqrt(bc2));
    const double w1 = R(1.0 - t->beta1), beta2 = R(t->beta2), w2 = R(1.0 - t->beta2), eps = R(t->eps);
    for (int64_t i = 0; i < n; i++) {
        if (!skip) {
            double gi = dtype_load(M, gr, (size_t)i);
            if (inv_scale != 1.0) gi = R(gi * inv_scale);
            gi = R(gi * coef);
            double pi = R(dtype_load(M, p, (size_t)i) * decay);
            double mi = dtype_load(M, m, (size_t)i);
            mi = R(mi + R(w1 * R(gi - mi)));
            double vi = R(dtype_load(M, v, (size_t)i) * beta2);
            vi = R(vi + R(R(w2 * gi) * gi));
            double denom = R(R(R(sqrt(vi)) / bc2_sqrt) + eps);
            pi = R(pi + R(step_size * R(mi / denom)));
            dtype_store(M, p, (size_t)i, pi);
            dtype_store(M, m, (size_t)i, mi);
            dtype_store(M, v, (size_t)i, vi);
        }
        dtype_store(M, gr, (size_t)i, 0.0);
    }
#undef R
}

static void step_finish(Ref *r) {
    const TrainConfig *t = &r->base.pl->g->train;
    MmcStepState *s = (MmcStepState *)r->buf[BUF_STATE];
    int found = s->found_inf != 0.0f;
    if (t->loss_scaling) {
        MmcScaler p = train_scaler(t);
        mmc_scaler_update(s, &p);
    }
    if (found) s->skipped += 1;
    else s->adam_step += 1;
    s->update += 1;
    s->found_inf = 0.0f;
    s->loss_seed = (float)((double)s->scale / t->accumulation);
}

static void ref_run_group(Backend *b, int index) {
    Ref *r = (Ref *)b;
    Group *gr = b->pl->p->groups[index];
    if (gr->kind != GK_OPTIMIZER) {
        run_nodes(r, gr);
        return;
    }
    switch (gr->optimizer) {
    case OPT_GRAD_NORM: grad_norm(r); break;
    case OPT_ADAMW: adamw(r); break;
    case OPT_STEP_FINISH: step_finish(r); break;
    case OPT_COUNT: die("ref backend: kernel %s has no optimizer kernel", gr->kernel);
    }
}

static void ref_run_phase(Backend *b, Phase phase) {
    for (int i = 0; i < b->pl->p->n_groups; i++)
        if (b->pl->p->groups[i]->phase == phase) ref_run_group(b, i);
}

static void ref_destroy(Backend *b) {
    Ref *r = (Ref *)b;
    for (int i = 0; i < BUF_COUNT; i++) free(r->buf[i]);
    free(r->val);
    free((char *)r->base.device);
    free(r);
}

/* the CPU does everything at once: copies are done when queued, fences are always passed */
static void *ref_host_alloc(Backend *b, size_t bytes) {
    (void)b;
    return xcalloc(bytes + 1, 1);
}
static int ref_fence(Backend *b) {
    (void)b;
    return 0;
}
static void ref_wait(Backend *b, int ticket) { (void)b, (void)ticket; }

static void ref_adopt(Backend *b, Backend *from) {
    Ref *r = (Ref *)b, *f = (Ref *)from;
    backend_check_adopt(b, from);
    for (int i = 0; i < BUF_COUNT; i++)
        if (backend_carried(i)) {
            free(r->buf[i]);
            r->buf[i] = f->buf[i];
            f->buf[i] = NULL;
        }
}

Backend *ref_backend_create(Plan *pl) {
    Ref *r = xcalloc(1, sizeof *r);
    r->base = (Backend){"ref", pl, ref_write, ref_read, ref_run_group, ref_run_phase, ref_destroy,
                        ref_host_alloc, ref_write, ref_read, ref_fence, ref_wait, NULL, NULL, 0, NULL, NULL, NULL};
    for (int i = 0; i < BUF_COUNT; i++) r->buf[i] = xcalloc((size_t)pl->p->buffer_bytes[i] + 1, 1);
    r->val = xcalloc((size_t)pl->g->next_id + 1, sizeof *r->val);
    r->base.device = xasprintf("CPU, %d threads", ref_thread_count());
    r->base.adopt = ref_adopt;
    return &r->base;
}
