/* safetensors: see safetensors.h. */
#include "safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const struct {
    const char *name;
    DType t;
    int bytes;
} st_types[] = {{"F64", DT_F64, 8},   {"F32", DT_F32, 4}, {"F16", DT_F16, 2},
                {"BF16", DT_BF16, 2}, {"I32", DT_I32, 4}, {"U8", DT_NONE, 1}};

static int st_type(const char *name, DType *t) {
    for (size_t i = 0; i < sizeof st_types / sizeof st_types[0]; i++)
        if (!strcmp(st_types[i].name, name)) {
            *t = st_types[i].t;
            return st_types[i].bytes;
        }
    return 0;
}

/* "F64, F32, ... or U8", for messages */
static const char *st_type_list(void) {
    static char list[128];
    size_t n = sizeof st_types / sizeof st_types[0], at = 0;
    if (!list[0])
        for (size_t i = 0; i < n; i++)
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
                                   st_types[i].name);
    return list;
}

static const char *st_type_name(DType t) {
    for (size_t i = 0; i < sizeof st_types / sizeof st_types[0]; i++)
        if (st_types[i].t == t) return st_types[i].name;
    return "U8";
}

/* ---- reading */

/* A file being opened: a refusal releases what it holds before dying. */
typedef struct Reader {
    StFile *f;
    json_t *root;
    const char *header; /* the JSON text, hlen bytes from byte 8 */
    size_t hlen;
    const unsigned char *data; /* data_bytes bytes after the header */
    size_t data_bytes;
} Reader;

/* A name in the file may hold any character: the message stays one line whatever it holds,
 * and a name of a megabyte is cut. */
static MMC_NORETURN void refuse_v(StFile *f, json_t *root, const char *fmt, va_list ap) {
    char msg[2048], line[2560];
    vsnprintf(msg, sizeof msg, fmt, ap);
    snprintf(line, sizeof line, "%s: %s", f->path, msg);
    for (char *c = line; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    json_decref(root);
    st_close(f);
    die("%s", line);
}

void st_refuse(StFile *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    refuse_v(f, NULL, fmt, ap);
}

static MMC_NORETURN MMC_PRINTF(2, 3) void refuse(Reader *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    refuse_v(r->f, r->root, fmt, ap);
}

/* where `"key":` is first written in the header at or after `from`, or SIZE_MAX */
static size_t find_key(const Reader *r, size_t from, const char *key) {
    size_t k = strlen(key);
    for (size_t i = from; i + k + 2 <= r->hlen; i++) {
        if (r->header[i] != '"' || memcmp(r->header + i + 1, key, k) || r->header[i + 1 + k] != '"') continue;
        size_t j = i + k + 2;
        while (j < r->hlen && (r->header[j] == ' ' || r->header[j] == '\t' || r->header[j] == '\n' || r->header[j] == '\r'))
            j++;
        if (j < r->hlen && r->header[j] == ':') return i;
    }
    return SIZE_MAX;
}

/* the file's byte where a tensor's entry, or a field of it, is written, for messages; the
 * header's start where the name is spelt with escapes */
static unsigned long long header_at(const Reader *r, const char *name, const char *field) {
    size_t at = find_key(r, 0, name);
    if (at == SIZE_MAX) return 8;
    size_t in = field ? find_key(r, at, field) : SIZE_MAX;
    return 8 + (unsigned long long)(in != SIZE_MAX ? in : at);
}

static void read_metadata(Reader *r, json_t *v) {
    StFile *f = r->f;
    if (!json_is_object(v)) refuse(r, "byte %llu: __metadata__ is not an object", header_at(r, "__metadata__", NULL));
    f->meta_keys = xcalloc(json_object_size(v) + 1, sizeof(char *));
    f->meta_values = xcalloc(json_object_size(v) + 1, sizeof(char *));
    const char *mk;
    json_t *mv;
    json_object_foreach(v, mk, mv) {
        if (!json_is_string(mv))
            refuse(r, "byte %llu: __metadata__ value of %s is not a string (the format holds strings only)",
                   header_at(r, "__metadata__", mk), mk);
        f->meta_keys[f->n_meta] = xstrdup(mk);
        f->meta_values[f->n_meta++] = xstrdup(json_string_value(mv));
    }
}

/* one entry {dtype, shape, data_offsets}, each field checked, the element count and the byte
 * count computed with overflow detection */
static void read_tensor(Reader *r, const char *name, json_t *v) {
    if (!json_is_object(v)) refuse(r, "byte %llu: tensor %s: the entry is not an object", header_at(r, name, NULL), name);
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
        if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets"))
            refuse(r, "byte %llu: tensor %s: unknown field %s (an entry has dtype, shape and data_offsets)",
                   header_at(r, name, k), name, k);
    }
    StTensor t = {.name = NULL};
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt))
        refuse(r, "byte %llu: tensor %s: dtype %s (one of %s)", header_at(r, name, "dtype"), name,
               dt ? "is not a string" : "missing", st_type_list());
    int esize = st_type(json_string_value(dt), &t.dtype);
    if (!esize)
        refuse(r, "byte %llu: tensor %s: dtype \"%s\" is not one mmc reads (%s)", header_at(r, name, "dtype"), name,
               json_string_value(dt), st_type_list());
    if (!json_is_array(sh) || json_array_size(sh) > IR_MAX_DIMS)
        refuse(r, "byte %llu: tensor %s: shape %s (an array of at most %d non-negative integers)",
               header_at(r, name, "shape"), name,
               !sh ? "missing" : json_is_array(sh) ? "has too many dimensions" : "is not an array", IR_MAX_DIMS);
    t.shape.rank = (int)json_array_size(sh);
    int64_t numel = 1, bytes = 0;
    for (int i = 0; i < t.shape.rank; i++) {
        json_t *d = json_array_get(sh, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            refuse(r, "byte %llu: tensor %s: shape dimension %d is not a non-negative integer", header_at(r, name, "shape"),
                   name, i);
        t.shape.dim[i] = json_integer_value(d);
        if (__builtin_mul_overflow(numel, t.shape.dim[i], &numel))
            refuse(r, "byte %llu: tensor %s: a shape of more than 2^63 elements", header_at(r, name, "shape"), name);
    }
    if (__builtin_mul_overflow(numel, (int64_t)esize, &bytes))
        refuse(r, "byte %llu: tensor %s: %lld elements of %d bytes are more than 2^63 bytes", header_at(r, name, "shape"),
               name, (long long)numel, esize);
    json_t *j0 = json_array_get(off, 0), *j1 = json_array_get(off, 1);
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(j0) || !json_is_integer(j1))
        refuse(r, "byte %llu: tensor %s: data_offsets %s (two integers [begin, end])", header_at(r, name, "data_offsets"),
               name, off ? "is not two integers" : "missing");
    int64_t b0 = json_integer_value(j0), b1 = json_integer_value(j1);
    if (b0 < 0 || b1 < b0 || (uint64_t)b1 > r->data_bytes)
        refuse(r, "byte %llu: tensor %s: data_offsets [%lld, %lld] are not within the %zu data bytes "
                  "(0 <= begin <= end <= %zu)",
               header_at(r, name, "data_offsets"), name, (long long)b0, (long long)b1, r->data_bytes, r->data_bytes);
    if (b1 - b0 != bytes)
        refuse(r, "byte %llu: tensor %s: data_offsets [%lld, %lld] hold %lld bytes, its %lld elements of %d bytes need "
                  "%lld",
               header_at(r, name, "data_offsets"), name, (long long)b0, (long long)b1, (long long)(b1 - b0),
               (long long)numel, esize, (long long)bytes);
    t.name = xstrdup(name);
    t.at = (int64_t)(8 + r->hlen) + b0;
    t.bytes = bytes;
    t.data = r->data + b0;
    if ((uintptr_t)t.data % (uintptr_t)esize) { /* a header length that is no multiple of 8: loads want alignment */
        t.copy = xmalloc((size_t)bytes);
        memcpy(t.copy, t.data, (size_t)bytes);
        t.data = t.copy;
    }
    r->f->t[r->f->n++] = t;
}

