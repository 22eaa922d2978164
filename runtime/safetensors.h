/* safetensors: the format MiniMind's and Hugging Face's tools read: an 8-byte little-endian
 * header size, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
 * then the tensors' bytes. Reading maps the file and trusts none of it: the header length
 * within the file, every entry's fields (a known dtype, a shape of non-negative integers
 * whose element count cannot overflow, offsets inside the data that hold exactly that many
 * elements), no name twice, no two tensors sharing a byte, metadata values strings. A
 * refusal is one line naming the file, the byte and the tensor. Writing goes to a temp
 * file, fsynced and renamed. */
#ifndef MMC_SAFETENSORS_H
#define MMC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "filemap.h"
#include "ir.h"
#include "util.h"

typedef struct StTensor {
    char *name;
    DType dtype;     /* DT_NONE for U8 (raw bytes) */
    Shape shape;
    const unsigned char *data; /* aligned for the dtype */
    int64_t bytes;
    int64_t at;      /* the data's byte offset in the file, for messages */
    void *copy;      /* an aligned copy of the data, where the file's bytes are not aligned */
} StTensor;

typedef struct StFile {
    char *path;
    StTensor *t;
    int n;
    char **meta_keys, **meta_values;
    int n_meta;
    FileMap map;
} StFile;

StFile *st_open(const char *path);
const StTensor *st_find(const StFile *f, const char *name);
const char *st_meta(const StFile *f, const char *key); /* NULL if absent */
void st_close(StFile *f);
/* Closes f and dies with "PATH: message" on one line: a refusal of what a file holds, so
 * that a caller that catches die() (the tests) keeps no mapping. */
MMC_NORETURN void st_refuse(StFile *f, const char *fmt, ...) MMC_PRINTF(2, 3);

typedef struct StWriter StWriter;
StWriter *st_writer(void);
/* data must stay valid until st_write; dtype DT_NONE writes raw bytes as U8 [bytes] */
void st_add(StWriter *w, const char *name, DType dtype, const Shape *shape, const void *data, int64_t bytes);
void st_add_meta(StWriter *w, const char *key, const char *value);
void st_write(StWriter *w, const char *path); /* frees w */

#endif
