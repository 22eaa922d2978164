/* plan_read: parses a plan back into the Graph and Program structures the compiler made, so
 * both backends execute exactly what codegen saw. Errors name the plan file and line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "util.h"

typedef struct Reader {
    const char *path;
    int line;
    Plan *pl;
    int cap_ids;
    int model_line;             /* where the `model` line is, 0 before it */
    long role_id[ROLE_COUNT];   /* the inputs it names, resolved once the leaves are read */
} Reader;

static MMC_NORETURN void bad(Reader *r, const char *fmt, const char *arg) {
    char *w = xasprintf("%s:%d", r->path, r->line);
    die_at(w, fmt, arg);
}

/* tokens of a line: words split on spaces; key=value pairs found by key */
typedef struct Line {
    char *words[256];
    int n;
} Line;

static void split(Reader *r, char *s, Line *l) {
    l->n = 0;
    for (char *t = strtok(s, " \t"); t; t = strtok(NULL, " \t")) {
        if (l->n == 256) bad(r, "too many fields%s", "");
        l->words[l->n++] = t;
    }
}

static const char *field(const Line *l, const char *key) {
    size_t n = strlen(key);
    for (int i = 0; i < l->n; i++)
        if (strncmp(l->words[i], key, n) == 0 && l->words[i][n] == '=') return l->words[i] + n + 1;
    return NULL;
}

static const char *need(Reader *r, const Line *l, const char *key) {
    const char *v = field(l, key);
    if (!v) bad(r, "missing field %s", key);
    return v;
}

static double num(Reader *r, const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end) bad(r, "bad number '%s'", s);
    return v;
}

static DType dtype_field(Reader *r, const char *s) {
    DType t = dtype_parse(s);
    if (t == DT_NONE) bad(r, "unknown dtype '%s'", s);
    return t;
}

static Node *node_ref(Reader *r, const char *s) {
    if (s[0] != '%') bad(r, "bad node reference '%s'", s);
    long id = strtol(s + 1, NULL, 10);
    if (id < 0 || id >= r->pl->n_ids || !r->pl->by_id[id]) bad(r, "node %s used before it is defined", s);
    return r->pl->by_id[id];
}

/* a name of one of the tables (the kernel kinds, phases, optimizer kernels, lr schedules):
 * its index, or an error that lists the names */
static int name_field(Reader *r, const char *what, const char *s, int (*parse)(const char *), const char *const *names) {
    int i = parse(s);
    if (i < 0) bad(r, "%s", xasprintf("unknown %s '%s' (known: %s)", what, s, word_list(names)));
    return i;
}

static Shape shape_field(Reader *r, const char *s) {
    Shape sh = {0};
    if (strcmp(s, "scalar") == 0) return sh;
    char *copy = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (sh.rank == IR_MAX_DIMS) bad(r, "too many dims in '%s'", s);
        sh.dim[sh.rank++] = (int64_t)num(r, t);
    }
    free(copy);
    return sh;
}

/* The node fields every op line may have; the rest of its key=value words must be the
 * attributes its op uses (attrs.h), each present once. */
static const char *const node_fields[] = {"in", "shape", "dtype", "compute", "at", "bwd", "name", NULL};

static void read_attrs(Reader *r, const Line *l, Node *n) {
    unsigned mask = op_info[n->op].attrs, seen = 0;
    for (int i = 3; i < l->n; i++) {
        const char *w = l->words[i], *eq = strchr(w, '=');
        if (!eq) bad(r, "bad field '%s' (key=value)", w);
        char *k = xstrndup(w, (size_t)(eq - w));
        int known = 0;
        for (int f = 0; node_fields[f]; f++) known |= !strcmp(node_fields[f], k);
        AttrId id = known ? ATTR_COUNT : attr_by_key(k);
        if (!known && (id == ATTR_COUNT || !(mask & (1u << id))))
            bad(r, "%s", xasprintf("field '%s' is no attribute of %s", k, op_info[n->op].name));
        free(k);
        if (known) continue;
        if (seen & (1u << id)) bad(r, "attribute %s given twice", attr_info[id].key);
        seen |= 1u << id;
        char *err = attr_parse(&n->a, id, eq + 1);
        if (err) bad(r, "%s", err);
    }
    for (int id = 0; id < ATTR_COUNT; id++)
        if ((mask & (1u << id)) && !(seen & (1u << id)))
            bad(r, "%s", xasprintf("%s needs attribute %s", op_info[n->op].name, attr_info[id].key));
}