static int by_offset(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* in any order, but no byte of the data belongs to two tensors */
static void check_overlaps(Reader *r) {
    const StTensor **s = xmalloc((size_t)r->f->n * sizeof *s + 1), *last = NULL;
    for (int i = 0; i < r->f->n; i++) s[i] = &r->f->t[i];
    qsort(s, (size_t)r->f->n, sizeof *s, by_offset);
    for (int i = 0; i < r->f->n; i++) {
        if (!s[i]->bytes) continue; /* an empty tensor holds no byte */
        if (last && s[i]->at < last->at + last->bytes) {
            const StTensor *a = last, *b = s[i];
            free(s);
            refuse(r, "byte %lld: tensor %s: its data overlaps that of %s (bytes %lld to %lld of the file)",
                   (long long)b->at, b->name, a->name, (long long)a->at, (long long)(a->at + a->bytes));
        }
        if (!last || s[i]->at + s[i]->bytes > last->at + last->bytes) last = s[i];
    }
    free(s);
}

StFile *st_open(const char *path) {
    FileMap map = filemap_open(path, "safetensors file");
    StFile *f = xcalloc(1, sizeof *f);
    f->map = map;
    f->path = xstrdup(path);
    Reader r = {f, NULL, NULL, 0, NULL, 0};
    size_t size = f->map.bytes;
    if (size < 8) refuse(&r, "byte 0: not a safetensors file (%zu bytes, the header length alone is 8)", size);
    const unsigned char *p = f->map.p;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)p[i] << (8 * i);
    if (hlen > size - 8)
        refuse(&r, "byte 0: a header of %llu bytes in a file of %zu", (unsigned long long)hlen, size);
    r.header = (const char *)p + 8, r.hlen = (size_t)hlen;
    r.data = p + 8 + hlen, r.data_bytes = size - 8 - (size_t)hlen;
    json_error_t err;
    /* a name twice would leave one of its tensors unread, or read the other one */
    r.root = json_loadb(r.header, r.hlen, JSON_REJECT_DUPLICATES, &err);
    if (!r.root) refuse(&r, "byte %llu: bad JSON header: %s", 8 + (unsigned long long)err.position, err.text);
    if (!json_is_object(r.root)) refuse(&r, "byte 8: the JSON header is not an object");
    f->t = xcalloc(json_object_size(r.root) + 1, sizeof *f->t); /* one allocation, however many entries */
    const char *key;
    json_t *v;
    json_object_foreach(r.root, key, v) {
        if (!strcmp(key, "__metadata__")) read_metadata(&r, v);
        else read_tensor(&r, key, v);
    }
    check_overlaps(&r);
    json_decref(r.root);
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
    filemap_close(&f->map);
    for (int i = 0; i < f->n; i++) free(f->t[i].name), free(f->t[i].copy);
    for (int i = 0; i < f->n_meta; i++) free(f->meta_keys[i]), free(f->meta_values[i]);
    free(f->meta_keys), free(f->meta_values), free(f->t), free(f->path), free(f);
}

/* ---- writing */

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
    StTensor t = {.name = xstrdup(name), .dtype = dtype, .data = data, .bytes = bytes};
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
