/* codegen: see codegen.h. A group's nodes become straight-line code over register values
 * v<id>; values from other groups are loaded with ld(p<id>, index), with the index reduced
 * for broadcast inputs; stored values go out with st(p<id>, index, v<id>). */
#include "codegen_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"

const char *template_text(const char *name) {
    char *path = xasprintf("templates/%s", name);
    for (int i = 0; embedded_files[i].path; i++)
        if (strcmp(embedded_files[i].path, path) == 0) {
            free(path);
            return embedded_files[i].text;
        }
    die("internal error: no template %s", path);
}

void codegen_hash_templates(Sha256 *h) {
    for (int i = 0; embedded_files[i].path; i++)
        if (strncmp(embedded_files[i].path, "templates/", 10) == 0) {
            sha256_update(h, embedded_files[i].path, strlen(embedded_files[i].path) + 1);
            sha256_update(h, embedded_files[i].text, strlen(embedded_files[i].text) + 1);
        }
}

/* ---- template filling: {{KEY}} holes */

void key(Keys *ks, const char *k, const char *fmt, ...) {
    if (ks->n == (int)(sizeof ks->k / sizeof ks->k[0])) die("internal error: more than %d template keys", ks->n);
    StrBuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    ks->optional[ks->n] = 0;
    ks->k[ks->n] = k;
    ks->v[ks->n++] = b.s ? b.s : xstrdup("");
}

void key_optional(Keys *ks, const char *k, const char *v) {
    key(ks, k, "%s", v);
    ks->optional[ks->n - 1] = 1;
}

void render(StrBuf *o, const char *tmpl_name, Keys *ks) {
    const char *t = template_text(tmpl_name);
    unsigned char used[sizeof ks->k / sizeof ks->k[0]] = {0};
    while (*t) {
        const char *open = strstr(t, "{{");
        if (!open) {
            sb_append(o, t);
            break;
        }
        sb_appendn(o, t, (size_t)(open - t));
        const char *close = strstr(open, "}}");
        if (!close) die("template %s: unclosed {{", tmpl_name);
        int found = 0;
        for (int i = 0; i < ks->n; i++)
            if (strlen(ks->k[i]) == (size_t)(close - open - 2) && strncmp(ks->k[i], open + 2, (size_t)(close - open - 2)) == 0) {
                sb_append(o, ks->v[i]);
                found = used[i] = 1;
                break;
            }
        if (!found) die("template %s: no value for {{%.*s}}", tmpl_name, (int)(close - open - 2), open + 2);
        t = close + 2;
    }
    /* a value the template never asks for is a codegen/template mismatch, as a missing one is */
    for (int i = 0; i < ks->n; i++)
        if (!used[i] && !ks->optional[i]) die("template %s: {{%s}} is given but the template has no hole for it", tmpl_name, ks->k[i]);
    for (int i = 0; i < ks->n; i++) free(ks->v[i]);
    ks->n = 0;
}

/* ---- values */

char *literal(const Gen *G, double v) {
    char buf[64];
    snprintf(buf, sizeof buf, G->reg_f64 ? "%.17g" : "%.9g", v);
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
    if (!G->reg_f64 && !strpbrk(buf, "n")) strcat(buf, "f");
    if (strcmp(buf, "inf") == 0 || strcmp(buf, "inff") == 0) return xstrdup("INFINITY");
    return xstrdup(buf);
}

const char *rounder(const Gen *G, DType t) {
    if (!G->eager) return "";
    switch (t) {
    case DT_F16: return "rd_f16";
    case DT_BF16: return "rd_bf16";
    case DT_F32: return G->reg_f64 ? "rd_f32" : "";
    default: return "";
    }
}

/* The pointer to where a node's value lives, declared once per kernel. */
const char *ptr(Gen *G, const Node *n) {
    static char name[4][32];
    static int next;
    char *s = name[next++ & 3];
    snprintf(s, sizeof name[0], "p%d", n->id);
    if (G->declared[n->id]) return s;
    if (n->buffer < 0) die("internal error: %s is read from memory but has no buffer", node_label(n));
    G->declared[n->id] = 1;
    char *sh = shape_str(&n->shape);
    const char *t = dtype_cuda(n->dtype);
    if (n->ld) /* rows further apart than the last dim: the prelude's Strided view */
        sb_printf(&G->ptrs, "    const Strided<%s, %lldL, %lldL> %s = {(%s *)(b.%s + %lldL)}; // %s %s %s, rows %lld apart\n", t,
                  (long long)n->shape.dim[n->shape.rank - 1], (long long)n->ld, s, t, buffer_name(n->buffer),
                  (long long)n->offset, node_label(n), sh, dtype_name(n->dtype), (long long)n->ld);
    else
        sb_printf(&G->ptrs, "    %s *%s = (%s *)(b.%s + %lldL); // %s %s %s\n", t, s, t, buffer_name(n->buffer),
                  (long long)n->offset, node_label(n), sh, dtype_name(n->dtype));
    free(sh);
    return s;
}

