/* find_overflow: see find_overflow.h. */
#include "find_overflow.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "train.h"
#include "util.h"

/* the node's value as the backend stored it holds an inf or a nan */
static int stored_not_finite(Backend *b, const Node *n) {
    if (!n->materialized || n->buffer < 0 || !dtype_is_float(n->dtype)) return 0;
    int64_t bytes = node_extent_bytes(n), numel = shape_numel(&n->shape);
    unsigned char *v = xmalloc((size_t)bytes + 1);
    b->read(b, n->buffer, n->offset, v, bytes);
    int bad = 0;
    for (int64_t i = 0; i < numel && !bad; i++) bad = !isfinite(dtype_load(n->dtype, v, (size_t)node_mem_index(n, i)));
    free(v);
    return bad;
}

static void copy_bytes(Backend *from, Backend *to, int buffer, int64_t offset, int64_t bytes) {
    if (bytes <= 0) return;
    unsigned char *v = xmalloc((size_t)bytes);
    from->read(from, buffer, offset, v, bytes);
    to->write(to, buffer, offset, v, bytes);
    free(v);
}

/* ---- op by op inside the kernel, on the ref backend */

typedef struct Watch {
    OverflowReport *r;
} Watch;

static double max_abs(const double *v, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) return NAN;
        if (fabs(v[i]) > m) m = fabs(v[i]);
    }
    return m;
}

static void on_value(void *ctx, const Node *n, const double *value, double *const *inputs) {
    OverflowReport *r = ((Watch *)ctx)->r;
    if (r->node || !dtype_is_float(n->dtype)) return;
    int64_t numel = shape_numel(&n->shape);
    int bad = 0;
    for (int64_t i = 0; i < numel && !bad; i++) bad = !isfinite(value[i]);
    if (!bad) return;
    r->node = n;
    r->n_in = 0;
    for (int k = 0; k < n->n_in && k < IR_MAX_INPUTS; k++) {
        const Node *x = n->in[k];
        if (!dtype_is_float(x->dtype) || !inputs[k]) continue;
        OverflowInput *in = &r->in[r->n_in++];
        snprintf(in->name, sizeof in->name, "%s", node_label(x));
        in->dtype = dtype_name(x->dtype);
        in->max_abs = max_abs(inputs[k], shape_numel(&x->shape));
    }
}

/* the input group gi writes its result over (pass_memplan), or NULL */
static const Node *written_over(const Plan *pl, int gi) {
    const Group *gr = pl->p->groups[gi];
    const Node *w = group_overwriter(gr), *x = w ? node_overwritable_input(w) : NULL;
    if (!x || !x->materialized || x->buffer != BUF_ARENA || x->group == gi) return NULL;
    for (int i = 0; i < gr->n_nodes; i++) {
        const Node *n = gr->nodes[i];
        if (n->materialized && n->buffer == BUF_ARENA && n->offset == x->offset) return x;
    }
    return NULL;
}

/* group gi again on a ref backend, from the inputs `b` holds (and the bytes of the input it
 * wrote over, `saved`, as they were before it ran): the first op whose value is not finite
 * (the kernel may hold several, of which the backend stores only some) */
static void inside_kernel(Backend *b, int gi, const void *saved, OverflowReport *r) {
    Plan *pl = b->pl;
    Backend *ref = ref_backend_create(pl); /* untouched pages of its buffers cost nothing */
    static const int whole[] = {BUF_IO, BUF_PARAMS, BUF_WEIGHTS, BUF_GRADS, BUF_CONSTS, BUF_STATE, BUF_SCRATCH};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        copy_bytes(b, ref, whole[i], 0, pl->p->buffer_bytes[whole[i]]);
    const Group *gr = pl->p->groups[gi];
    for (int i = 0; i < gr->n_nodes; i++)
        for (int k = 0; k < gr->nodes[i]->n_in; k++) {
            const Node *x = gr->nodes[i]->in[k];
            if (x->group != gi && x->materialized && x->buffer == BUF_ARENA) copy_bytes(b, ref, BUF_ARENA, x->offset, node_extent_bytes(x));
        }
    const Node *over = written_over(pl, gi);
    if (over && saved) ref->write(ref, BUF_ARENA, over->offset, saved, node_extent_bytes(over));
    Watch w = {r};
    ref_backend_watch(ref, on_value, &w);
    ref->run_group(ref, gi);
    ref->destroy(ref);
}

/* ---- the re-run */

