/* codegen_optimizer: the kernels with fixed roles: the step's weight casts, and the update
 * phase (grad_norm, adamw, step_finish), whose parameter tables are written in as
 * constants. */
#include <stdlib.h>
#include <string.h>

#include "codegen_internal.h"

static const char *master_ctype(const Gen *G) { return dtype_cuda(G->g->policy.master); }

/* One segment per weight cast; segments with the same source buffer and dtypes share a loop. */
void gen_cast_weights(Gen *G, StrBuf *o) {
    Group *gr = G->gr;
    int n = gr->n_nodes;
    StrBuf tables = {0}, body = {0};
    const char *k = gr->kernel;
    int64_t longest = 1;
    sb_printf(&tables, "__constant__ long %s_src[%d] = {", k, n);
    for (int i = 0; i < n; i++) sb_printf(&tables, "%s%lldL", i ? ", " : "", (long long)gr->nodes[i]->in[0]->offset);
    sb_printf(&tables, "};\n__constant__ long %s_dst[%d] = {", k, n);
    for (int i = 0; i < n; i++) sb_printf(&tables, "%s%lldL", i ? ", " : "", (long long)gr->nodes[i]->offset);
    sb_printf(&tables, "};\n__constant__ long %s_len[%d] = {", k, n);
    for (int i = 0; i < n; i++) {
        int64_t len = shape_numel(&gr->nodes[i]->shape);
        if (len > longest) longest = len;
        sb_printf(&tables, "%s%lldL", i ? ", " : "", (long long)len);
    }
    sb_append(&tables, "};");
    for (int i = 0; i < n;) {
        const Node *a = gr->nodes[i];
        int j = i + 1;
        while (j < n && gr->nodes[j]->dtype == a->dtype && gr->nodes[j]->in[0]->dtype == a->in[0]->dtype &&
               gr->nodes[j]->in[0]->buffer == a->in[0]->buffer)
            j++;
        sb_printf(&body, "    if (seg >= %d && seg < %d) { // %s .. %s\n", i, j, node_label(gr->nodes[i]), node_label(gr->nodes[j - 1]));
        sb_printf(&body, "        const %s *src = (const %s *)(b.%s + %s_src[seg]);\n", dtype_cuda(a->in[0]->dtype),
                  dtype_cuda(a->in[0]->dtype), buffer_name(a->in[0]->buffer), k);
        sb_printf(&body, "        %s *dst = (%s *)(b.weights + %s_dst[seg]);\n", dtype_cuda(a->dtype), dtype_cuda(a->dtype), k);
        sb_printf(&body, "        for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < %s_len[seg]; i += (long)gridDim.x * blockDim.x)\n", k);
        sb_append(&body, "            st(dst, i, ld(src, i));\n    }\n");
        i = j;
    }
    Keys ks = {0};
    key(&ks, "NAME", "%s", k);
    key(&ks, "TABLES", "%s", tables.s);
    key(&ks, "BODY", "%s", body.s);
    render(o, "cast_weights.cu", &ks);
    gr->block = 256;
    gr->grid = blocks_for(longest, 256 * 4);
    gr->grid_y = n; /* one row of blocks per segment */
    sb_free(&tables);
    sb_free(&body);
}

void gen_optimizer(Gen *G, StrBuf *o) {
    Group *gr = G->gr;
    const Graph *g = G->g;
    const TrainConfig *t = &g->train;
    Keys ks = {0};
    key(&ks, "NAME", "%s", gr->kernel);
    int scaling = t->loss_scaling;
    if (strcmp(gr->optimizer, "grad_norm") == 0) {
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
        key(&ks, "COSINE", "%d", strcmp(t->schedule, "minimind_cosine") == 0);
        key(&ks, "LR", "%.17g", t->lr);
        render(o, "grad_norm.cu", &ks);
        gr->grid = G->p->n_chunks, gr->block = 256;
        sb_free(&tables);
    } else if (strcmp(gr->optimizer, "adamw") == 0) {
        int64_t n = G->p->buffer_bytes[BUF_PARAMS] / (int64_t)dtype_size(g->policy.master);
        key(&ks, "M", "%s", master_ctype(G));
        key(&ks, "N", "%lld", (long long)n);
        key(&ks, "SCALING", "%d", scaling);
        key(&ks, "WD", "%.17g", t->weight_decay);
        key(&ks, "BETA1", "%.17g", t->beta1);
        key(&ks, "BETA2", "%.17g", t->beta2);
        key(&ks, "EPS", "%.17g", t->eps);
        render(o, "adamw.cu", &ks);
        gr->grid = blocks_for(n, 256 * 8), gr->block = 256;
    } else {
        key(&ks, "SCALING", "%d", scaling);
        key(&ks, "BACKOFF", "%.17g", t->scale_backoff);
        key(&ks, "GROWTH", "%.17g", t->scale_growth);
        key(&ks, "INTERVAL", "%d", t->scale_interval);
        key(&ks, "ACCUM", "%d", t->accumulation);
        render(o, "step_finish.cu", &ks);
        gr->grid = 1, gr->block = 1;
    }
}
