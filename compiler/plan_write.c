/* plan_write: the plan as text (see plan.h), sealed with the SHA-256 of its own bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "plan.h"
#include "util.h"

char *plan_hash(const Graph *g, const char *options) {
    Sha256 h;
    sha256_init(&h);
    char fmt[32];
    snprintf(fmt, sizeof fmt, "mmc-plan %d", MMC_PLAN_FORMAT);
    sha256_update(&h, fmt, strlen(fmt) + 1);
    sha256_update(&h, g->hash, strlen(g->hash) + 1);
    sha256_update(&h, options, strlen(options) + 1);
    codegen_hash_templates(&h);
    char hex[65];
    sha256_hex(&h, hex);
    return xstrdup(hex);
}

static void sha256_text(const char *text, size_t len, char hex[65]) {
    Sha256 h;
    sha256_init(&h);
    sha256_update(&h, text, len);
    sha256_hex(&h, hex);
}

/* the length of text[0, n) without its last line if that line is `word` (whole) or starts
 * with it */
static size_t without_last_line(const char *text, size_t n, const char *word, int whole) {
    size_t end = n && text[n - 1] == '\n' ? n - 1 : n, begin = end, len = strlen(word);
    while (begin && text[begin - 1] != '\n') begin--;
    if (end - begin < len || strncmp(text + begin, word, len) || (whole && end - begin != len)) return n;
    return begin;
}

char *plan_seal(const char *text) {
    size_t n = without_last_line(text, strlen(text), "end", 1);
    n = without_last_line(text, n, "content sha256=", 0);
    StrBuf o = {0};
    sb_append(&o, "");
    sb_appendn(&o, text, n);
    if (n && text[n - 1] != '\n') sb_append(&o, "\n");
    char hex[65];
    sha256_text(o.s, o.len, hex);
    sb_printf(&o, "content sha256=%s\nend\n", hex);
    return o.s;
}

static void dims(StrBuf *o, const Shape *s) {
    sb_append(o, " shape=");
    if (s->rank == 0) sb_append(o, "scalar");
    for (int i = 0; i < s->rank; i++) sb_printf(o, "%s%lld", i ? "," : "", (long long)s->dim[i]);
}

static void node_line(StrBuf *o, const char *word, const Node *n) {
    sb_printf(o, "%s %%%d %s", word, n->id, op_info[n->op].name);
    if (n->n_in) {
        sb_append(o, " in=");
        for (int k = 0; k < n->n_in; k++) sb_printf(o, "%s%%%d", k ? "," : "", n->in[k]->id);
    }
    dims(o, &n->shape);
    sb_printf(o, " dtype=%s", dtype_name(n->dtype));
    if (n->compute != DT_NONE && n->compute != n->dtype) sb_printf(o, " compute=%s", dtype_name(n->compute));
    ir_attrs(o, n);
    if (n->ld) sb_printf(o, " ld=%lld", (long long)n->ld);
    if (n->materialized && n->buffer >= 0) sb_printf(o, " at=%s+%lld", buffer_name(n->buffer), (long long)n->offset);
    if (n->backward) sb_append(o, " bwd=1");
    if (n->where && *n->where) { /* the graph file's line that made it: "graphs/minimind.lua:42" */
        size_t len = strcspn(n->where, " ");
        sb_append(o, " src=");
        sb_appendn(o, n->where, len);
    }
    if (n->name) sb_printf(o, " name=%s", n->name);
    sb_append(o, "\n");
}

/* what the graph file declares for the runtime (model.h): the `model` line always, so that a
 * plan without one is known to be older than the runtime; a config.json's line where the
 * graph declares its fields */
static void model_lines(StrBuf *o, const Graph *g) {
    sb_append(o, "model");
    for (int k = 0; k < MF_COUNT; k++)
        if (model_has(&g->model, (ModelField)k))
            sb_printf(o, " %s=%lld", model_field_names[k], (long long)g->model.value[k]);
    for (int r = 0; r < ROLE_COUNT; r++)
        if (g->role[r]) sb_printf(o, " %s=%%%d", role_names[r], g->role[r]->id);
    sb_append(o, "\n");
    for (int j = 0; j < JF_COUNT; j++) {
        if (!g->json[j].where) continue;
        sb_append(o, json_file_names[j]);
        for (int i = 0; i < g->json[j].n; i++) sb_printf(o, " %s=%s", g->json[j].f[i].key, g->json[j].f[i].json);
        sb_append(o, "\n");
    }
}

/* the view lines whose inputs are all written, after the leaves and after each kernel: a
 * plan names each node before any line reads it */
