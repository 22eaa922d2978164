/* init: see init.h. */
#include "init.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"
#include "rng.h"
#include "util.h"

/* resume files hold the state byte for byte, so it must have no padding of unknown value */
_Static_assert(sizeof(MmcStepState) == 2 * sizeof(double) + 5 * sizeof(float) + 7 * sizeof(int), "MmcStepState has padding");

/* A parameter's initialiser, read once from its spec. Element k of a tensor takes draws
 * [k * draws, (k + 1) * draws) of the tensor's own stream, and splitmix64's state after j
 * draws is the seed plus j steps, so every element can be made on its own: the tensor is
 * filled on every core with the values of one pass in order. */
typedef enum { INIT_ONES, INIT_ZEROS, INIT_FAN_IN, INIT_NORMAL, INIT_UNIFORM } InitKind;
typedef struct InitSpec {
    InitKind kind;
    double a, b; /* normal(mean, std), uniform(lo, hi); fan_in: the bound */
    int draws;   /* of the stream, per element */
} InitSpec;

static InitSpec parse_init(const char *spec, const Shape *s) {
    InitSpec r = {INIT_ZEROS, 0, 0, 0};
    if (!strcmp(spec, "ones")) r.kind = INIT_ONES;
    else if (!strcmp(spec, "zeros")) r.kind = INIT_ZEROS;
    else if (!strcmp(spec, "fan_in")) /* torch.nn.Linear: kaiming_uniform_(a=sqrt(5)) = U(+-1/sqrt(in)) */
        r.kind = INIT_FAN_IN, r.a = 1.0 / sqrt((double)s->dim[s->rank - 1]), r.draws = 1;
    else if (sscanf(spec, "normal(%lf,%lf)", &r.a, &r.b) == 2) r.kind = INIT_NORMAL, r.draws = 2;
    else if (sscanf(spec, "uniform(%lf,%lf)", &r.a, &r.b) == 2) r.kind = INIT_UNIFORM, r.draws = 1;
    else die("init: unknown initialiser '%s'", spec);
    return r;
}

static double draw(const InitSpec *sp, uint64_t *rs) {
    switch (sp->kind) {
    case INIT_ONES: return 1.0;
    case INIT_ZEROS: return 0.0;
    case INIT_FAN_IN: return (2.0 * rng_uniform(rs) - 1.0) * sp->a;
    case INIT_NORMAL: return sp->a + sp->b * rng_normal(rs);
    case INIT_UNIFORM: return sp->a + (sp->b - sp->a) * rng_uniform(rs);
    }
    return 0.0;
}

typedef struct Fill {
    InitSpec spec;
    uint64_t stream; /* the tensor's stream before its first draw */
    DType dtype;
    void *host;
} Fill;

static void fill_slice(const void *ctx, int64_t lo, int64_t hi) {
    const Fill *f = ctx;
    const uint64_t step = 0x9e3779b97f4a7c15ull; /* rng_next's increment */
    for (int64_t k = lo; k < hi; k++) {
        uint64_t rs = f->stream + (uint64_t)k * (uint64_t)f->spec.draws * step;
        dtype_store(f->dtype, f->host, (size_t)k, draw(&f->spec, &rs));
    }
}

void init_params(Backend *b, uint64_t seed) {
    const Graph *g = b->pl->g;
    DType m = g->policy.master;
    for (int i = 0; i < g->n_params; i++) {
        const Node *p = g->params[i].node;
        int64_t n = shape_numel(&p->shape);
        Fill f = {parse_init(p->a.init, &p->shape), seed * 0x100000001b3ull + (uint64_t)i, m, xmalloc((size_t)n * dtype_size(m))};
        ref_parallel(n, 16, fill_slice, &f); /* each tensor its own stream */
        b->write(b, BUF_PARAMS, p->offset, f.host, n * (int64_t)dtype_size(m));
        free(f.host);
    }
}

/* MiniMind's precompute_freqs_cis, step by step in f32 as torch computes it:
 * freqs = 1 / theta^(arange(0, hd, 2) / hd); angles = outer(t, freqs); cos/sin of them,
 * the halves repeated. */
static double rope_value(int is_cos, int64_t t, int64_t j, int64_t hd, double theta) {
    int64_t i = j % (hd / 2);
    float e = (float)((double)(2 * i) / (double)(float)hd);
    float p = (float)pow((double)(float)theta, (double)e);
    float f = (float)(1.0 / (double)p);
    float angle = (float)((double)t * (double)f);
    return is_cos ? (double)(float)cos((double)angle) : (double)(float)sin((double)angle);
}

void init_consts(Backend *b) {
    const Graph *g = b->pl->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = g->nodes[i];
        if (n->op != OP_CONST) continue;
        long long seq, hd;
        double theta;
        char kind[16];
        if (sscanf(n->a.gen, "rope_%3[a-z](%lld,%lld,%lf)", kind, &seq, &hd, &theta) != 4 ||
            (strcmp(kind, "cos") && strcmp(kind, "sin")))
            die("init: unknown constant generator '%s'", n->a.gen);
        int64_t count = shape_numel(&n->shape);
        void *host = xmalloc((size_t)count * dtype_size(n->dtype));
        for (int64_t k = 0; k < count; k++)
            dtype_store(n->dtype, host, (size_t)k, rope_value(!strcmp(kind, "cos"), k / hd, k % hd, hd, theta));
        b->write(b, n->buffer, n->offset, host, count * (int64_t)dtype_size(n->dtype));
        free(host);
    }
}

MmcStepState init_state(const Plan *pl, int64_t total_updates) {
    const TrainConfig *t = &pl->g->train;
    MmcStepState s = {0};
    s.scale = t->loss_scaling ? (float)t->scale_init : 1.0f;
    s.loss_seed = (float)((double)s.scale / t->accumulation);
    s.total_micro = (double)total_updates * t->accumulation;
    s.lr = t->lr;
    s.clip_coef = 1.0f;
    s.ticket = MMC_TICKET_IDLE;
    return s;
}