OverflowReport find_overflow(Backend *b, const MmcStepState *before, int32_t *const *ids, int32_t *const *labels,
                             size_t batch_bytes) {
    Plan *pl = b->pl;
    OverflowReport r = {0};
    const Node *ids_leaf = train_role(pl, ROLE_TOKENS), *labels_leaf = train_role(pl, ROLE_TARGETS);
    MmcStepState after, start = *before;
    b->read(b, BUF_STATE, 0, &after, sizeof after);
    start.found_inf = 0;
    b->write(b, BUF_STATE, 0, &start, sizeof start);
    int bad_group = -1;
    void *saved = NULL; /* the input the last kernel that writes over one wrote over, as it was */
    for (int a = 0; a < pl->g->train.accumulation && bad_group < 0; a++) {
        b->write(b, BUF_IO, ids_leaf->offset, ids[a], (int64_t)batch_bytes);
        b->write(b, BUF_IO, labels_leaf->offset, labels[a], (int64_t)batch_bytes);
        for (int i = 0; i < pl->p->n_groups && bad_group < 0; i++) {
            const Group *gr = pl->p->groups[i];
            if (gr->phase != PHASE_MICRO) continue;
            const Node *over = written_over(pl, i);
            if (over) { /* kept for the re-run on the ref, should this kernel be the one */
                free(saved);
                saved = xmalloc((size_t)node_extent_bytes(over) + 1);
                b->read(b, BUF_ARENA, over->offset, saved, node_extent_bytes(over));
            }
            b->run_group(b, i);
            for (int k = 0; k < gr->n_nodes && !r.stored; k++)
                if ((gr->nodes[k] != gr->anchor || gemm_product_kept(pl->g, gr)) && stored_not_finite(b, gr->nodes[k]))
                    r.stored = gr->nodes[k];
            if (r.stored) bad_group = i, r.micro = a;
        }
    }
    if (bad_group >= 0) {
        r.found = 1;
        r.kernel = pl->p->groups[bad_group]->kernel;
        inside_kernel(b, bad_group, written_over(pl, bad_group) ? saved : NULL, &r);
        if (!r.node) r.node = r.stored; /* the ref's arithmetic stayed finite: the stored value is what is known */
    }
    free(saved);
    /* as after the update: its step state, and no gradient (the update was skipped) */
    int64_t gbytes = pl->p->buffer_bytes[BUF_GRADS];
    void *zeros = xcalloc((size_t)gbytes + 1, 1);
    b->write(b, BUF_GRADS, 0, zeros, gbytes);
    free(zeros);
    b->write(b, BUF_STATE, 0, &after, sizeof after);
    return r;
}

char *overflow_text(const OverflowReport *r, int64_t update) {
    StrBuf o = {0};
    sb_printf(&o, "mmc train: update %lld overflowed; its micro-steps ran again with a check after every kernel:\n",
              (long long)update);
    if (!r->found) {
        sb_append(&o, "  every value stayed finite this time (the overflow did not repeat)\n");
        return o.s;
    }
    const Node *n = r->node;
    sb_printf(&o, "  the first op whose value is not finite: %s (%s, %s) at %s, in kernel %s (micro-step %d)\n", node_label(n),
              op_info[n->op].name, dtype_name(n->dtype), n->where && *n->where ? n->where : "(no line)", r->kernel, r->micro + 1);
    if (r->stored && r->stored != n) sb_printf(&o, "  the kernel stores %s, which is not finite either\n", node_label(r->stored));
    for (int k = 0; k < r->n_in; k++)
        sb_printf(&o, "  it read %s (%s), max |x| %.4g\n", r->in[k].name, r->in[k].dtype, r->in[k].max_abs);
    return o.s;
}

/* s as a JSON string */
static void json_str(StrBuf *o, const char *s) {
    sb_append(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') sb_printf(o, "\\%c", c);
        else if (c < 0x20) sb_printf(o, "\\u%04x", c);
        else sb_appendn(o, s, 1);
    }
    sb_append(o, "\"");
}

char *overflow_json(const OverflowReport *r, int64_t update) {
    StrBuf o = {0};
    sb_printf(&o, "{\"update\": %lld, \"found\": %s", (long long)update, r->found ? "true" : "false");
    if (r->found) {
        const Node *n = r->node;
        sb_append(&o, ", \"node\": ");
        json_str(&o, node_label(n));
        sb_printf(&o, ", \"op\": \"%s\", \"dtype\": \"%s\", \"where\": ", op_info[n->op].name, dtype_name(n->dtype));
        json_str(&o, n->where ? n->where : "");
        sb_printf(&o, ", \"kernel\": \"%s\", \"micro\": %d, \"inputs\": [", r->kernel, r->micro);
        for (int k = 0; k < r->n_in; k++) {
            char v[32];
            if (isfinite(r->in[k].max_abs)) snprintf(v, sizeof v, "%.9g", r->in[k].max_abs);
            else snprintf(v, sizeof v, "\"%s\"", isnan(r->in[k].max_abs) ? "nan" : "inf");
            sb_append(&o, k ? ", {\"name\": " : "{\"name\": ");
            json_str(&o, r->in[k].name);
            sb_printf(&o, ", \"dtype\": \"%s\", \"max_abs\": %s}", r->in[k].dtype, v);
        }
        sb_append(&o, "]");
    }
    sb_append(&o, "}\n");
    return o.s;
}