static void view_lines(StrBuf *o, Node *const *views, int n_views, char *written) {
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; i < n_views; i++) {
            const Node *n = views[i];
            if (written[n->id]) continue;
            int ready = 1;
            for (int k = 0; k < n->n_in; k++) ready &= written[n->in[k]->id];
            if (!ready) continue;
            node_line(o, "view", n);
            written[n->id] = 1;
            again = 1;
        }
    }
}

char *plan_write(const Graph *g, const Program *p, const char *kernels) {
    StrBuf o = {0};
    const Policy *pol = &g->policy;
    const TrainConfig *t = &g->train;
    sb_printf(&o, "mmc-plan %d\n", MMC_PLAN_FORMAT);
    sb_printf(&o, "graph %s\nsource %s\nhash %s\n", g->name, g->source, g->hash);
    char hex[65];
    sha256_text(kernels, strlen(kernels), hex);
    sb_printf(&o, "kernels sha256=%s\n", hex); /* the kernels.cu written beside it */
    sb_printf(&o, "policy name=%s rounding=%s master=%s source=%s\n", pol->name, pol->round_eager ? "eager" : "fused",
              dtype_name(pol->master), pol->source ? pol->source : "-");
    char d[32];
    sb_append(&o, "config");
    for (int i = 0; i < g->n_config; i++) {
        const ConfigEntry *e = &g->config[i];
        sb_printf(&o, " %s=%s", e->key, e->text ? e->text : fmt_double(d, e->value));
    }
    sb_append(&o, "\ntrain");
    train_settings_print(&o, t);
    sb_append(&o, "\n");
    model_lines(&o, g);
    sb_printf(&o, "grad_norm chunk=%lld chunks=%d\n", (long long)p->grad_chunk, p->n_chunks);
    for (int b = 0; b < BUF_COUNT; b++) sb_printf(&o, "buffer %s %lld\n", buffer_name(b), (long long)p->buffer_bytes[b]);
    for (int i = 0; i < g->n_params; i++) {
        const Param *pa = &g->params[i];
        sb_printf(&o, "param %d %s", i, pa->node->name);
        dims(&o, &pa->node->shape);
        sb_printf(&o, " offset=%lld node=%%%d", (long long)pa->offset, pa->node->id);
        if (pa->alias) sb_printf(&o, " alias=%s", pa->alias);
        sb_append(&o, "\n");
    }
    char *written = xcalloc((size_t)g->next_id, 1);
    Node **views = NULL;
    int n_views = 0, cap_views = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (node_is_view(g->nodes[i])) vec_push(views, n_views, cap_views, g->nodes[i]);
    for (int i = 0; i < g->n_nodes; i++)
        if (op_info[g->nodes[i]->op].kind == OK_LEAF) node_line(&o, "leaf", g->nodes[i]), written[g->nodes[i]->id] = 1;
    view_lines(&o, views, n_views, written);
    for (int i = 0; i < p->n_groups; i++) {
        const Group *gr = p->groups[i];
        const char *kind = gr->kind == GK_GEMM ? "gemm" : "kernel";
        sb_printf(&o, "%s %s kind=%s phase=%s grid=%lld grid_y=%lld block=%lld smem=%lld", kind, gr->kernel,
                  group_kind_name(gr->kind), phase_name(gr->phase), (long long)gr->grid, (long long)gr->grid_y, (long long)gr->block, (long long)gr->smem);
        if (gr->stream) sb_printf(&o, " stream=%d", gr->stream); /* absent: the main stream */
        if (gr->kind == GK_OPTIMIZER) sb_printf(&o, " optimizer=%s", optimizer_kernel_name(gr->optimizer));
        if (gr->kind == GK_GEMM) {
            GemmShape s = gemm_shape(gr->anchor);
            sb_printf(&o, " m=%lld n=%lld k=%lld layout=%c%c", (long long)s.m, (long long)s.n, (long long)s.k,
                      s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N');
        }
        if (gr->anchor) sb_printf(&o, " anchor=%%%d", gr->anchor->id);
        sb_append(&o, "\n");
        for (int k = 0; k < gr->n_nodes; k++) {
            node_line(&o, "op", gr->nodes[k]), written[gr->nodes[k]->id] = 1;
            /* an epilogue reads views of the product (its column halves) */
            if (gr->kind == GK_GEMM && k == 0 && gr->n_nodes > 1) view_lines(&o, views, n_views, written);
        }
        view_lines(&o, views, n_views, written);
    }
    free(written);
    free(views);
    sb_printf(&o, "loss %%%d\n", g->loss->id);
    char *sealed = plan_seal(o.s);
    sb_free(&o);
    return sealed;
}
