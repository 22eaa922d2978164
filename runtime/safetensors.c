/* safetensors: see safetensors.h. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static const struct {
    const char *name;
    DType t;
    int bytes;
} st_types[] = {{"F64", DT_F64, 8}, {"F32", DT_F32, 4}, {"F16", DT_F16, 2}, {"BF16", DT_BF16, 2}, {"I32", DT_I32, 4}, {"U8", DT_NONE, 1}};

static int st_type(const char *name, DType *t) {
    for (size_t i = 0; i < sizeof st_types / sizeof st_types[0]; i++)
        if (!strcmp(st_types[i].name, name)) {
            *t = st_types[i].t;
            return st_types[i].bytes;
        }
    return 0;
}

static const char *st_type_name(DType t) {
    for (size_t i = 0; i < sizeof st_types / sizeof st_types[0]; i++)
        if (st_types[i].t == t) return st_types[i].name;
    return "U8";
}

StFile *st_open(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) die("%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    fstat(fd, &sb);
    size_t size = (size_t)sb.st_size;
    if (size < 8) die("%s: byte 0: not a safetensors file (%zu bytes)", path, size);
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) die("%s: cannot map: %s", path, strerror(errno));
    const unsigned char *p = map;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)p[i] << (8 * i);
    if (hlen > size - 8) die("%s: byte 0: header of %llu bytes in a file of %zu", path, (unsigned long long)hlen, size);
    json_error_t err;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hlen, 0, &err);
    if (!root || !json_is_object(root))
        die("%s: byte %d: bad JSON header: %s", path, 8 + err.position, root ? "not an object" : err.text);
    StFile *f = xcalloc(1, sizeof *f);
    f->path = xstrdup(path);
    f->map = map, f->map_bytes = size;
    const unsigned char *data = p + 8 + hlen;
    size_t data_bytes = size - 8 - (size_t)hlen;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv) {
                f->meta_keys = xrealloc(f->meta_keys, (size_t)(f->n_meta + 1) * sizeof(char *));
                f->meta_values = xrealloc(f->meta_values, (size_t)(f->n_meta + 1) * sizeof(char *));
                f->meta_keys[f->n_meta] = xstrdup(mk);
                f->meta_values[f->n_meta++] = xstrdup(json_is_string(mv) ? json_string_value(mv) : "");
            }
            continue;
        }
        StTensor t = {0};
        t.name = xstrdup(key);
        json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
        int esize = json_is_string(dt) ? st_type(json_string_value(dt), &t.dtype) : 0;
        if (!esize) die("%s: tensor %s: unknown dtype %s", path, key, json_is_string(dt) ? json_string_value(dt) : "(none)");
        if (!json_is_array(sh) || json_array_size(sh) > IR_MAX_DIMS) die("%s: tensor %s: bad shape", path, key);
        t.shape.rank = (int)json_array_size(sh);
        int64_t numel = 1;
        for (int i = 0; i < t.shape.rank; i++) {
            json_t *d = json_array_get(sh, (size_t)i);
            if (!json_is_integer(d) || json_integer_value(d) < 0) die("%s: tensor %s: bad shape", path, key);
            t.shape.dim[i] = json_integer_value(d);
            numel *= t.shape.dim[i];
        }
        if (!json_is_array(off) || json_array_size(off) != 2) die("%s: tensor %s: bad data_offsets", path, key);
        int64_t b0 = json_integer_value(json_array_get(off, 0)), b1 = json_integer_value(json_array_get(off, 1));
        if (b0 < 0 || b1 < b0 || (size_t)b1 > data_bytes)
            die("%s: tensor %s: data_offsets [%lld, %lld] outside the %zu data bytes (byte %llu)", path, key, (long long)b0,
                (long long)b1, data_bytes, (unsigned long long)(8 + hlen + (uint64_t)b0));
        if (b1 - b0 != numel * esize)
            die("%s: tensor %s: %lld bytes for %lld elements of %d bytes (byte %llu)", path, key, (long long)(b1 - b0),
                (long long)numel, esize, (unsigned long long)(8 + hlen + (uint64_t)b0));
        t.data = data + b0;
        t.bytes = b1 - b0;
        f->t = xrealloc(f->t, (size_t)(f->n + 1) * sizeof *f->t);
        f->t[f->n++] = t;
    }
    json_decref(root);
    return f;
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

const char *st_meta(const StFile *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key)) return f->meta_values[i];
    return NULL;
}

void st_close(StFile *f) {
    if (!f) return;
    munmap(f->map, f->map_bytes);
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    for (int i = 0; i < f->n_meta; i++) free(f->meta_keys[i]), free(f->meta_values[i]);
    free(f->meta_keys), free(f->meta_values), free(f->t), free(f->path), free(f);
}

struct StWriter {
    StTensor *t;
    int n, cap;
    json_t *meta;
};

StWriter *st_writer(void) {
    StWriter *w = xcalloc(1, sizeof *w);
    w->meta = json_object();
    return w;
}

void st_add(StWriter *w, const char *name, DType dtype, const Shape *shape, const void *data, int64_t bytes) {
    StTensor t = {xstrdup(name), dtype, {0}, data, bytes};
    if (shape) t.shape = *shape;
    else t.shape = shape_make(1, bytes);
    vec_push(w->t, w->n, w->cap, t);
}

void st_add_meta(StWriter *w, const char *key, const char *value) { json_object_set_new(w->meta, key, json_string(value)); }

void st_write(StWriter *w, const char *path) {
    json_t *root = json_object();
    int64_t at = 0;
    for (int i = 0; i < w->n; i++) {
        StTensor *t = &w->t[i];
        json_t *e = json_object(), *shape = json_array();
        for (int d = 0; d < t->shape.rank; d++) json_array_append_new(shape, json_integer(t->shape.dim[d]));
        json_object_set_new(e, "dtype", json_string(st_type_name(t->dtype)));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)at, (json_int_t)(at + t->bytes)));
        json_object_set_new(root, t->name, e);
        at += t->bytes;
    }
    if (json_object_size(w->meta)) json_object_set(root, "__metadata__", w->meta);
    char *header = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    size_t hlen = strlen(header), padded = (hlen + 7) / 8 * 8; /* data starts 8-byte aligned */
    size_t total = 8 + padded + (size_t)at;
    unsigned char *out = xmalloc(total);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(out + 8, header, hlen);
    memset(out + 8 + hlen, ' ', padded - hlen);
    unsigned char *d = out + 8 + padded;
    for (int i = 0; i < w->n; i++) {
        memcpy(d, w->t[i].data, (size_t)w->t[i].bytes);
        d += w->t[i].bytes;
        free(w->t[i].name);
    }
    write_file_atomic(path, out, total);
    free(out);
    free(header);
    json_decref(root);
    json_decref(w->meta);
    free(w->t);
    free(w);
}