static Node *read_node(Reader *r, const Line *l) {
    Plan *pl = r->pl;
    if (l->n < 3) bad(r, "short node line%s", "");
    long id = strtol(l->words[1] + 1, NULL, 10);
    Op op = op_parse(l->words[2]);
    if (op == OP_COUNT) bad(r, "unknown op '%s'", l->words[2]);
    Node *n = xcalloc(1, sizeof *n);
    n->id = (int)id;
    n->op = op;
    n->group = n->buffer = n->param_index = n->rule = -1;
    n->where = xstrdup("");
    const char *in = field(l, "in");
    if (in) {
        char *copy = xstrdup(in), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (n->n_in == IR_MAX_INPUTS) bad(r, "too many inputs%s", "");
            n->in[n->n_in++] = node_ref(r, t);
        }
        free(copy);
    }
    n->shape = shape_field(r, need(r, l, "shape"));
    n->dtype = dtype_field(r, need(r, l, "dtype"));
    const char *c = field(l, "compute");
    n->compute = c ? dtype_field(r, c) : n->dtype;
    const char *v;
    read_attrs(r, l, n);
    if ((v = field(l, "name"))) n->name = xstrdup(v);
    if ((v = field(l, "bwd"))) n->backward = 1;
    if ((v = field(l, "at"))) {
        const char *plus = strchr(v, '+');
        char *bufname = plus ? xstrndup(v, (size_t)(plus - v)) : NULL;
        int b = bufname ? buffer_parse(bufname) : -1;
        if (b < 0) bad(r, "bad location '%s'", v);
        free(bufname);
        n->buffer = b;
        n->offset = (int64_t)num(r, plus + 1);
        n->materialized = 1;
    }
    if (id >= pl->n_ids) {
        int old = pl->n_ids;
        pl->n_ids = (int)id + 1;
        if (pl->n_ids > r->cap_ids) {
            r->cap_ids = pl->n_ids * 2;
            pl->by_id = xrealloc(pl->by_id, (size_t)r->cap_ids * sizeof *pl->by_id);
        }
        for (int i = old; i < pl->n_ids; i++) pl->by_id[i] = NULL;
    }
    if (pl->by_id[id]) bad(r, "node %s defined twice", l->words[1]);
    pl->by_id[id] = n;
    Graph *g = pl->g;
    vec_push(g->nodes, g->n_nodes, g->cap_nodes, n);
    if (g->next_id <= n->id) g->next_id = n->id + 1;
    return n;
}

/* model vocab=6400 pad_id=0 bos_id=1 eos_id=2 max_positions=32768 tokens=%0 targets=%1 */
static void read_model(Reader *r, const Line *l) {
    ModelInfo *m = &r->pl->g->model;
    if (r->model_line) bad(r, "a second 'model' line%s", "");
    r->model_line = r->line;
    for (int k = 0; k < MF_COUNT; k++) {
        const char *v = field(l, model_field_names[k]);
        if (v) m->value[k] = (int64_t)num(r, v), m->given |= 1u << k;
    }
    if (m->given) m->where = xasprintf("%s:%d", r->path, r->line);
    for (int k = 0; k < ROLE_COUNT; k++) {
        const char *v = field(l, role_names[k]);
        if (v && v[0] != '%') bad(r, "bad node reference '%s'", v);
        r->role_id[k] = v ? strtol(v + 1, NULL, 10) : -1;
    }
}

/* checkpoint_config key=json ...: a config.json's fields, each value JSON text */
static void read_json_fields(Reader *r, const Line *l, JsonFile file) {
    JsonFields *jf = &r->pl->g->json[file];
    if (jf->where) bad(r, "a second '%s' line", json_file_names[file]);
    jf->where = xasprintf("%s:%d", r->path, r->line);
    for (int i = 1; i < l->n; i++) {
        const char *eq = strchr(l->words[i], '=');
        if (!eq || eq == l->words[i] || !eq[1]) bad(r, "bad field '%s' (key=value)", l->words[i]);
        JsonField e = {xstrndup(l->words[i], (size_t)(eq - l->words[i])), xstrdup(eq + 1)};
        vec_push(jf->f, jf->n, jf->cap, e);
    }
}

