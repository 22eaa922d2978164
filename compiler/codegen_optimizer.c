/* codegen_optimizer: the kernels with fixed roles: the step's weight casts and gradient
 * accumulations, and the update phase (grad_norm, adamw, step_finish), whose parameter
 * tables are written in as constants. */
#include <stdlib.h>

#include "codegen_internal.h"

static const char *master_ctype(const Gen *G) { return dtype_cuda(G->g->policy.master); }

/* A segment can go 8 elements a thread with 16-byte accesses: its length is a multiple of 8
 * and both ends are aligned for them. */
static int segment_wide(const Node *n) {
    int64_t in_bytes = (int64_t)dtype_size(n->in[0]->dtype), out_bytes = (int64_t)dtype_size(n->dtype);
    return shape_numel(&n->shape) % 8 == 0 && n->in[0]->offset % (8 * in_bytes) == 0 && n->offset % (8 * out_bytes) == 0 &&
           in_bytes >= 2 && out_bytes >= 2;
}

/* The kernels over a table of segments (segments.cu), one node each, reading its input and
 * writing its own value: the step's weight casts (dst = src) and the gradient accumulations
 * after the GEMMs (dst += src). Each segment has its own run of blocks, so that no block is
 * idle; consecutive segments with the same buffers, dtypes and width share a branch. */
void gen_segments(Gen *G, StrBuf *o) {
    Group *gr = G->gr;
    const int64_t per_block = tile_of(gr, "PER_BLOCK");
    int n = gr->n_nodes, add = gr->kind == GK_GRADS;
    StrBuf tables = {0}, body = {0};
    const char *k = gr->kernel;
    int64_t blocks = 0;
    sb_printf(&tables, "__constant__ long %s_src[%d] = {", k, n);
    for (int i = 0; i < n; i++) sb_printf(&tables, "%s%lldL", i ? ", " : "", (long long)gr->nodes[i]->in[0]->offset);
    sb_printf(&tables, "};\n__constant__ long %s_dst[%d] = {", k, n);
    for (int i = 0; i < n; i++) sb_printf(&tables, "%s%lldL", i ? ", " : "", (long long)gr->nodes[i]->offset);
    sb_printf(&tables, "};\n__constant__ long %s_len[%d] = {", k, n);
    for (int i = 0; i < n; i++) sb_printf(&tables, "%s%lldL", i ? ", " : "", (long long)shape_numel(&gr->nodes[i]->shape));
    sb_printf(&tables, "};\n__constant__ long %s_first[%d] = {", k, n + 1);
    for (int i = 0; i <= n; i++) {
        sb_printf(&tables, "%s%lldL", i ? ", " : "", (long long)blocks);
        if (i < n) blocks += (shape_numel(&gr->nodes[i]->shape) + per_block - 1) / per_block;
    }
    sb_append(&tables, "};");
    for (int i = 0; i < n;) {
        const Node *a = gr->nodes[i];
        int j = i + 1, wide = segment_wide(a);
        while (j < n && gr->nodes[j]->dtype == a->dtype && gr->nodes[j]->in[0]->dtype == a->in[0]->dtype &&
               gr->nodes[j]->in[0]->buffer == a->in[0]->buffer && gr->nodes[j]->buffer == a->buffer &&
               segment_wide(gr->nodes[j]) == wide)
            j++;
        const char *r = a->dtype == DT_F64 || a->in[0]->dtype == DT_F64 ? "double" : "float";
        const char *in = dtype_cuda(a->in[0]->dtype), *out = dtype_cuda(a->dtype);
        sb_printf(&body, "    if (seg >= %d && seg < %d) { // %s .. %s\n", i, j, node_label(gr->nodes[i]), node_label(gr->nodes[j - 1]));
        sb_printf(&body, "        const %s *src = (const %s *)(b.%s + %s_src[seg]);\n", in, in, buffer_name(a->in[0]->buffer), k);
        sb_printf(&body, "        %s *dst = (%s *)(b.%s + %s_dst[seg]);\n", out, out, buffer_name(a->buffer), k);
        if (wide) {
            sb_printf(&body, "        const long i = e0 + threadIdx.x * 8;\n");
            sb_printf(&body, "        if (i < %s_len[seg]) {\n            %s v[8];\n            ldv(src, i, v);\n", k, r);
            if (add)
                sb_printf(&body, "            %s d[8];\n            ldv(dst, i, d);\n"
                                 "            for (int k = 0; k < 8; k++) v[k] = mmc_add(d[k], v[k]);\n", r);
            sb_append(&body, "            stv(dst, i, v);\n        }\n    }\n");
        } else {
            sb_printf(&body, "        const long end = e0 + %lld < %s_len[seg] ? e0 + %lld : %s_len[seg];\n", (long long)per_block, k,
                      (long long)per_block, k);
            sb_append(&body, "        for (long i = e0 + threadIdx.x; i < end; i += blockDim.x)\n");
            if (add) sb_printf(&body, "            st(dst, i, mmc_add((%s)ld(dst, i), (%s)ld(src, i)));\n    }\n", r, r);
            else sb_append(&body, "            st(dst, i, ld(src, i));\n    }\n");
        }
        i = j;
    }
    Keys ks = {0};
    key(&ks, "NAME", "%s", k);
    key(&ks, "WHAT", "%s", add ? "Adds each gradient a GEMM made to its parameter's gradient (dst += src)"
                               : "Casts each weight to its working dtype once per step (autocast's cast cache)");
    launch_keys(gr, &ks);
    key(&ks, "N", "%d", n);
    key(&ks, "TABLES", "%s", tables.s);
    key(&ks, "BODY", "%s", body.s);
    render(o, gr->tmpl, &ks);
    sb_free(&tables);
    sb_free(&body);
}

