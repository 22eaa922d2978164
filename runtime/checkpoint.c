/* checkpoint: see checkpoint.h. Also `mmc export`. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- saving: one committed set per checkpoint
 * A checkpoint is a set of files of one update, DIR/ckpt-NNNNNNN: model.safetensors,
 * resume.safetensors, config.json and checkpoint.json (the update, the plan's hash, each
 * file's size and SHA-256). It is written as DIR/.ckpt-NNNNNNN.tmp, every file fsynced,
 * renamed into place, and then named by DIR/latest, which is replaced atomically: a kill at
 * any instant leaves the previous set or the new one, never a model of one update beside the
 * moments of another. The top-level model.safetensors, resume.safetensors and config.json
 * that the other commands read are then made hard links to the set's files, and the older
 * sets removed. */

static const char *const set_files[] = {"model.safetensors", "resume.safetensors", "config.json", NULL};

/* makes the renames in a folder durable; a file system that cannot fsync a folder has
 * nothing more to make durable */
static void sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return;
    fsync(fd);
    close(fd);
}

static void file_sha256(const char *path, char hex[65], int64_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    Sha256 c;
    sha256_init(&c);
    static unsigned char chunk[1 << 16];
    size_t n;
    *bytes = 0;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) sha256_update(&c, chunk, n), *bytes += (int64_t)n;
    int bad = ferror(f);
    fclose(f);
    if (bad) die("%s: read error", path);
    sha256_hex(&c, hex);
}

/* the names of a folder's entries, NULL-terminated; NULL where the folder is not there */
static char **dir_names(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) vec_push(names, n, cap, xstrdup(e->d_name));
    closedir(d);
    vec_push(names, n, cap, NULL);
    return names;
}

static void free_names(char **names) {
    for (int i = 0; names && names[i]; i++) free(names[i]);
    free(names);
}

/* a set, or what a kill left of one: its plain files, then the folder */
static void remove_set(const char *path) {
    char **names = dir_names(path);
    if (!names) return;
    for (int i = 0; names[i]; i++) {
        char *p = path_join(path, names[i]);
        if (unlink(p) != 0 && errno != ENOENT) die("%s: cannot remove: %s", p, strerror(errno));
        free(p);
    }
    free_names(names);
    if (rmdir(path) != 0 && errno != ENOENT) die("%s: cannot remove: %s", path, strerror(errno));
}

/* "ckpt-" and digits: a committed set's name */
static int is_set_name(const char *name) {
    return !strncmp(name, "ckpt-", 5) && name[5] && strspn(name + 5, "0123456789") == strlen(name + 5);
}

/* the set DIR/latest names, or NULL where it names none */
static char *latest_set(const char *dir) {
    char *path = path_join(dir, "latest"), *name = try_read_file(path, NULL);
    if (name) {
        name[strcspn(name, "\n")] = 0;
        if (!is_set_name(name)) die("%s: '%s' is not the name of a checkpoint set (ckpt-NNNNNNN)", path, name);
    }
    free(path);
    return name;
}

static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* DIR's top-level files become the set's: hard links (copies where the file system has
 * none), each replaced atomically */
static void publish(const char *dir, const char *name) {
    char *set = path_join(dir, name);
    for (int i = 0; set_files[i]; i++) {
        char *from = path_join(set, set_files[i]), *to = path_join(dir, set_files[i]);
        char *tmp = xasprintf("%s.tmp.%ld", to, (long)getpid());
        if (!same_file(from, to)) { /* renaming a link over itself would leave the temp name */
            unlink(tmp);
            if (link(from, tmp) == 0) {
                if (rename(tmp, to) != 0) die("%s: cannot rename to %s: %s", tmp, to, strerror(errno));
            } else {
                size_t len = 0;
                char *data = read_file(from, &len);
                write_file_atomic(to, data, len);
                free(data);
            }
        }
        free(from), free(to), free(tmp);
    }
    sync_dir(dir);
    free(set);
}