static void read_header_fields(Reader *r, const Line *l) {
    Graph *g = r->pl->g;
    const char *w = l->words[0];
    if (!strcmp(w, "graph")) g->name = xstrdup(l->words[1]);
    else if (!strcmp(w, "source")) g->source = xstrdup(l->words[1]);
    else if (!strcmp(w, "hash")) g->hash = xstrdup(l->words[1]);
    else if (!strcmp(w, "policy")) {
        g->policy.name = xstrdup(need(r, l, "name"));
        g->policy.round_eager = strcmp(need(r, l, "rounding"), "eager") == 0;
        g->policy.master = dtype_field(r, need(r, l, "master"));
        g->policy.source = xstrdup(need(r, l, "source"));
    } else if (!strcmp(w, "config")) {
        for (int i = 1; i < l->n; i++) {
            char *eq = strchr(l->words[i], '=');
            if (!eq) bad(r, "bad config entry '%s'", l->words[i]);
            ConfigEntry e = {xstrndup(l->words[i], (size_t)(eq - l->words[i])), 0, NULL};
            char *end;
            e.value = strtod(eq + 1, &end);
            if (*end || end == eq + 1) e.text = xstrdup(eq + 1);
            vec_push(g->config, g->n_config, g->cap_config, e);
        }
    } else if (!strcmp(w, "train")) {
        /* every setting of the table (train_settings.h), and nothing else */
        for (int i = 1; i < l->n; i++) {
            const char *eq = strchr(l->words[i], '=');
            int known = 0;
            for (int k = 0; eq && k < n_train_settings; k++)
                known |= strlen(train_settings[k].key) == (size_t)(eq - l->words[i]) &&
                         !strncmp(train_settings[k].key, l->words[i], (size_t)(eq - l->words[i]));
            if (!known) bad(r, "unknown training setting '%s'", l->words[i]);
        }
        for (int k = 0; k < n_train_settings; k++) {
            char *err = train_setting_parse(&g->train, &train_settings[k], need(r, l, train_settings[k].key));
            if (err) bad(r, "%s", err);
        }
    } else if (!strcmp(w, "grad_norm")) {
        r->pl->p->grad_chunk = (int64_t)num(r, need(r, l, "chunk"));
        r->pl->p->n_chunks = (int)num(r, need(r, l, "chunks"));
    } else if (!strcmp(w, "model")) {
        read_model(r, l);
    } else if (json_file_parse(w) >= 0) {
        read_json_fields(r, l, (JsonFile)json_file_parse(w));
    } else if (!strcmp(w, "buffer")) {
        if (l->n != 3) bad(r, "bad buffer line%s", "");
        int b = buffer_parse(l->words[1]);
        if (b < 0) bad(r, "unknown buffer '%s'", l->words[1]);
        r->pl->p->buffer_bytes[b] = (int64_t)num(r, l->words[2]);
    } else {
        bad(r, "unknown line '%s'", w);
    }
}


/* stream=1 sends a kernel to the side stream, which the runtime forks at the phase's start:
 * only an anchor kernel (a cuBLASLt call shares the workspace of the others) */
static int stream_field(Reader *r, const char *s, GroupKind k) {
    if (strcmp(s, "0") && strcmp(s, "1")) bad(r, "bad stream '%s' (0: the main stream, 1: the side stream)", s);
    if (s[0] == '1' && k != GK_ANCHOR) bad(r, "stream=1 on a %s kernel: only anchor kernels run on the side stream", group_kind_name(k));
    return s[0] == '1';
}

/* the side stream starts with the phase, before any kernel of it ran: its kernels may read
 * leaves and their own nodes only */
static void check_side_inputs(Reader *r, const Group *gr, const Node *n) {
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k]->group >= 0 && n->in[k]->group != gr->id)
            bad(r, "a side-stream kernel reads %s, which another kernel writes (it may read only leaves)",
                xasprintf("%%%d", n->in[k]->id));
}

