/* export_hf: `mmc export RUN_DIR --format hf -o DIR`. MiniMind's architecture is Llama's
 * (RMSNorm, rotate-half RoPE, grouped-query attention, SwiGLU, tied embeddings) under
 * Llama's state-dict names, so the folder is what transformers'
 * AutoModelForCausalLM.from_pretrained(DIR) loads as LlamaForCausalLM, with no remote code:
 *   config.json             Llama's config, from the run's config.json
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

#include "checkpoint.h"
#include "defaults.h"
#include "util.h"

/* ChatML as MiniMind renders it: a default system turn when the first turn is not one, then
 * <|im_start|>ROLE\nCONTENT<|im_end|>\n a turn, and the assistant's opening on request */
static const char chat_template[] =
    "{%- if messages[0]['role'] == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if not (loop.first and message['role'] == 'system') -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

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
    json_int_t dim = need_int(run, "hidden_size", cfg_path), heads = need_int(run, "num_attention_heads", cfg_path);
    json_int_t vocab = need_int(run, "vocab_size", cfg_path);
    json_int_t bos = need_int(run, "bos_token_id", cfg_path), eos = need_int(run, "eos_token_id", cfg_path);
    json_t *mmc = json_object_get(run, "mmc");
    json_int_t pad = mmc && json_object_get(mmc, "pad_id") ? need_int(mmc, "pad_id", cfg_path) : 0;
    json_int_t seq = mmc && json_object_get(mmc, "seq") ? need_int(mmc, "seq", cfg_path) : 512;

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
    json_t *c = json_object();
    json_object_set_new(c, "architectures", json_pack("[s]", "LlamaForCausalLM"));
    json_object_set_new(c, "model_type", json_string("llama"));
    static const char *const same[] = {"hidden_size",  "intermediate_size", "num_hidden_layers", "num_attention_heads",
                                       "num_key_value_heads", "vocab_size", "rms_norm_eps",      "rope_theta",
                                       "tie_word_embeddings", "hidden_act", NULL};
    for (int k = 0; same[k]; k++) json_object_set(c, same[k], need(run, same[k], cfg_path));
    json_object_set_new(c, "head_dim", json_integer(dim / heads));
    json_object_set_new(c, "max_position_embeddings", json_integer(seq > 32768 ? seq : 32768));
    json_object_set_new(c, "attention_bias", json_false());
    json_object_set_new(c, "mlp_bias", json_false());
    json_object_set_new(c, "attention_dropout", json_real(0.0));
    json_object_set_new(c, "rope_scaling", json_null());
    json_object_set_new(c, "bos_token_id", json_integer(bos));
    json_object_set_new(c, "eos_token_id", json_integer(eos));
    json_object_set_new(c, "pad_token_id", json_integer(pad));
    json_object_set_new(c, "torch_dtype", json_string(dtype_torch_name(dtype)));
    json_object_set_new(c, "use_cache", json_true());
    checkpoint_write_json(out_dir, "config.json", c);

    json_t *g = json_object();
    json_object_set_new(g, "bos_token_id", json_integer(bos));
    json_object_set_new(g, "eos_token_id", json_integer(eos));
    json_object_set_new(g, "pad_token_id", json_integer(pad));
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
    json_object_set_new(tc, "bos_token", json_string(token_content(tok, bos, tok_name)));
    json_object_set_new(tc, "eos_token", json_string(token_content(tok, eos, tok_name)));
    json_object_set_new(tc, "pad_token", json_string(token_content(tok, pad, tok_name)));
    json_object_set_new(tc, "unk_token", json_string(token_content(tok, pad, tok_name)));
    json_object_set_new(tc, "model_max_length", json_integer(32768));
    json_object_set_new(tc, "clean_up_tokenization_spaces", json_false());
    json_object_set_new(tc, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    json_object_set_new(tc, "chat_template", json_string(chat_template));
    checkpoint_write_json(out_dir, "tokenizer_config.json", tc);

    printf("export: %s, a LlamaForCausalLM folder (%s weights, %s)\n", out_dir, dtype_torch_name(dtype), tok_name);
    json_decref(tok), json_decref(run);
    free(tok_text), free(cfg_path), free(model), free(model_out), free(tok_out), free(kept);
}
