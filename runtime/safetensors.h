/* safetensors: the format MiniMind's and Hugging Face's tools read: an 8-byte little-endian
 * header size, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
 * then the tensors' bytes. Reading maps the file and checks every entry (errors name the
 * file, the tensor and the byte offset); writing goes to a temp file, fsynced and renamed. */
#ifndef MMC_SAFETENSORS_H
#define MMC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

typedef struct StTensor {
    char *name;
    DType dtype;     /* DT_NONE for U8 (raw bytes) */
    Shape shape;
    const unsigned char *data;
    int64_t bytes;
} StTensor;

typedef struct StFile {
    char *path;
    StTensor *t;
    int n;
    char **meta_keys, **meta_values;
    int n_meta;
    void *map;
    size_t map_bytes;
} StFile;

StFile *st_open(const char *path);
const StTensor *st_find(const StFile *f, const char *name);
const char *st_meta(const StFile *f, const char *key); /* NULL if absent */
void st_close(StFile *f);

typedef struct StWriter StWriter;
StWriter *st_writer(void);
/* data must stay valid until st_write; dtype DT_NONE writes raw bytes as U8 [bytes] */
void st_add(StWriter *w, const char *name, DType dtype, const Shape *shape, const void *data, int64_t bytes);
void st_add_meta(StWriter *w, const char *key, const char *value);
void st_write(StWriter *w, const char *path); /* frees w */

#endif
