/* The precision pass, through the report `mmc compile` prints:
 *  - under amp_fp16, graphs/minimind.lua gives every value the dtype of the trace of
 *    MiniMind under torch.autocast("cuda", float16) in docs/precision.md §1.1;
 *  - weights are cast once per step (autocast's cast cache), norm weights never;
 *  - every shipped policy compiles minimind and tiny;
 *  - editing a rule changes the generated kernels. */
#include "test_util.h"

typedef struct Row {
    const char *name, *op, *compute, *storage;
} Row;

/* docs/precision.md §1.1, by node: compute is the dtype the op's inputs have after autocast's
 * casts, storage the dtype of the result ("-": not traced separately) */
static const Row traced[] = {
    {"model.embed_tokens", "embedding", "f32", "f32"},                        /* embedding(f32 w): f32 */
    {"model.layers.0.input_layernorm.normalize", "rms_normalize", "f32", "f32"}, /* pow/mean/rsqrt f32 */
    {"model.layers.0.input_layernorm", "mul", "f32", "f32"},                  /* RMSNorm(x f32): f32 out */
    {"model.layers.0.self_attn.q_proj", "linear", "f16", "f16"},              /* q/k/v_proj: f16 */
    {"model.layers.0.self_attn.k_proj", "linear", "f16", "f16"},
    {"model.layers.0.self_attn.v_proj", "linear", "f16", "f16"},
    {"model.layers.0.self_attn.rope_q", "rope", "f32", "f32"},                /* q*cos f16 x f32: q, k f32 */
    {"model.layers.0.self_attn.rope_k", "rope", "f32", "f32"},
    {"model.layers.0.self_attn.sdpa", "attention", "f16", "f16"},            /* q, k cast back to f16 */
    {"model.layers.0.self_attn.o_proj", "linear", "f16", "f16"},
    {"model.layers.0.residual_attn", "add_", "f32", "f16"},                   /* add_ f16,f32 -> f16 */
    {"model.layers.0.post_attention_layernorm.normalize", "rms_normalize", "f32", "f32"},
    {"model.layers.0.post_attention_layernorm.type_as", "cast", "f32", "f16"}, /* type_as(x f16) */
    {"model.layers.0.post_attention_layernorm", "mul", "f32", "f32"},         /* mul(w f32, f16) -> f32 */
    {"model.layers.0.mlp.gate_proj", "linear", "f16", "f16"},
    {"model.layers.0.mlp.up_proj", "linear", "f16", "f16"},
    {"model.layers.0.mlp.act", "silu", "f16", "f16"},                         /* silu f16 */
    {"model.layers.0.mlp.act_mul", "mul", "f16", "f16"},                      /* mul f16 */
    {"model.layers.0.mlp.down_proj", "linear", "f16", "f16"},
    {"model.layers.0.residual_mlp", "add", "f16", "f16"},                     /* h + mlp f16 */
    {"model.layers.1.input_layernorm.type_as", "cast", "f32", "f16"},         /* residual stream f16 */
    {"model.layers.1.input_layernorm", "mul", "f32", "f32"},
    {"model.layers.1.residual_attn", "add_", "f16", "f16"},
    {"model.layers.7.residual_mlp", "add", "f16", "f16"},
    {"model.norm", "mul", "f32", "f32"},
    {"lm_head", "linear", "f16", "f16"},                                      /* logits f16 */
    {"loss", "cross_entropy", "f16", "f32"},                                  /* log_softmax f16, nll f32 */
};

static const char *find_row(const char *report, const char *name) {
    const char *p = strstr(report, "\nprecision:");
    if (!p) return NULL;
    size_t n = strlen(name);
    for (p = strchr(p + 1, '\n'); p; p = strchr(p + 1, '\n')) {
        const char *s = p + 1;
        while (*s == ' ') s++;
        if (!strncmp(s, name, n) && s[n] == ' ') return s;
    }
    return NULL;
}

static CompileResult compile(const char *graph, const char *policy) {
    CompileOptions o = {0};
    o.front.graph_path = graph;
    o.front.policy_path = policy;
    return compile_graph(&o);
}

