/* checkpoint: see checkpoint.h. Also `mmc export`. */
#include "checkpoint.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "safetensors.h"
#include "step_state.h"
#include "util.h"

/* a config.json's fields as the plan holds them, each value JSON text */
static json_t *json_fields(const JsonFields *jf, const char *plan) {
    json_t *o = json_object();
    for (int i = 0; i < jf->n; i++) {
        json_error_t err;
        json_t *v = json_loads(jf->f[i].json, JSON_DECODE_ANY, &err);
        if (!v) die("%s: %s=%s is no JSON value: %s", plan, jf->f[i].key, jf->f[i].json, err.text);
        json_object_set_new(o, jf->f[i].key, v);
    }
    return o;
}

/* the graph's checkpoint_config{} fields (MiniMind's config, so its code loads the folder),
 * then mmc's own section */
static void write_config(const Plan *pl, const char *dir) {
    json_t *c = json_fields(&pl->g->json[JF_CHECKPOINT], pl->path);
    json_t *mmc = json_object();
    json_object_set_new(mmc, "graph", json_string(pl->g->name));
    json_object_set_new(mmc, "plan_hash", json_string(pl->g->hash));
    json_object_set_new(mmc, "policy", json_string(pl->g->policy.name));
    /* what `mmc generate` compiles again, forward-only at batch 1 */
    if (pl->g->source) json_object_set_new(mmc, "source", json_string(pl->g->source));
    if (pl->g->policy.source) json_object_set_new(mmc, "policy_source", json_string(pl->g->policy.source));
    for (int k = 0; k < pl->g->n_config; k++) {
        const ConfigEntry *e = &pl->g->config[k];
        json_object_set_new(mmc, e->key, e->text ? json_string(e->text) : json_real(e->value));
    }
    /* what `mmc export --format hf` needs, so that a run folder alone makes the export */
    json_t *model = json_object();
    for (int k = 0; k < MF_COUNT; k++)
        if (model_has(&pl->g->model, (ModelField)k))
            json_object_set_new(model, model_field_names[k], json_integer((json_int_t)pl->g->model.value[k]));
    json_object_set_new(mmc, "model", model);
    if (pl->g->json[JF_EXPORT_HF].where)
        json_object_set_new(mmc, "export_hf", json_fields(&pl->g->json[JF_EXPORT_HF], pl->path));
    json_object_set_new(c, "mmc", mmc);
    checkpoint_write_json(dir, "config.json", c);
}

void checkpoint_write_json(const char *dir, const char *name, json_t *j) {
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (!text) die("%s/%s: cannot render the JSON", dir, name);
    char *path = path_join(dir, name);
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    strcpy(text + n, "\n");
    write_file_atomic(path, text, n + 1);
    free(path), free(text);
    json_decref(j);
}

/* every parameter's master values from a flat buffer, under its names */
static void add_params(StWriter *w, const Plan *pl, const char *prefix, const unsigned char *flat, int aliases) {
    DType m = pl->g->policy.master;
    for (int i = 0; i < pl->g->n_params; i++) {
        const Param *p = &pl->g->params[i];
        int64_t bytes = shape_numel(&p->node->shape) * (int64_t)dtype_size(m);
        char *name = xasprintf("%s%s", prefix, p->node->name);
        st_add(w, name, m, &p->node->shape, flat + p->offset * (int64_t)dtype_size(m), bytes);
        free(name);
        if (aliases && p->alias) st_add(w, p->alias, m, &p->node->shape, flat + p->offset * (int64_t)dtype_size(m), bytes);
    }
}

static unsigned char *whole(Backend *b, int buffer) {
    int64_t n = b->pl->p->buffer_bytes[buffer];
    unsigned char *h = xmalloc((size_t)n + 1);
    b->read(b, buffer, 0, h, n);
    return h;
}