/* checkpoint.json: what makes the set checkable on --resume */
static void write_manifest(const char *set, int64_t update, const char *hash) {
    json_t *m = json_object(), *files = json_object();
    json_object_set_new(m, "update", json_integer((json_int_t)update));
    json_object_set_new(m, "plan_hash", json_string(hash));
    for (int i = 0; set_files[i]; i++) {
        char *path = path_join(set, set_files[i]), hex[65];
        int64_t bytes;
        file_sha256(path, hex, &bytes);
        json_t *f = json_object();
        json_object_set_new(f, "bytes", json_integer((json_int_t)bytes));
        json_object_set_new(f, "sha256", json_string(hex));
        json_object_set_new(files, set_files[i], f);
        free(path);
    }
    json_object_set_new(m, "files", files);
    checkpoint_write_json(set, "checkpoint.json", m);
}

void checkpoint_save(Backend *b, const char *dir, const RunPosition *pos) {
    const Plan *pl = b->pl;
    make_dirs(dir);
    unsigned char *params = whole(b, BUF_PARAMS), *m = whole(b, BUF_ADAM_M), *v = whole(b, BUF_ADAM_V);
    MmcStepState st;
    b->read(b, BUF_STATE, 0, &st, sizeof st);
    char name[32], update[32];
    snprintf(name, sizeof name, "ckpt-%07d", st.update);
    snprintf(update, sizeof update, "%d", st.update);
    char *tmp_name = xasprintf(".%s.tmp", name), *tmp = path_join(dir, tmp_name), *set = path_join(dir, name);
    remove_set(tmp);
    make_dirs(tmp);
    StWriter *w = st_writer();
    add_params(w, pl, "", params, 1);
    st_add_meta(w, "format", "pt");
    st_add_meta(w, "mmc_plan_hash", pl->g->hash);
    st_add_meta(w, "mmc_update", update); /* so that the model file alone says which moments it goes with */
    char *path = path_join(tmp, "model.safetensors");
    st_write(w, path);
    free(path);
    write_config(pl, tmp);
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
    st_add_meta(w, "mmc_update", update);
    path = path_join(tmp, "resume.safetensors");
    st_write(w, path);
    free(path);
    free(params), free(m), free(v);
    write_manifest(tmp, st.update, pl->g->hash);
    /* only a folder made again at the same update (mmc init twice) finds the set there */
    remove_set(set);
    if (rename(tmp, set) != 0) die("%s: cannot rename to %s: %s", tmp, set, strerror(errno));
    sync_dir(dir);
    char *latest = path_join(dir, "latest"), *line = xasprintf("%s\n", name);
    write_file_atomic(latest, line, strlen(line)); /* the commit */
    free(latest), free(line);
    publish(dir, name);
    char **names = dir_names(dir);
    for (int i = 0; names && names[i]; i++)
        if (is_set_name(names[i]) && strcmp(names[i], name)) {
            char *old = path_join(dir, names[i]);
            remove_set(old);
            free(old);
        }
    free_names(names);
    free(tmp_name), free(tmp), free(set);
}

/* a name write_file_atomic gives its temp file: NAME.tmp.PID */
static int is_temp_name(const char *name) {
    const char *t = strstr(name, ".tmp.");
    while (t && strstr(t + 1, ".tmp.")) t = strstr(t + 1, ".tmp.");
    return t && t[5] && strspn(t + 5, "0123456789") == strlen(t + 5);
}