int main(void) {
    CompileResult r = compile("graphs/minimind.lua", NULL);
    char *report = compile_report(r.g, r.p, "generated/minimind");
    for (size_t i = 0; i < sizeof traced / sizeof traced[0]; i++) {
        const Row *t = &traced[i];
        const char *row = find_row(report, t->name);
        CHECK(row != NULL, "no row for %s in the precision table", t->name);
        if (!row) continue;
        char name[128], op[32], compute[8], storage[8];
        CHECK(sscanf(row, "%127s %31s %7s %7s", name, op, compute, storage) == 4, "unreadable row for %s", t->name);
        CHECK(!strcmp(op, t->op) && !strcmp(compute, t->compute) && !strcmp(storage, t->storage),
              "%s: report says %s compute %s storage %s; docs/precision.md §1.1 says %s compute %s storage %s", t->name, op,
              compute, storage, t->op, t->compute, t->storage);
    }
    CHECK(strstr(report, "parameters: 25,829,888 in 74 tensors") != NULL, "MiniMind2-small has 25,829,888 parameters");
    int weight_casts = 0, norm_casts = 0;
    for (int i = 0; i < r.g->n_nodes; i++) {
        const Node *n = r.g->nodes[i];
        if (n->op != OP_CAST || n->in[0]->op != OP_PARAM) continue;
        weight_casts++;
        norm_casts += strstr(n->in[0]->name, "norm") != NULL;
    }
    CHECK(weight_casts == 8 * 7 + 1, "%d weight casts, want 57 (7 linears a layer and the tied lm_head)", weight_casts);
    CHECK(norm_casts == 0, "norm weights are multiplied in f32 and never cast");
    free(report);

    const char *policies[] = {"amp_fp16", "fp32", "amp_bf16", "fp16_wide", "fp64"};
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        CompileResult m = compile("graphs/minimind.lua", policies[i]), t = compile("graphs/tiny.lua", policies[i]);
        CHECK(m.kernels && m.plan && t.kernels && t.plan, "policy %s did not compile", policies[i]);
        CHECK(strcmp(m.g->policy.name, policies[i]) == 0, "policy name %s", m.g->policy.name);
    }
    /* a rule keeping lm_head in fp32 changes the kernels */
    char *path = test_write_graph("lm_head_f32", "include \"../../../graphs/tiny.lua\"\n"
                                                 "rule { name = \"lm_head\", compute = \"f32\", priority = 10 }\n");
    CompileResult base = compile("graphs/tiny.lua", NULL), edited = compile(path, NULL);
    CHECK(strcmp(base.kernels, edited.kernels) != 0, "a rule on lm_head left kernels.cu unchanged");
    for (int i = 0; i < edited.g->n_nodes; i++) {
        const Node *n = edited.g->nodes[i];
        if (n->name && !strcmp(n->name, "lm_head"))
            CHECK(n->compute == DT_F32 && n->dtype == DT_F32, "lm_head: compute %s storage %s, want f32", dtype_name(n->compute),
                  dtype_name(n->dtype));
        if (n->op == OP_CROSS_ENTROPY) CHECK(n->compute == DT_F32, "the loss reads f32 logits: log-softmax in f32");
    }
    free(path);
    /* a bf16 plan on a GPU without bf16 tensor cores is refused, proposing what runs there */
    {
        Plan *bf = test_compile("graphs/tiny.lua", "amp_bf16", NULL, 1), *fp = test_compile("graphs/tiny.lua", "amp_fp16", NULL, 1);
        char *why = backend_bf16_refusal(bf, 75, "Tesla T4", "the plan");
        CHECK(why && strstr(why, "Tesla T4 (sm_75)") && strstr(why, "fp32") && strstr(why, "amp_fp16") && strstr(why, "amp_bf16"),
              "bf16 on sm_75: %s", why ? why : "(accepted)");
        CHECK(!backend_bf16_refusal(bf, 80, "A100", "the plan") && !backend_bf16_refusal(bf, -1, "", "the plan"),
              "bf16 refused on sm_80 or without a GPU");
        CHECK(!backend_bf16_refusal(fp, 75, "Tesla T4", "the plan"), "fp16 refused on sm_75");
        free(why);
    }
    return test_done("test_precision");
}
