/* export_hf: `mmc export RUN_DIR --format hf -o DIR`: a folder that transformers'
 * AutoModelForCausalLM.from_pretrained(DIR) loads, from the run folder alone. What the model
 * is to transformers is the graph file's to say, and its config.json saves it under "mmc":
 * the export_hf{} fields and model{}'s vocabulary and ids. The weights keep the run's names,
 * so a graph file that declares an architecture names its parameters as that architecture
 * does (graphs/minimind.lua: MiniMind's, which are Llama's):
 *   config.json             the export_hf{} fields, and torch_dtype: the export dtype
 *   model.safetensors       the weights in the export dtype
 *   tokenizer.json          the tokenizer the data was made with (--tokenizer, else the run
 *                           folder's, else the built-in one)
 *   tokenizer_config.json   its special tokens and the ChatML chat template
 *   generation_config.json  the bos, eos and pad ids
 * Every file is written to a temp file, fsynced and renamed. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_template.h"
#include "checkpoint.h"
#include "defaults.h"
#include "util.h"

static json_t *need(json_t *o, const char *key, const char *file) {
    json_t *v = json_object_get(o, key);
    if (!v) die("export: %s has no \"%s\"", file, key);
    return v;
}

static json_int_t need_int(json_t *o, const char *key, const char *file) {
    json_t *v = need(o, key, file);
    if (!json_is_number(v)) die("export: %s: \"%s\" is not a number", file, key);
    return (json_int_t)json_number_value(v);
}

/* the content of the added token with this id, from tokenizer.json */
static const char *token_content(json_t *tok, json_int_t id, const char *file) {
    json_t *added = json_object_get(tok, "added_tokens");
    size_t i;
    json_t *t;
    json_array_foreach(added, i, t) {
        if (json_integer_value(json_object_get(t, "id")) == id && json_is_string(json_object_get(t, "content")))
            return json_string_value(json_object_get(t, "content"));
    }
    die("export: %s has no special token with id %lld (the model's config names it)", file, (long long)id);
}

static const char *dtype_torch_name(DType t) {
    switch (t) {
    case DT_F16: return "float16";
    case DT_BF16: return "bfloat16";
    case DT_F64: return "float64";
    default: return "float32";
    }
}