void checkpoint_save(Backend *b, const char *dir, const RunPosition *pos) {
    const Plan *pl = b->pl;
    make_dirs(dir);
    unsigned char *params = whole(b, BUF_PARAMS), *m = whole(b, BUF_ADAM_M), *v = whole(b, BUF_ADAM_V);
    MmcStepState st;
    b->read(b, BUF_STATE, 0, &st, sizeof st);
    StWriter *w = st_writer();
    add_params(w, pl, "", params, 1);
    st_add_meta(w, "format", "pt");
    st_add_meta(w, "mmc_plan_hash", pl->g->hash);
    char *path = path_join(dir, "model.safetensors");
    st_write(w, path);
    free(path);
    write_config(pl, dir);
    w = st_writer();
    add_params(w, pl, "adam_m.", m, 0);
    add_params(w, pl, "adam_v.", v, 0);
    st_add(w, "step_state", DT_NONE, NULL, &st, sizeof st);
    char buf[3][32];
    snprintf(buf[0], sizeof buf[0], "%lld", (long long)pos->rows);
    snprintf(buf[1], sizeof buf[1], "%llu", (unsigned long long)pos->seed);
    snprintf(buf[2], sizeof buf[2], "%llu", (unsigned long long)pos->shuffle);
    st_add_meta(w, "data_rows_consumed", buf[0]);
    st_add_meta(w, "seed", buf[1]);
    st_add_meta(w, "shuffle", buf[2]);
    if (pos->data_sha256[0]) st_add_meta(w, "data_sha256", pos->data_sha256), st_add_meta(w, "data_file", pos->data_file);
    st_add_meta(w, "mmc_plan_hash", pl->g->hash);
    path = path_join(dir, "resume.safetensors");
    st_write(w, path);
    free(path);
    free(params), free(m), free(v);
}

/* Copies tensor `t` (any float dtype) into the flat buffer at parameter p's place. */
static void put_param(Backend *b, int buffer, const Param *p, const StTensor *t, const char *file) {
    DType m = b->pl->g->policy.master;
    if (!shape_eq(&t->shape, &p->node->shape)) {
        char *a = shape_str(&t->shape), *e = shape_str(&p->node->shape);
        die("%s: tensor %s has shape %s, the model needs %s", file, t->name, a, e);
    }
    if (!dtype_is_float(t->dtype)) die("%s: tensor %s is not a float tensor", file, t->name);
    int64_t n = shape_numel(&t->shape);
    void *host = xmalloc((size_t)n * dtype_size(m) + 1);
    for (int64_t i = 0; i < n; i++) dtype_store(m, host, (size_t)i, dtype_load(t->dtype, t->data, (size_t)i));
    b->write(b, buffer, p->offset * (int64_t)dtype_size(m), host, n * (int64_t)dtype_size(m));
    free(host);
}

static void load_named(Backend *b, int buffer, const StFile *f, const char *prefix, int aliases) {
    const Graph *g = b->pl->g;
    char **used = xcalloc((size_t)f->n + 1, sizeof *used);
    for (int i = 0; i < g->n_params; i++) {
        const Param *p = &g->params[i];
        char *name = xasprintf("%s%s", prefix, p->node->name);
        const StTensor *t = st_find(f, name), *alt = aliases && p->alias ? st_find(f, p->alias) : NULL;
        if (!t && !alt)
            die("%s: no tensor %s%s%s", f->path, name, p->alias && aliases ? " (nor its tied name " : "",
                p->alias && aliases ? xasprintf("%s)", p->alias) : "");
        if (t && alt && (t->bytes != alt->bytes || t->dtype != alt->dtype || memcmp(t->data, alt->data, (size_t)t->bytes)))
            die("%s: %s and %s are tied in the model but differ in the file", f->path, name, p->alias);
        put_param(b, buffer, p, t ? t : alt, f->path);
        for (int k = 0; k < f->n; k++)
            if (&f->t[k] == t || &f->t[k] == alt) used[k] = "";
        free(name);
    }
    if (!prefix[0])
        for (int k = 0; k < f->n; k++)
            if (!used[k]) die("%s: tensor %s is not a parameter of this model", f->path, f->t[k].name);
    free(used);
}

void checkpoint_load_weights(Backend *b, const char *path) {
    StFile *f = st_open(path);
    load_named(b, BUF_PARAMS, f, "", 1);
    st_close(f);
}

