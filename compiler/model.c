/* model: the names of the roles, model{} fields and config.json files (see model.h). */
#include "model.h"

#include <stddef.h>
#include <string.h>

#include "util.h"

const char *const role_names[ROLE_COUNT + 1] = {
#define X(e, name, dtype, doc) name,
    MMC_ROLES(X)
#undef X
    NULL};

const char *const model_field_names[MF_COUNT + 1] = {
#define X(e, name, id, doc) name,
    MMC_MODEL_FIELDS(X)
#undef X
    NULL};

const char *const json_file_names[JF_COUNT + 1] = {
#define X(e, name, added, doc) name,
    MMC_JSON_FILES(X)
#undef X
    NULL};

const DType role_dtypes[ROLE_COUNT] = {
#define X(e, name, dtype, doc) DT_##dtype,
    MMC_ROLES(X)
#undef X
};

const int model_field_is_id[MF_COUNT] = {
#define X(e, name, id, doc) id,
    MMC_MODEL_FIELDS(X)
#undef X
};

const char *const json_file_added_key[JF_COUNT] = {
#define X(e, name, added, doc) added,
    MMC_JSON_FILES(X)
#undef X
};

int role_parse(const char *name) { return word_index(role_names, name); }
int model_field_parse(const char *name) { return word_index(model_field_names, name); }
int json_file_parse(const char *name) { return word_index(json_file_names, name); }
int model_has(const ModelInfo *m, ModelField f) { return (m->given >> f) & 1; }