void checkpoint_tidy(const char *dir, int replace) {
    char **names = dir_names(dir);
    if (!names) return;
    /* the sets beside the latest go only where the latest is there: a folder whose latest
     * names no set, or that has none, keeps its sets for a person to look at */
    char *keep = replace ? NULL : latest_set(dir), *keep_dir = keep ? path_join(dir, keep) : NULL;
    struct stat st;
    int keep_there = keep_dir && stat(keep_dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (replace) {
        char *latest = path_join(dir, "latest");
        if (unlink(latest) != 0 && errno != ENOENT) die("%s: cannot remove: %s", latest, strerror(errno));
        free(latest);
        for (int i = 0; set_files[i]; i++) {
            char *p = path_join(dir, set_files[i]);
            if (unlink(p) != 0 && errno != ENOENT) die("%s: cannot remove: %s", p, strerror(errno));
            free(p);
        }
    }
    for (int i = 0; names[i]; i++) {
        const char *n = names[i];
        char *p = path_join(dir, n);
        size_t len = strlen(n);
        int is_dir = lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
        int uncommitted = !strncmp(n, ".ckpt-", 6) && len > 4 && !strcmp(n + len - 4, ".tmp");
        int older = is_set_name(n) && (replace || (keep_there && strcmp(n, keep)));
        if (is_dir && (uncommitted || older)) remove_set(p);
        else if (!is_dir && is_temp_name(n) && unlink(p) != 0 && errno != ENOENT)
            die("%s: cannot remove: %s", p, strerror(errno));
        free(p);
    }
    free_names(names);
    if (keep_there) publish(dir, keep); /* a kill may have come between the links */
    free(keep), free(keep_dir);
}

/* a safetensors file's metadata value, or "?" */
static const char *meta_or(const StFile *f, const char *key) {
    const char *v = st_meta(f, key);
    return v ? v : "?";
}

/* The model file must be of the update and the plan of the resume file beside it. */
static int64_t check_pair(const char *dir, const char *plan_hash) {
    char *mpath = path_join(dir, "model.safetensors"), *rpath = path_join(dir, "resume.safetensors");
    StFile *mf = st_open(mpath), *rf = st_open(rpath);
    const char *mh = meta_or(mf, "mmc_plan_hash"), *rh = meta_or(rf, "mmc_plan_hash");
    const char *mu = st_meta(mf, "mmc_update"), *ru = st_meta(rf, "mmc_update");
    if (strcmp(mh, plan_hash))
        die("%s: made with another plan (hash %.12s, this plan %.12s): resume with the plan the run was made with", mpath,
            mh, plan_hash);
    if (strcmp(mh, rh) || (mu && ru && strcmp(mu, ru)) || (!mu != !ru))
        die("%s is from update %s (plan %.12s) but %s from update %s (plan %.12s): they are not one checkpoint, and "
            "resuming from them would not continue the run",
            mpath, mu ? mu : "?", mh, rpath, ru ? ru : "?", rh);
    int64_t update = mu ? strtoll(mu, NULL, 10) : -1;
    st_close(mf), st_close(rf);
    free(mpath), free(rpath);
    return update;
}

char *checkpoint_committed(const char *dir, const char *plan_hash, int64_t *update) {
    char *name = latest_set(dir);
    if (!name) { /* a run folder from before checkpoint sets */
        char *m = path_join(dir, "model.safetensors");
        if (access(m, F_OK))
            die("%s holds no checkpoint (no latest, no model.safetensors): a run stopped before its first save starts "
                "again, with --force onto its folder",
                dir);
        free(m);
        *update = check_pair(dir, plan_hash);
        return xstrdup(dir);
    }
    char *set = path_join(dir, name), *mpath = path_join(set, "checkpoint.json");
    struct stat st;
    if (stat(set, &st) != 0 || !S_ISDIR(st.st_mode))
        die("%s/latest names %s, which is not in the folder: the checkpoint is lost or was moved", dir, name);
    json_error_t err;
    json_t *man = json_load_file(mpath, 0, &err);
    if (!man) die("%s: %s (the set that %s/latest names)", mpath, err.text, dir);
    json_t *u = json_object_get(man, "update"), *h = json_object_get(man, "plan_hash"), *files = json_object_get(man, "files");
    if (!json_is_integer(u) || !json_is_string(h) || !json_is_object(files))
        die("%s: no update, plan_hash and files", mpath);
    if (json_integer_value(u) != strtoll(name + 5, NULL, 10))
        die("%s: says update %lld, but its set is %s", mpath, (long long)json_integer_value(u), name);
    if (strcmp(json_string_value(h), plan_hash))
        die("%s: made with another plan (hash %.12s, this plan %.12s): resume with the plan the run was made with", set,
            json_string_value(h), plan_hash);
    for (int i = 0; set_files[i]; i++) {
        char *path = path_join(set, set_files[i]), hex[65];
        json_t *f = json_object_get(files, set_files[i]);
        const char *want = json_string_value(json_object_get(f, "sha256"));
        if (!want) die("%s: no sha256 for %s", mpath, set_files[i]);
        if (access(path, R_OK)) die("%s: missing from the checkpoint of update %lld", path, (long long)json_integer_value(u));
        int64_t bytes;
        file_sha256(path, hex, &bytes);
        if (strcmp(hex, want))
            die("%s: changed since it was saved (%lld bytes, sha256 %.12s...; checkpoint.json says %lld bytes, %.12s...): "
                "the checkpoint of update %lld cannot be trusted",
                path, (long long)bytes, hex, (long long)json_integer_value(json_object_get(f, "bytes")), want,
                (long long)json_integer_value(u));
        free(path);
    }
    *update = check_pair(set, plan_hash);
    if (*update != json_integer_value(u))
        die("%s/model.safetensors: from update %lld, but the set is of update %lld", set, (long long)*update,
            (long long)json_integer_value(u));
    json_decref(man);
    free(mpath), free(name);
    return set;
}

/* t's values into `out` as `to`: the index of the first that is not finite there (an inf or a
 * nan in the file, or a value `to` cannot hold, 70000 in f16), or with nonneg of the first
 * below 0; -1 when every value is good. Training from one such value gives nan from then on. */
static int64_t convert(const StTensor *t, DType to, void *out, int nonneg) {
    int64_t n = t->bytes / (int64_t)dtype_size(t->dtype); /* st_open made bytes the shape's count */
    if (t->dtype == to) memcpy(out, t->data, (size_t)t->bytes); /* a run's own files: the bytes as they are */
    else
        for (int64_t i = 0; i < n; i++) dtype_store(to, out, (size_t)i, dtype_load(t->dtype, t->data, (size_t)i));
    for (int64_t i = 0; i < n; i++) {
        double x = dtype_load(to, out, (size_t)i);
        if (!isfinite(x) || (nonneg && x < 0)) return i;
    }
    return -1;
}

/* the refusal of element i of t, convert's answer */
static MMC_NORETURN void refuse_value(StFile *f, const StTensor *t, int64_t i, DType to, int nonneg) {
    double x = dtype_load(t->dtype, t->data, (size_t)i);
    long long at = (long long)(t->at + i * (int64_t)dtype_size(t->dtype));
    if (!isfinite(x))
        st_refuse(f, "byte %lld: tensor %s: element %lld is %s (weights and moments must be finite)", at, t->name,
                  (long long)i, isnan(x) ? "nan" : "inf");
    if (nonneg && x < 0)
        st_refuse(f, "byte %lld: tensor %s: element %lld is %g, below 0 (a second moment is a mean of squares)", at, t->name,
                  (long long)i, x);
    st_refuse(f, "byte %lld: tensor %s: element %lld is %g, beyond the range of %s", at, t->name, (long long)i, x,
              dtype_name(to));
}

/* Copies tensor `t` (any float dtype) into the flat buffer at parameter p's place. */
static void put_param(Backend *b, int buffer, const Param *p, const StTensor *t, StFile *f, int nonneg) {
    DType m = b->pl->g->policy.master;
    if (!shape_eq(&t->shape, &p->node->shape)) {
        char *a = shape_str(&t->shape), *e = shape_str(&p->node->shape), msg[256];
        snprintf(msg, sizeof msg, "has shape %s, the model needs %s", a, e);
        free(a), free(e);
        st_refuse(f, "tensor %s %s", t->name, msg);
    }
    if (!dtype_is_float(t->dtype)) st_refuse(f, "tensor %s is not a float tensor", t->name);
    int64_t n = shape_numel(&t->shape);
    void *host = xmalloc((size_t)n * dtype_size(m) + 1);
    int64_t bad = convert(t, m, host, nonneg);
    if (bad >= 0) {
        free(host);
        refuse_value(f, t, bad, m, nonneg);
    }
    b->write(b, buffer, p->offset * (int64_t)dtype_size(m), host, n * (int64_t)dtype_size(m));
    free(host);
}

/* every parameter from the tensor PREFIX + its name (or, with aliases, its tied name); each
 * tensor taken is marked in used[] */
static void load_named(Backend *b, int buffer, StFile *f, const char *prefix, int aliases, int nonneg, char *used) {
    const Graph *g = b->pl->g;
    for (int i = 0; i < g->n_params; i++) {
        const Param *p = &g->params[i];
        char *name = xasprintf("%s%s", prefix, p->node->name), tied[512] = "";
        const StTensor *t = st_find(f, name), *alt = aliases && p->alias ? st_find(f, p->alias) : NULL;
        if (aliases && p->alias) snprintf(tied, sizeof tied, " (nor its tied name %s)", p->alias);
        if (!t && !alt) {
            char msg[1024];
            snprintf(msg, sizeof msg, "no tensor %s%s", name, tied);
            free(name);
            st_refuse(f, "%s", msg);
        }
        if (t && alt && (t->bytes != alt->bytes || t->dtype != alt->dtype || memcmp(t->data, alt->data, (size_t)t->bytes))) {
            free(name);
            st_refuse(f, "%s and %s are tied in the model but differ in the file", t->name, alt->name);
        }
        put_param(b, buffer, p, t ? t : alt, f, nonneg);
        for (int k = 0; k < f->n; k++)
            if (&f->t[k] == t || &f->t[k] == alt) used[k] = 1;
        free(name);
    }
}

/* a tensor of f that nothing took is refused: `what` says what the tensors should have been */
static void refuse_unused(StFile *f, char *used, const char *what) {
    for (int k = 0; k < f->n; k++)
        if (!used[k]) {
            free(used);
            st_refuse(f, "tensor %s is not %s", f->t[k].name, what);
        }
    free(used);
}

void checkpoint_load_weights(Backend *b, const char *path) {
    StFile *f = st_open(path);
    char *used = xcalloc((size_t)f->n + 1, 1);
    load_named(b, BUF_PARAMS, f, "", 1, 0, used);
    refuse_unused(f, used, "a parameter of this model");
    st_close(f);
}

/* The step state of a resume file, field by field. Each field is what an update leaves
 * behind, and the next update builds on it (the schedule's position, the loss scale it
 * divides by, the counts it adds to): a value no update leaves is refused, not trained
 * from. grad_norm and clip_coef are the last update's, made again before any use. */
static void check_step_state(StFile *r, const MmcStepState *s, const Plan *pl) {
    const TrainConfig *t = &pl->g->train;
    if (s->update < 0) st_refuse(r, "step_state.update is %d, not a count of updates (0 to 2^31 - 1)", s->update);
    if (s->adam_step < 0 || s->adam_step > s->update)
        st_refuse(r, "step_state.adam_step is %d, not from 0 to the %d updates done", s->adam_step, s->update);
    if (s->skipped < 0 || s->skipped > s->update)
        st_refuse(r, "step_state.skipped is %d, not from 0 to the %d updates done", s->skipped, s->update);
    if ((int64_t)s->adam_step + s->skipped != s->update)
        st_refuse(r, "step_state: adam_step %d and skipped %d do not add up to update %d (an update either steps or is "
                     "skipped)",
                  s->adam_step, s->skipped, s->update);
    if (!isfinite(s->scale) || s->scale <= 0 || (!t->loss_scaling && s->scale != 1.0f))
        st_refuse(r, "step_state.scale is %g, not a loss scale (finite and above 0; 1 for a plan without loss scaling)",
                  (double)s->scale);
    if (s->loss_seed != (float)((double)s->scale / t->accumulation))
        st_refuse(r, "step_state.loss_seed is %g, not the scale over the %d micro-batches (%g)", (double)s->loss_seed,
                  t->accumulation, (double)(float)((double)s->scale / t->accumulation));
    if (s->growth_tracker < 0 || s->growth_tracker >= (t->loss_scaling ? t->scale_interval : 1))
        st_refuse(r, "step_state.growth_tracker is %d, not from 0 to %d", s->growth_tracker,
                  t->loss_scaling ? t->scale_interval - 1 : 0);
    if (!isfinite(s->lr)) st_refuse(r, "step_state.lr is %g, not a finite learning rate", s->lr);
    double planned = s->total_micro / t->accumulation;
    if (!isfinite(planned) || planned != floor(planned) || planned < 1 || planned < s->update || planned > INT32_MAX)
        st_refuse(r, "step_state.total_micro is %g, not %d micro-batches times a run's updates (%d to 2^31 - 1)",
                  s->total_micro, t->accumulation, s->update > 1 ? s->update : 1);
    if (s->found_inf != 0.0f)
        st_refuse(r, "step_state.found_inf is %g; a state saved between updates has 0", (double)s->found_inf);
    if (s->ticket != MMC_TICKET_IDLE || s->pad_)
        st_refuse(r, "step_state.ticket is %u (padding %d); a state saved between updates has %u and 0", s->ticket, s->pad_,
                  MMC_TICKET_IDLE);
    if (s->overflow_streak < 0 || s->overflow_streak > s->skipped)
        st_refuse(r, "step_state.overflow_streak is %d, not from 0 to the %d skipped updates", s->overflow_streak, s->skipped);
}

/* a metadata value that must be a decimal integer from 0 to max: "abc", "", "-5", " 5" or
 * "1e3" are refused, not read as 0 or as what their digits start with */
static uint64_t meta_count(StFile *r, const char *key, uint64_t max) {
    const char *v = st_meta(r, key);
    if (!v) st_refuse(r, "no %s in the metadata", key);
    errno = 0;
    char *end;
    unsigned long long x = v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
    if (!(v[0] >= '0' && v[0] <= '9') || *end || errno == ERANGE || x > max)
        st_refuse(r, "%s is \"%s\", not a decimal integer from 0 to %llu", key, v, (unsigned long long)max);
    return x;
}

/* The data position and what it was taken from: a count of the rows the step state's
 * updates took, the seeds, and the token file's hash and name as the run recorded them. */
static RunPosition read_position(StFile *r, const MmcStepState *st, const Plan *pl) {
    RunPosition pos = {0};
    pos.rows = (int64_t)meta_count(r, "data_rows_consumed", INT64_MAX);
    pos.seed = meta_count(r, "seed", UINT64_MAX);
    pos.shuffle = meta_count(r, "shuffle", UINT64_MAX);
    const Node *ids = pl->g->role[ROLE_TOKENS];
    int64_t per_update = ids ? ids->shape.dim[0] * pl->g->train.accumulation : 0;
    if (ids && pos.rows != (int64_t)st->update * per_update)
        st_refuse(r, "data_rows_consumed is %lld, but %d updates of %lld rows took %lld", (long long)pos.rows, st->update,
                  (long long)per_update, (long long)st->update * per_update);
    const char *mu = st_meta(r, "mmc_update");
    if (mu && (int64_t)meta_count(r, "mmc_update", INT32_MAX) != st->update)
        st_refuse(r, "mmc_update is %s, but the step state is of update %d", mu, st->update);
    const char *sha = st_meta(r, "data_sha256"), *file = st_meta(r, "data_file");
    if (sha && (strlen(sha) != 64 || strspn(sha, "0123456789abcdef") != 64))
        st_refuse(r, "data_sha256 is \"%s\", not 64 hex digits", sha);
    if (!sha != !file) st_refuse(r, "data_sha256 and data_file go together; the metadata has one of them");
    for (const char *c = file; c && *c; c++)
        if ((unsigned char)*c < 0x20 || *c == '/') st_refuse(r, "data_file is \"%s\", not the name of a file", file);
    if (file && (!file[0] || strlen(file) >= sizeof pos.data_file))
        st_refuse(r, "data_file is \"%s\", not the name of a file (1 to %zu bytes)", file, sizeof pos.data_file - 1);
    if (sha) snprintf(pos.data_sha256, sizeof pos.data_sha256, "%s", sha);
    if (file) snprintf(pos.data_file, sizeof pos.data_file, "%s", file);
    return pos;
}

RunPosition checkpoint_resume(Backend *b, const char *dir, const Plan *saved_by) {
    const Plan *pl = b->pl;
    char *mpath = path_join(dir, "model.safetensors"), *rpath = path_join(dir, "resume.safetensors");
    StFile *r = st_open(rpath);
    free(rpath);
    const char *hash = st_meta(r, "mmc_plan_hash");
    if (!hash || strcmp(hash, pl->g->hash) != 0)
        st_refuse(r, "made with another plan (hash %.12s, this plan %.12s): resume with the plan the run was made with",
                  hash ? hash : "?", pl->g->hash);
    const StTensor *s = st_find(r, "step_state");
    if (!s || s->dtype != DT_NONE || s->shape.rank != 1 || s->bytes != (int64_t)sizeof(MmcStepState))
        st_refuse(r, "no step_state of %zu bytes (U8)", sizeof(MmcStepState));
    MmcStepState st;
    memcpy(&st, s->data, sizeof st);
    /* the few bytes of state and position first, so that a bad one is refused before the
     * weights and moments are read */
    check_step_state(r, &st, saved_by ? saved_by : pl);
    RunPosition pos = read_position(r, &st, pl);
    checkpoint_load_weights(b, mpath);
    free(mpath);
    char *used = xcalloc((size_t)r->n + 1, 1);
    load_named(b, BUF_ADAM_M, r, "adam_m.", 0, 0, used);
    load_named(b, BUF_ADAM_V, r, "adam_v.", 0, 1, used);
    used[s - r->t] = 1;
    refuse_unused(r, used, "a moment of this model's parameters, nor the step state");
    b->write(b, BUF_STATE, 0, &st, sizeof st);
    st_close(r);
    return pos;
}

void checkpoint_export(const char *model_path, const char *out_path, DType dtype) {
    StFile *f = st_open(model_path);
    void **owned = xcalloc((size_t)f->n + 1, sizeof *owned);
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->t[i];
        int64_t bad = -2;
        if (dtype_is_float(t->dtype)) { /* the bytes hold the shape's elements: st_open checked it */
            owned[i] = xmalloc((size_t)(t->bytes / (int64_t)dtype_size(t->dtype)) * dtype_size(dtype) + 1);
            bad = convert(t, dtype, owned[i], 0);
        }
        if (bad != -1) {
            for (int k = 0; k <= i; k++) free(owned[k]);
            free(owned);
            if (bad == -2) st_refuse(f, "tensor %s is not a float tensor", t->name);
            refuse_value(f, t, bad, dtype, 0);
        }
    }
    StWriter *w = st_writer();
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->t[i];
        int64_t n = t->bytes / (int64_t)dtype_size(t->dtype);
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