void gen_optimizer(Gen *G, StrBuf *o) {
    Group *gr = G->gr;
    const Graph *g = G->g;
    const TrainConfig *t = &g->train;
    Keys ks = {0};
    key(&ks, "NAME", "%s", gr->kernel);
    launch_keys(gr, &ks);
    int scaling = t->loss_scaling;
    switch (gr->optimizer) {
    case OPT_GRAD_NORM: {
        StrBuf tables = {0};
        const char *k = gr->kernel;
        sb_printf(&tables, "__constant__ long %s_start[%d] = {", k, g->n_params);
        for (int i = 0; i < g->n_params; i++) sb_printf(&tables, "%s%lldL", i ? ", " : "", (long long)g->params[i].offset);
        sb_printf(&tables, "};\n__constant__ long %s_len[%d] = {", k, g->n_params);
        for (int i = 0; i < g->n_params; i++)
            sb_printf(&tables, "%s%lldL", i ? ", " : "", (long long)shape_numel(&g->params[i].node->shape));
        sb_printf(&tables, "};\n__constant__ int %s_chunk0[%d] = {", k, g->n_params + 1);
        int chunk = 0;
        for (int i = 0; i <= g->n_params; i++) {
            sb_printf(&tables, "%s%d", i ? ", " : "", chunk);
            if (i < g->n_params)
                chunk += (int)((shape_numel(&g->params[i].node->shape) + G->p->grad_chunk - 1) / G->p->grad_chunk);
        }
        sb_append(&tables, "};");
        key(&ks, "TABLES", "%s", tables.s);
        key(&ks, "P", "%s", k);
        key(&ks, "CHUNK", "%lld", (long long)G->p->grad_chunk);
        key(&ks, "NCHUNKS", "%d", G->p->n_chunks);
        key(&ks, "NPARAMS", "%d", g->n_params);
        key(&ks, "M", "%s", master_ctype(G));
        key(&ks, "SCALING", "%d", scaling);
        key(&ks, "CLIP", "%.17g", t->clip);
        key(&ks, "ACCUM", "%d", t->accumulation);
        key(&ks, "COSINE", "%d", t->schedule == SCHED_MINIMIND_COSINE);
        key(&ks, "WARMUP", "%d", t->warmup);
        key(&ks, "LR", "%.17g", t->lr);
        render(o, gr->tmpl, &ks);
        sb_free(&tables);
        break;
    }
    case OPT_ADAMW: {
        int64_t n = G->p->buffer_bytes[BUF_PARAMS] / (int64_t)dtype_size(g->policy.master);
        key(&ks, "M", "%s", master_ctype(G));
        key(&ks, "N", "%lld", (long long)n);
        key(&ks, "SCALING", "%d", scaling);
        key(&ks, "WD", "%.17g", t->weight_decay);
        key(&ks, "BETA1", "%.17g", t->beta1);
        key(&ks, "BETA2", "%.17g", t->beta2);
        key(&ks, "EPS", "%.17g", t->eps);
        render(o, gr->tmpl, &ks);
        break;
    }
    case OPT_STEP_FINISH:
        key(&ks, "SCALING", "%d", scaling);
        key(&ks, "BACKOFF", "%.17g", t->scale_backoff);
        key(&ks, "GROWTH", "%.17g", t->scale_growth);
        key(&ks, "INTERVAL", "%d", t->scale_interval);
        key(&ks, "MAX", "%.17g", t->scale_max);
        key(&ks, "MIN", "%.17g", t->scale_min);
        key(&ks, "HYSTERESIS", "%d", t->scale_hysteresis);
        key(&ks, "FIXED", "%d", t->scale_fixed);
        key(&ks, "ACCUM", "%d", t->accumulation);
        render(o, gr->tmpl, &ks);
        break;
    case OPT_COUNT: die("internal error: kernel %s has no optimizer kernel", gr->kernel);
    }
}