/* the plain pointer to a node's first element, for templates that walk rows themselves and
 * are given the row stride (node_row_stride) */
const char *ptr_raw(Gen *G, const Node *n) {
    const char *p = ptr(G, n);
    if (!n->ld) return p;
    static char name[4][40];
    static int next;
    char *s = name[next++ & 3];
    snprintf(s, sizeof name[0], "%s.p", p);
    return s;
}

/* index of input x when the kernel iterates over `space` with index variable i */
char *index_for(const Node *x, const Shape *space) {
    int64_t nx = shape_numel(&x->shape), ns = shape_numel(space);
    if (nx == ns) return xstrdup("i");
    if (nx == 1) return xstrdup("0");
    return xasprintf("i %% %lldL", (long long)nx);
}

/* ---- wide mode (codegen_internal.h) */

static int wide_dtype(DType t) { return t == DT_F16 || t == DT_BF16 || t == DT_F32 || t == DT_F64; }

int wide_operand(const Node *x) {
    int64_t m = shape_numel(&x->shape);
    if (x->ld) /* a strided view: eight elements must stay in a row and in 16-byte alignment */
        return wide_dtype(x->dtype) && x->shape.dim[x->shape.rank - 1] % 8 == 0 && x->ld % 8 == 0 &&
               x->offset % (8 * (int64_t)dtype_size(x->dtype)) == 0;
    return wide_dtype(x->dtype) && (m == 1 || m % 8 == 0);
}

int wide_ok(const Gen *G, Node *const *nodes, int n, const Shape *space) {
    if (shape_numel(space) % 8) return 0;
    for (int i = 0; i < n; i++) {
        const Node *x = nodes[i];
        if (x->op == OP_PART) continue;
        if (x->materialized && x->buffer >= 0 && (!wide_dtype(x->dtype) || (x->ld && !wide_operand(x)))) return 0;
        for (int k = 0; k < x->n_in; k++) {
            const Node *in = x->in[k];
            if (in->group == G->gr->id) continue; /* computed in this kernel: a register */
            if (op_info[x->op].row_in >> k & 1) { /* one value for the 8, if they share a row */
                if (space->dim[space->rank - 1] % 8) return 0;
            } else if (!wide_operand(in)) return 0;
        }
    }
    return 1;
}

void wide_begin(Gen *G, const char *ind) {
    G->wide = 1;
    G->wind = ind;
    sb_free(&G->wloads);
    sb_free(&G->wstores);
    sb_free(&G->wdecls);
    memset(G->wloaded, 0, (size_t)G->g->next_id);
    memset(G->wstored, 0, (size_t)G->g->next_id);
}

void wide_end(Gen *G, char **loads, char **stores) {
    G->wide = 0;
    *loads = G->wloads.s ? G->wloads.s : xstrdup("");
    *stores = G->wstores.s ? G->wstores.s : xstrdup("");
    G->wloads = (StrBuf){0};
    G->wstores = (StrBuf){0};
}

char *wide_take_stores(Gen *G) {
    char *s = G->wstores.s ? G->wstores.s : xstrdup("");
    G->wstores = (StrBuf){0};
    return s;
}