RunPosition checkpoint_resume(Backend *b, const char *dir) {
    char *mpath = path_join(dir, "model.safetensors"), *rpath = path_join(dir, "resume.safetensors");
    checkpoint_load_weights(b, mpath);
    StFile *r = st_open(rpath);
    const char *hash = st_meta(r, "mmc_plan_hash");
    if (!hash || strcmp(hash, b->pl->g->hash) != 0)
        die("%s: made with another plan (hash %.12s, this plan %.12s): resume with the plan the run was made with", rpath,
            hash ? hash : "?", b->pl->g->hash);
    load_named(b, BUF_ADAM_M, r, "adam_m.", 0);
    load_named(b, BUF_ADAM_V, r, "adam_v.", 0);
    const StTensor *s = st_find(r, "step_state");
    if (!s || s->bytes != (int64_t)sizeof(MmcStepState)) die("%s: no step_state of %zu bytes", rpath, sizeof(MmcStepState));
    b->write(b, BUF_STATE, 0, s->data, s->bytes);
    RunPosition pos = {0};
    const char *v;
    if ((v = st_meta(r, "data_rows_consumed"))) pos.rows = strtoll(v, NULL, 10);
    if ((v = st_meta(r, "seed"))) pos.seed = strtoull(v, NULL, 10);
    if ((v = st_meta(r, "shuffle"))) pos.shuffle = strtoull(v, NULL, 10);
    if ((v = st_meta(r, "data_sha256"))) snprintf(pos.data_sha256, sizeof pos.data_sha256, "%s", v);
    if ((v = st_meta(r, "data_file"))) snprintf(pos.data_file, sizeof pos.data_file, "%s", v);
    st_close(r);
    free(mpath), free(rpath);
    return pos;
}

void checkpoint_export(const char *model_path, const char *out_path, DType dtype) {
    StFile *f = st_open(model_path);
    StWriter *w = st_writer();
    void **owned = xcalloc((size_t)f->n + 1, sizeof *owned);
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->t[i];
        int64_t n = shape_numel(&t->shape);
        owned[i] = xmalloc((size_t)n * dtype_size(dtype) + 1);
        for (int64_t k = 0; k < n; k++) dtype_store(dtype, owned[i], (size_t)k, dtype_load(t->dtype, t->data, (size_t)k));
        st_add(w, t->name, dtype, &t->shape, owned[i], n * (int64_t)dtype_size(dtype));
    }
    st_add_meta(w, "format", "pt");
    st_write(w, out_path);
    for (int i = 0; i < f->n; i++) free(owned[i]);
    free(owned);
    st_close(f);
}

int cmd_export(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *format = "safetensors", *tokenizer = NULL;
    DType t = DT_NONE;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--format") && i + 1 < argc) format = argv[++i];
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tokenizer = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            t = dtype_parse(argv[++i]);
            if (!dtype_is_float(t)) die("export: --dtype f16, bf16, f32 or f64");
        } else if (argv[i][0] == '-') {
            static const char *const known[] = {"-o", "--format", "--tokenizer", "--dtype", NULL};
            die_unknown_option("export", argv[i], known);
        } else in = argv[i];
    }
    if (!in || !out)
        die("export: usage: mmc export RUN_DIR|MODEL.safetensors [--dtype f16] -o OUT.safetensors, or mmc export RUN_DIR "
            "--format hf [--tokenizer FILE] [--dtype f32] -o DIR");
    if (!strcmp(format, "hf")) {
        export_hf(in, out, t == DT_NONE ? DT_F32 : t, tokenizer); /* f32 by default: the weights as trained */
        return 0;
    }
    if (strcmp(format, "safetensors")) die("export: --format %s: the formats are safetensors and hf", format);
    if (tokenizer) die("export: --tokenizer goes with --format hf");
    if (t == DT_NONE) t = DT_F16;
    char *model = strstr(in, ".safetensors") ? xstrdup(in) : path_join(in, "model.safetensors");
    checkpoint_export(model, out, t);
    free(model);
    return 0;
}
