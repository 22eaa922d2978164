/* init: see init.h. */
#include "init.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "util.h"

/* resume files hold the state byte for byte, so it must have no padding of unknown value */
_Static_assert(sizeof(MmcStepState) == 2 * sizeof(double) + 5 * sizeof(float) + 7 * sizeof(int), "MmcStepState has padding");

static double draw(const char *spec, const Shape *s, uint64_t *rs) {
    double a, b;
    if (!strcmp(spec, "ones")) return 1.0;
    if (!strcmp(spec, "zeros")) return 0.0;
    if (!strcmp(spec, "fan_in")) { /* torch.nn.Linear: kaiming_uniform_(a=sqrt(5)) = U(+-1/sqrt(in)) */
        double bound = 1.0 / sqrt((double)s->dim[s->rank - 1]);
        return (2.0 * rng_uniform(rs) - 1.0) * bound;
    }
    if (sscanf(spec, "normal(%lf,%lf)", &a, &b) == 2) return a + b * rng_normal(rs);
    if (sscanf(spec, "uniform(%lf,%lf)", &a, &b) == 2) return a + (b - a) * rng_uniform(rs);
    die("init: unknown initialiser '%s'", spec);
}

void init_params(Backend *b, uint64_t seed) {
    const Graph *g = b->pl->g;
    DType m = g->policy.master;
    for (int i = 0; i < g->n_params; i++) {
        const Node *p = g->params[i].node;
        int64_t n = shape_numel(&p->shape);
        void *host = xmalloc((size_t)n * dtype_size(m));
        uint64_t rs = seed * 0x100000001b3ull + (uint64_t)i; /* each tensor its own stream */
        for (int64_t k = 0; k < n; k++) dtype_store(m, host, (size_t)k, draw(p->a.init, &p->shape, &rs));
        b->write(b, BUF_PARAMS, p->offset, host, n * (int64_t)dtype_size(m));
        free(host);
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