/* x's eight values of this step: one wide load, at the index i0 (or i0 % n) of the first */
static char *wide_load(Gen *G, const Node *x, const char *idx) {
    const char *run = G->runs ? "[c]" : "";
    if (G->regs) {
        if (!G->wloaded[x->id]) {
            G->wloaded[x->id] = 1;
            /* Regs keep the loaded bytes; store() converts them (sdecls) */
            const char *T = dtype_cuda(x->dtype);
            if (!strcmp(idx, "0")) die("internal error: %s: a broadcast operand in a GEMM epilogue", node_label(x));
            sb_printf(&G->wdecls, "        MmcRaw<%s> L%d;\n", T, x->id);
            sb_printf(&G->wloads, "%sldraw(%s, i0%s, r.L%d);\n", G->wind, ptr(G, x), idx + 1, x->id);
            sb_printf(&G->sdecls, "        %s L%d[8];\n        ldv((const %s *)r.L%d.w, 0, L%d);\n", G->R, x->id, T, x->id, x->id);
        }
        return xasprintf("L%d[k]", x->id);
    }
    if (!G->wloaded[x->id]) {
        G->wloaded[x->id] = 1;
        const char *p = ptr(G, x);
        if (G->runs) sb_printf(&G->wdecls, "    %s L%d[%d][8];\n", G->R, x->id, G->runs);
        else sb_printf(&G->wloads, "%s%s L%d[8];\n", G->wind, G->R, x->id);
        if (!strcmp(idx, "0")) sb_printf(&G->wloads, "%sldv1(%s, L%d%s);\n", G->wind, p, x->id, run);
        else sb_printf(&G->wloads, "%sldv(%s, i0%s, L%d%s);\n", G->wind, p, idx + 1, x->id, run);
    }
    return xasprintf("L%d%s[k]", x->id, run);
}

/* x holds one value per row of `space` (a row_in input): element i reads x[i / row]; when wide,
 * the 8 elements are in one row (wide_ok checked it) and share one load */
static char *row_operand(Gen *G, const Node *x, const Shape *space) {
    int64_t d = space->dim[space->rank - 1];
    if (G->scope[x->id]) die("internal error: %s is read per row but computed per element", node_label(x));
    if (!G->wide) return xasprintf("ld(%s, i / %lldL)", ptr(G, x), (long long)d);
    const char *run = G->runs ? "[c]" : "";
    if (!G->wloaded[x->id]) {
        G->wloaded[x->id] = 1;
        if (G->runs) sb_printf(&G->wdecls, "    %s L%d[%d][8];\n", G->R, x->id, G->runs);
        else sb_printf(&G->wloads, "%s%s L%d[8];\n", G->wind, G->R, x->id);
        sb_printf(&G->wloads, "%sldv1(%s + i0 / %lldL, L%d%s);\n", G->wind, ptr(G, x), (long long)d, x->id, run);
    }
    return xasprintf("L%d%s[k]", x->id, run);
}

char *operand(Gen *G, const Node *x, const Shape *space) {
    if (G->scope[x->id]) return xasprintf("v%d", x->id);
    char *idx = index_for(x, space);
    if (G->wide) {
        char *s = wide_load(G, x, idx);
        free(idx);
        return s;
    }
    char *s = xasprintf("ld(%s, %s)", ptr(G, x), idx);
    free(idx);
    return s;
}

static char *expr_of(Gen *G, const Node *n, const Shape *space) {
    const OpInfo *info = &op_info[n->op];
    if (n->op == OP_GRAD_ACCUMULATE) { /* grads[param] += g, in the gradient's dtype */
        char *a = operand(G, n->in[0], space);
        char *old = G->wide ? wide_load(G, n, "i") : xasprintf("ld(%s, i)", ptr(G, n));
        char *s = xasprintf("mmc_add(%s, (%s)%s)", old, G->R, a);
        free(a), free(old);
        return s;
    }
    if (!info->cuda) die("internal error: %s has no CUDA expression", info->name);
    const char *math = G->regs && info->cuda_unit ? info->cuda_unit : info->cuda;
    StrBuf b = {0};
    for (const char *c = math; *c; c++) {
        if (*c == '$' && c[1] >= '0' && c[1] <= '9') {
            int k = c[1] - '0';
            char *a = (info->row_in >> k & 1) ? row_operand(G, n->in[k], space) : operand(G, n->in[k], space);
            sb_printf(&b, "(%s)%s", G->R, a);
            free(a);
            c++;
        } else if (*c == '$' && strncmp(c + 1, "scale", 5) == 0) {
            char *l = literal(G, n->a.scale);
            sb_printf(&b, "(%s)%s", G->R, l);
            free(l);
            c += 5;
        } else {
            sb_appendn(&b, c, 1);
        }
    }
    return b.s;
}

