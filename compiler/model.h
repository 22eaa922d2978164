/* model: what a graph file declares for the runtime beside the graph itself, so that the
 * runtime knows no model by name: which inputs the batches go to (an input's role), the
 * vocabulary and the special ids (model{}), and the fields of the config.json files that a
 * run folder and an export carry (checkpoint_config{}, export_hf{}). The plan carries all of
 * it (README "The plan"). */
#ifndef MMC_MODEL_H
#define MMC_MODEL_H

#include <stdint.h>

#include "dtype.h"

/*        enum     name       dtype  what the runtime writes into an input of the role */
#define MMC_ROLES(X)                                                                             \
    X(TOKENS,  "tokens",  I32, "a batch of token ids [batch, seq]: rows of the token file")      \
    X(TARGETS, "targets", I32, "the ids the loss is taken against: the same rows one token on")

typedef enum Role {
#define X(e, name, dtype, doc) ROLE_##e,
    MMC_ROLES(X)
#undef X
    ROLE_COUNT
} Role;

/*        enum           name             id  what model{} says with it (an id is below vocab) */
#define MMC_MODEL_FIELDS(X)                                                          \
    X(VOCAB,         "vocab",         0, "the token ids the model takes are below it") \
    X(PAD_ID,        "pad_id",        1, "the id that pads a row")                     \
    X(BOS_ID,        "bos_id",        1, "the id a text starts with")                  \
    X(EOS_ID,        "eos_id",        1, "the id a text ends with")                    \
    X(MAX_POSITIONS, "max_positions", 0, "the longest text the model is meant for")

typedef enum ModelField {
#define X(e, name, id, doc) MF_##e,
    MMC_MODEL_FIELDS(X)
#undef X
    MF_COUNT
} ModelField;

/*        enum        name                 key mmc adds   the config.json whose fields they are */
#define MMC_JSON_FILES(X)                                                                                            \
    X(CHECKPOINT, "checkpoint_config", "mmc",         "a run folder's; mmc's own section is \"mmc\"")                \
    X(EXPORT_HF,  "export_hf",         "torch_dtype", "the export --format hf folder's; torch_dtype is its --dtype")

typedef enum JsonFile {
#define X(e, name, added, doc) JF_##e,
    MMC_JSON_FILES(X)
#undef X
    JF_COUNT
} JsonFile;

typedef struct ModelInfo {
    int64_t value[MF_COUNT];
    unsigned given; /* bit f: model{} gave value[f] */
    char *where;    /* the model{} call, or NULL */
} ModelInfo;

/* one config.json field: the value as JSON text with no spaces ("minimind", 512, 1e-05, true,
 * null, ["LlamaForCausalLM"]), so a plan line holds it as key=value */
typedef struct JsonField {
    char *key;
    char *json;
} JsonField;

typedef struct JsonFields {
    JsonField *f; /* sorted by key */
    int n, cap;
    char *where;  /* the call that declared them, or NULL */
} JsonFields;

extern const char *const role_names[ROLE_COUNT + 1];              /* NULL-terminated, for messages */
extern const char *const model_field_names[MF_COUNT + 1];
extern const char *const json_file_names[JF_COUNT + 1];
extern const DType role_dtypes[ROLE_COUNT];
extern const int model_field_is_id[MF_COUNT];
extern const char *const json_file_added_key[JF_COUNT]; /* the key the runtime writes itself */
int role_parse(const char *name);        /* -1 if unknown */
int model_field_parse(const char *name); /* -1 if unknown */
int json_file_parse(const char *name);   /* -1 if unknown */
int model_has(const ModelInfo *m, ModelField f);

#endif