void export_hf(const char *run_dir, const char *out_dir, DType dtype, const char *tokenizer_path) {
    char *cfg_path = path_join(run_dir, "config.json"), *model = path_join(run_dir, "model.safetensors");
    json_error_t err;
    json_t *run = json_load_file(cfg_path, 0, &err);
    if (!run) die("export: %s:%d: %s", cfg_path, err.line, err.text);
    json_t *mmc = json_object_get(run, "mmc");
    json_t *fields = json_object_get(mmc, "export_hf"), *ids = json_object_get(mmc, "model");
    if (!json_is_object(fields))
        die("export: %s has no \"mmc\": {\"export_hf\": ...}: the run's graph declares no export_hf { ... } (or an "
            "older mmc saved the run)", cfg_path);
    if (!json_is_object(ids)) die("export: %s has no \"mmc\": {\"model\": ...}: an older mmc saved the run", cfg_path);
    json_int_t vocab = need_int(ids, "vocab", cfg_path);

    /* the tokenizer: --tokenizer, else the run's own (train keeps the one its data was made
     * with), else the built-in one; its ids must fit the model's vocabulary */
    char *kept = path_join(run_dir, "tokenizer.json");
    if (!tokenizer_path && access(kept, R_OK) == 0) tokenizer_path = kept;
    const char *tok_name = tokenizer_path && strcmp(tokenizer_path, "default") ? tokenizer_path : "the built-in tokenizer";
    char *tok_text = NULL;
    if (tokenizer_path && strcmp(tokenizer_path, "default")) {
        size_t len = 0;
        tok_text = try_read_file(tokenizer_path, &len);
        if (!tok_text) die("export: --tokenizer %s: cannot read it", tokenizer_path);
    } else {
        tok_text = xstrdup(default_tokenizer_json());
    }
    json_t *tok = json_loads(tok_text, 0, &err);
    if (!tok) die("export: %s:%d: %s", tok_name, err.line, err.text);
    json_t *vocab_map = json_object_get(json_object_get(tok, "model"), "vocab");
    json_int_t top = -1;
    const char *key;
    json_t *v;
    json_object_foreach(vocab_map, key, v) if (json_integer_value(v) > top) top = json_integer_value(v);
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(tok, "added_tokens"), i, t) if (json_integer_value(json_object_get(t, "id")) > top)
        top = json_integer_value(json_object_get(t, "id"));
    if (top < 0) die("export: %s has no vocabulary", tok_name);
    if (top >= vocab)
        die("export: %s has ids up to %lld but the model's vocabulary is %lld: give the tokenizer the data was made with "
            "(--tokenizer FILE)",
            tok_name, (long long)top, (long long)vocab);

    make_dirs(out_dir);
    /* the fields come sorted by key, as transformers writes a config.json: torch_dtype goes
     * where it sorts */
    json_t *c = json_object();
    const char *torch_dtype = dtype_torch_name(dtype);
    int placed = 0;
    json_object_foreach(fields, key, v) {
        if (!placed && strcmp(key, "torch_dtype") > 0)
            json_object_set_new(c, "torch_dtype", json_string(torch_dtype)), placed = 1;
        json_object_set(c, key, v);
    }
    if (!placed) json_object_set_new(c, "torch_dtype", json_string(torch_dtype));
    checkpoint_write_json(out_dir, "config.json", c);

    /* model{}'s ids, where the model has them, under Hugging Face's names */
    static const struct {
        const char *ours, *generation, *token;
    } special[] = {{"bos_id", "bos_token_id", "bos_token"}, {"eos_id", "eos_token_id", "eos_token"},
                   {"pad_id", "pad_token_id", "pad_token"}};
    json_t *g = json_object();
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++) {
        json_t *id = json_object_get(ids, special[k].ours);
        if (id) json_object_set(g, special[k].generation, id);
    }
    checkpoint_write_json(out_dir, "generation_config.json", g);

    char *model_out = path_join(out_dir, "model.safetensors");
    checkpoint_export(model, model_out, dtype);

    char *tok_out = path_join(out_dir, "tokenizer.json");
    write_file_atomic(tok_out, tok_text, strlen(tok_text));
    json_t *tc = json_object();
    json_object_set_new(tc, "add_bos_token", json_false());
    json_object_set_new(tc, "add_eos_token", json_false());
    json_t *decoder = json_object();
    json_array_foreach(json_object_get(tok, "added_tokens"), i, t) {
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(t, "id")));
        json_t *e = json_deep_copy(t);
        json_object_del(e, "id");
        json_object_set_new(decoder, id, e);
    }
    json_object_set_new(tc, "added_tokens_decoder", decoder);
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
        if (json_object_get(ids, special[k].ours)) {
            json_int_t id = need_int(ids, special[k].ours, cfg_path);
            json_object_set_new(tc, special[k].token, json_string(token_content(tok, id, tok_name)));
            /* a byte-level BPE meets no unknown text, but transformers wants an unk_token: the
             * padding stands in, as in MiniMind's tokenizer_config */
            if (!strcmp(special[k].ours, "pad_id")) json_object_set_new(tc, "unk_token", json_string(token_content(tok, id, tok_name)));
        }
    json_t *max_positions = json_object_get(ids, "max_positions");
    if (max_positions) json_object_set(tc, "model_max_length", max_positions);
    json_object_set_new(tc, "clean_up_tokenization_spaces", json_false());
    json_object_set_new(tc, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    json_object_set_new(tc, "chat_template", json_string(chat_template_mmc));
    checkpoint_write_json(out_dir, "tokenizer_config.json", tc);

    json_t *arch = json_array_get(json_object_get(fields, "architectures"), 0);
    printf("export: %s, a Hugging Face folder of %s (%s weights, %s)\n", out_dir,
           json_is_string(arch) ? json_string_value(arch) : "the model", torch_dtype, tok_name);
    json_decref(tok), json_decref(run);
    free(tok_text), free(cfg_path), free(model), free(model_out), free(tok_out), free(kept);
}