/* Rounding and storing of a value just computed (the anchor's or an elementwise node's). */
void finish_value(Gen *G, StrBuf *o, const Node *n, const char *ind) {
    const char *r = rounder(G, n->dtype);
    if (*r) sb_printf(o, "%sv%d = %s(v%d);\n", ind, n->id, r, n->id);
    if (n->materialized && n->buffer >= 0 && G->wide) {
        if (!G->wstored[n->id]) {
            G->wstored[n->id] = 1;
            if (G->regs) sb_printf(&G->sdecls, "        %s S%d[8];\n", G->R, n->id);
            else if (G->runs) sb_printf(&G->wdecls, "    %s S%d[8];\n", G->R, n->id);
            else sb_printf(&G->wloads, "%s%s S%d[8];\n", G->wind, G->R, n->id);
            sb_printf(&G->wstores, "%sstv(%s, i0, S%d);\n", G->wind, ptr(G, n), n->id);
        }
        sb_printf(o, "%sS%d[k] = v%d;\n", ind, n->id, n->id);
    } else if (n->materialized && n->buffer >= 0) {
        sb_printf(o, "%sst(%s, i, v%d);\n", ind, ptr(G, n), n->id);
    }
    G->scope[n->id] = 1;
}

void emit_node(Gen *G, StrBuf *o, const Node *n, const Shape *space, const char *ind) {
    char *e = expr_of(G, n, space);
    sb_printf(o, "%s%s v%d = %s; // %s %s %s\n", ind, G->R, n->id, e, op_info[n->op].name, node_label(n), dtype_name(n->dtype));
    free(e);
    finish_value(G, o, n, ind);
}

/* ---- groups */

static void kernel_comment(Gen *G, StrBuf *o) {
    Group *gr = G->gr;
    sb_printf(o, "\n// ---- %s:", gr->kernel);
    for (int i = 0; i < gr->n_nodes; i++)
        if (gr->nodes[i]->op != OP_PART) sb_printf(o, " %s", op_info[gr->nodes[i]->op].name);
    sb_append(o, "\n");
    for (int i = 0; i < gr->n_nodes; i++) {
        const Node *n = gr->nodes[i];
        char *s = shape_str(&n->shape);
        sb_printf(o, "//   %%%d %s %s %s %s%s\n", n->id, op_info[n->op].name, node_label(n), s, dtype_name(n->dtype),
                  n->materialized ? " stored" : "");
        free(s);
    }
}

void begin_kernel(Gen *G, Group *gr) {
    G->gr = gr;
    G->reg_f64 = 0;
    for (int i = 0; i < gr->n_nodes; i++) {
        const Node *n = gr->nodes[i];
        if (n->dtype == DT_F64 || n->compute == DT_F64) G->reg_f64 = 1;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]->dtype == DT_F64) G->reg_f64 = 1;
    }
    G->R = G->reg_f64 ? "double" : "float";
    sb_free(&G->ptrs);
    memset(G->declared, 0, (size_t)G->g->next_id);
    memset(G->scope, 0, (size_t)G->g->next_id);
}

int64_t blocks_for(int64_t n, int64_t threads) {
    int64_t b = (n + threads - 1) / threads;
    return b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b;
}

/* A fused elementwise chain, one element or (wide) eight a thread, as the launch step chose. */
static void gen_elementwise(Gen *G, StrBuf *o) {
    Group *gr = G->gr;
    const Shape *space = &gr->nodes[gr->n_nodes - 1]->shape;
    int wide = gr->wide;
    StrBuf body = {0};
    char *loads = NULL, *stores = NULL;
    if (wide) wide_begin(G, "        ");
    for (int i = 0; i < gr->n_nodes; i++) emit_node(G, &body, gr->nodes[i], space, wide ? "            " : "        ");
    if (wide) wide_end(G, &loads, &stores);
    Keys ks = {0};
    key(&ks, "NAME", "%s", gr->kernel);
    launch_keys(gr, &ks);
    key(&ks, "POINTERS", "%s", G->ptrs.s ? G->ptrs.s : "");
    key(&ks, "N", "%lld", (long long)shape_numel(space));
    key(&ks, "BODY", "%s", body.s ? body.s : "");
    if (wide) {
        key(&ks, "LOADS", "%s", loads);
        key(&ks, "STORES", "%s", stores);
    }
    render(o, gr->tmpl, &ks);
    sb_free(&body);
    free(loads), free(stores);
}