Plan *plan_read(const char *text, const char *path) {
    Reader r = {.path = path, .pl = xcalloc(1, sizeof(Plan))};
    Plan *pl = r.pl;
    pl->path = xstrdup(path);
    pl->g = ir_graph_new("?", "?");
    pl->p = xcalloc(1, sizeof *pl->p);
    Graph *g = pl->g;
    Group *cur = NULL;
    int ended = 0;
    char *copy = xstrdup(text), *save = NULL;
    char **lines = NULL;
    int n_lines = 0, cap_lines = 0;
    for (char *s = strtok_r(copy, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) vec_push(lines, n_lines, cap_lines, s);
    for (int li = 0; li < n_lines; li++) {
        r.line = li + 1;
        Line l;
        split(&r, lines[li], &l);
        if (l.n == 0) continue;
        const char *w = l.words[0];
        if (li == 0) {
            if (strcmp(w, "mmc-plan") || l.n != 2) bad(&r, "not an mmc plan (first line must be 'mmc-plan N')%s", "");
            int v = (int)num(&r, l.words[1]);
            if (v != MMC_PLAN_FORMAT) {
                char *m = xasprintf("plan format %d, this mmc reads format %d: recompile with mmc compile", v, MMC_PLAN_FORMAT);
                bad(&r, "%s", m);
            }
            continue;
        }
        if (ended) bad(&r, "text after 'end'%s", "");
        if (!strcmp(w, "leaf")) {
            read_node(&r, &l);
        } else if (!strcmp(w, "param")) {
            if (l.n < 3) bad(&r, "bad param line%s", "");
            /* the param's node comes later as a leaf line; remember the order now */
            const char *alias = field(&l, "alias");
            Param p = {NULL, (int64_t)num(&r, need(&r, &l, "offset")), alias ? xstrdup(alias) : NULL};
            vec_push(g->params, g->n_params, g->cap_params, p);
            const char *nid = need(&r, &l, "node");
            g->params[g->n_params - 1].node = (Node *)(intptr_t)strtol(nid + 1, NULL, 10); /* resolved below */
        } else if (!strcmp(w, "loss")) {
            g->loss = node_ref(&r, l.words[1]);
        } else if (!strcmp(w, "kernel") || !strcmp(w, "gemm")) {
            GroupKind k = (GroupKind)name_field(&r, "kernel kind", need(&r, &l, "kind"), group_kind_parse, group_kind_names);
            Phase ph = (Phase)name_field(&r, "phase", need(&r, &l, "phase"), phase_parse, phase_names);
            cur = program_add_group(pl->p, k, ph);
            cur->kernel = xstrdup(l.words[1]);
            cur->grid = (int64_t)num(&r, need(&r, &l, "grid"));
            cur->grid_y = (int64_t)num(&r, need(&r, &l, "grid_y"));
            cur->block = (int64_t)num(&r, need(&r, &l, "block"));
            cur->smem = (int64_t)num(&r, need(&r, &l, "smem"));
            const char *st = field(&l, "stream");
            cur->stream = st ? stream_field(&r, st, k) : 0;
            const char *o = field(&l, "optimizer");
            if (k == GK_OPTIMIZER)
                cur->optimizer = (OptimizerKernel)name_field(&r, "optimizer kernel", need(&r, &l, "optimizer"),
                                                             optimizer_kernel_parse, optimizer_kernel_names);
            else if (o) bad(&r, "%s", xasprintf("optimizer=%s on a %s kernel (only optimizer kernels have one)", o, group_kind_name(k)));
            const char *a = field(&l, "anchor");
            if (a) cur->anchor = (Node *)(intptr_t)strtol(a + 1, NULL, 10); /* resolved below */
            else cur->anchor = (Node *)(intptr_t)-1;
        } else if (!strcmp(w, "op")) {
            if (!cur) bad(&r, "op line outside a kernel%s", "");
            Node *n = read_node(&r, &l);
            group_add(cur, n);
            if (cur->stream) check_side_inputs(&r, cur, n);
        } else if (!strcmp(w, "end")) {
            ended = 1;
        } else {
            read_header_fields(&r, &l);
        }
    }
    if (!ended) {
        r.line = n_lines;
        bad(&r, "the plan is cut short (no 'end' line)%s", "");
    }
    if (!r.model_line) {
        r.line = 1;
        bad(&r, "no 'model' line: the plan was made by an older mmc; recompile with mmc compile%s", "");
    }
    for (int k = 0; k < ROLE_COUNT; k++) {
        long id = r.role_id[k];
        if (id < 0) continue;
        r.line = r.model_line;
        if (id >= pl->n_ids || !pl->by_id[id] || pl->by_id[id]->op != OP_INPUT)
            bad(&r, "%s", xasprintf("the role %s names %%%ld, which is no input leaf", role_names[k], id));
        g->role[k] = pl->by_id[id];
    }
    for (int i = 0; i < g->n_params; i++) {
        long id = (long)(intptr_t)g->params[i].node;
        if (id < 0 || id >= pl->n_ids || !pl->by_id[id] || pl->by_id[id]->op != OP_PARAM)
            bad(&r, "a param line names %s, which is no param leaf", xasprintf("%%%ld", id));
        g->params[i].node = pl->by_id[id];
        g->params[i].node->param_index = i;
    }
    for (int i = 0; i < pl->p->n_groups; i++) {
        Group *gr = pl->p->groups[i];
        long id = (long)(intptr_t)gr->anchor;
        gr->anchor = id >= 0 && id < pl->n_ids ? pl->by_id[id] : NULL;
    }
    if (!g->loss) bad(&r, "no loss line%s", "");
    free(lines);
    free(copy);
    return pl;
}

Plan *plan_load(const char *dir) {
    char *path = path_join(dir, "plan");
    char *text = try_read_file(path, NULL);
    if (!text) die("%s: no plan here (make one with: mmc compile GRAPH.lua -o %s)", path, dir);
    Plan *pl = plan_read(text, path);
    free(text);
    free(path);
    return pl;
}
