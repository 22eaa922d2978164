/* Every op's derivative rule, and the whole tiny graph's backward pass, against central
 * finite differences, in fp64 on the ref backend (policy fp64: every value f64).
 * Tolerance: |analytic - numeric| <= 1e-6 * (1 + |analytic|). With h = 1e-5 the central
 * difference's truncation error is O(h^2 f''') ~ 1e-10 and its rounding error
 * ~ 1e-16 / 1e-5 = 1e-11, so a wrong rule shows up orders of magnitude above the bound. */
#include "test_util.h"

#include "init.h"
#include "train.h"

static double loss_now(Backend *b) {
    b->run_phase(b, PHASE_MICRO);
    return read_loss(b);
}

/* Checks up to `samples` elements of every parameter; returns the worst error ratio. */
static void check_graph(const char *what, Plan *pl, int64_t vocab, int samples) {
    Backend *b = ref_backend_create(pl);
    init_consts(b);
    test_fill(b, vocab, 0.5, 1.0f);
    const Graph *g = pl->g;
    CHECK(g->policy.master == DT_F64, "%s: the gradient check needs the fp64 policy", what);
    int64_t pbytes = pl->p->buffer_bytes[BUF_PARAMS];
    unsigned char *zero = xcalloc((size_t)pbytes + 1, 1);
    b->write(b, BUF_GRADS, 0, zero, pbytes);
    loss_now(b);
    double *grad = (double *)test_buffer(b, BUF_GRADS);
    double *param = (double *)test_buffer(b, BUF_PARAMS);
    const double h = 1e-5;
    int checked = 0;
    double worst = 0;
    for (int p = 0; p < g->n_params; p++) {
        int64_t n = shape_numel(&g->params[p].node->shape), off = g->params[p].offset;
        int count = n < samples ? (int)n : samples;
        for (int s = 0; s < count; s++) {
            int64_t k = off + (n <= samples ? s : (int64_t)(test_uniform() * (double)n));
            double keep = param[k], v;
            v = keep + h;
            b->write(b, BUF_PARAMS, k * 8, &v, 8);
            double up = loss_now(b);
            v = keep - h;
            b->write(b, BUF_PARAMS, k * 8, &v, 8);
            double down = loss_now(b);
            b->write(b, BUF_PARAMS, k * 8, &keep, 8);
            double fd = (up - down) / (2 * h), an = grad[k];
            double err = fabs(an - fd) / (1e-6 * (1 + fabs(an)));
            if (err > worst) worst = err;
            CHECK(err <= 1, "%s: d loss / d %s[%lld]: autodiff %.12g, finite difference %.12g", what,
                  g->params[p].node->name, (long long)(k - off), an, fd);
            checked++;
        }
    }
    printf("  %-28s %4d elements, worst error %.3f of the bound\n", what, checked, worst);
    free(grad), free(param), free(zero);
    b->destroy(b);
}

static void check_op(const char *name, const char *body, int64_t vocab) {
    char *lua = xasprintf("local function rand(n, s) return param(n, s, \"normal(0,1)\") end\n%s\n", body);
    char *path = test_write_graph(name, lua);
    Plan *pl = test_compile(path, "fp64", NULL, 1);
    check_graph(name, pl, vocab, 24);
    free(lua), free(path);
}

/* loss = sum(op(...) * r): a random projection of the op's output */
#define PROJECT(shape) "loss(sum_all(mul(o, rand(\"r\", " shape "))))"

int main(void) {
    printf("per-op derivative rules vs finite differences (fp64):\n");
    check_op("add", "local o = add(rand(\"x\", {2,3,8}), rand(\"y\", {8}))\n" PROJECT("{2,3,8}"), 0);
    check_op("add_", "local o = add_(rand(\"x\", {2,3,8}), rand(\"y\", {3,8}))\n" PROJECT("{2,3,8}"), 0);
    check_op("mul", "local o = mul(rand(\"w\", {8}), rand(\"x\", {2,3,8}))\n" PROJECT("{2,3,8}"), 0);
    check_op("scale", "local o = scale(rand(\"x\", {2,5}), -0.7)\n" PROJECT("{2,5}"), 0);
    check_op("silu", "local o = silu(rand(\"x\", {2,3,8}))\n" PROJECT("{2,3,8}"), 0);
    check_op("cast", "local o = cast(silu(rand(\"x\", {4,6})), \"f32\")\n" PROJECT("{4,6}"), 0);
    check_op("linear", "local o = linear(rand(\"x\", {2,3,8}), rand(\"w\", {5,8}))\n" PROJECT("{2,3,5}"), 0);
    check_op("embedding", "local ids = input(\"ids\", {2,5}, \"i32\")\n"
                          "local o = embedding(rand(\"w\", {11,6}), ids)\n" PROJECT("{2,5,6}"), 11);
    check_op("rms_normalize", "local o = rms_normalize(rand(\"x\", {2,3,8}), 1e-5)\n" PROJECT("{2,3,8}"), 0);
    check_op("rope", "local c, s = rope_tables(4, 6, 10000)\n"
                     "local o = rope(rand(\"x\", {2,4,12}), c, s, {heads = 2})\n" PROJECT("{2,4,12}"), 0);
    check_op("attention_causal_gqa",
             "local o = attention(rand(\"q\", {2,5,16}), rand(\"k\", {2,5,8}), rand(\"v\", {2,5,8}),\n"
             "                    {heads = 4, kv_heads = 2, causal = true})\n" PROJECT("{2,5,16}"), 0);
    check_op("attention_full",
             "local o = attention(rand(\"q\", {1,4,8}), rand(\"k\", {1,4,8}), rand(\"v\", {1,4,8}),\n"
             "                    {heads = 2, kv_heads = 2, causal = false})\n" PROJECT("{1,4,8}"), 0);
    check_op("cross_entropy", "local labels = input(\"labels\", {2,6}, \"i32\")\n"
                              "loss(cross_entropy(rand(\"logits\", {2,6,7}), labels, {ignore = 0}))", 7);
    check_op("sum_all", "loss(sum_all(mul(rand(\"x\", {3,4}), rand(\"y\", {3,4}))))", 0);

    printf("the whole tiny graph (graphs/tiny.lua at test sizes, fp64):\n");
    Plan *pl = test_compile("graphs/tiny.lua", "fp64",
                            "vocab=37,dim=16,layers=2,heads=4,kv_heads=2,ffn=24,batch=2,seq=6", 1);
    check_graph("tiny", pl, 37, 12);
    return test_done("test_gradcheck");
}