int codegen_reference_parse(const char *list) {
    static const struct {
        const char *name;
        unsigned bit;
    } kinds[] = {{"all", REF_ALL}, {"attention", REF_ATTENTION}, {"sum_to", REF_SUM_TO}, {"embedding", REF_EMBEDDING}, {"wide", REF_WIDE}, {"gemm", REF_GEMM}};
    unsigned mask = 0;
    char *copy = xstrdup(list), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t k = 0;
        while (k < sizeof kinds / sizeof kinds[0] && strcmp(kinds[k].name, t)) k++;
        if (k == sizeof kinds / sizeof kinds[0]) {
            free(copy);
            return -1;
        }
        mask |= kinds[k].bit;
    }
    free(copy);
    return (int)mask;
}

void gen_init(Gen *G, const Graph *g, Program *p, unsigned reference) {
    *G = (Gen){.g = g, .p = p, .R = "float", .eager = g->policy.round_eager, .reference = reference, .wind = ""};
    G->declared = xcalloc((size_t)g->next_id, 1);
    G->scope = xcalloc((size_t)g->next_id, 1);
    G->wloaded = xcalloc((size_t)g->next_id, 1);
    G->wstored = xcalloc((size_t)g->next_id, 1);
}

void gen_free(Gen *G) {
    sb_free(&G->ptrs);
    free(G->declared);
    free(G->scope);
    free(G->wloaded), free(G->wstored);
    sb_free(&G->wdecls);
    sb_free(&G->sdecls);
}

char *codegen_cuda(const Graph *g, Program *p, unsigned reference) {
    Gen G;
    gen_init(&G, g, p, reference);
    StrBuf o = {0}, k = {0};
    sb_printf(&o, "// kernels.cu for graph '%s' (%s), policy %s, rounding %s.\n", g->name, g->source, g->policy.name,
              g->policy.round_eager ? "eager" : "fused");
    sb_printf(&o, "// Generated by mmc compile from the graph file and templates/; edit those, not this.\n");
    sb_printf(&o, "// plan hash %s\n\n", g->hash);
    sb_append(&o, "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n\n");
    sb_append(&o, "// every kernel's one argument: the base of each buffer of the plan\nstruct MmcBuffers {\n");
    for (int b = 0; b < BUF_COUNT; b++) sb_printf(&o, "    char *%s;\n", buffer_name(b));
    sb_append(&o, "};\n\n");
    sb_append(&o, template_text("prelude.cuh"));
    sb_append(&o, "\n");
    sb_append(&o, template_text("step_state.h"));
    sb_append(&o, "\n");
    sb_append(&o, template_text("layouts.h"));
    for (int i = 0; i < p->n_groups; i++) {
        Group *gr = p->groups[i];
        begin_kernel(&G, gr);
        if (gr->kind == GK_GEMM && gr->n_nodes > 1) {
            kernel_comment(&G, &k);
            gen_gemm_epilogue(&G, &k);
            continue;
        }
        if (gr->kind == GK_GEMM) {
            const Node *n = gr->anchor;
            char *s = shape_str(&n->shape);
            sb_printf(&k, "\n// ---- %s: cuBLASLt %s %s %s %s (see the plan)\n", gr->kernel, op_info[n->op].name,
                      node_label(n), s, dtype_name(n->dtype));
            free(s);
            continue;
        }
        if (gr->kind == GK_OPTIMIZER) {
            sb_printf(&k, "\n// ---- %s\n", gr->kernel);
            gen_optimizer(&G, &k);
            continue;
        }
        kernel_comment(&G, &k);
        if (gr->kind == GK_ELEMENTWISE) gen_elementwise(&G, &k);
        else if (gr->kind == GK_CAST_PARAMS || gr->kind == GK_GRADS) gen_segments(&G, &k);
        else gen_anchor(&G, &k);
    }
    if (G.uses_flash) {
        sb_append(&o, "\n");
        sb_append(&o, template_text("flash_attention.cuh"));
        sb_append(&o, "\n");
        sb_append(&o, template_text("flash_attention_sm90.cuh"));
    }
    if (G.uses_gemm) {
        sb_append(&o, "\n");
        sb_append(&o, template_text("gemm_sm90.cuh"));
    }
    /* the runtime compiles the kernels in several translation units at once, each the part
     * above this line and some of the kernels below it (runtime/nvrtc_compile.c) */
    sb_append(&o, "\n" KERNELS_MARKER "\n");
    sb_append(&o, k.s ? k.s : "");
    sb_free(&k);
    gen_free(&G);
    return o.s;
}
