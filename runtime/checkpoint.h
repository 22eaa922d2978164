/* checkpoint: what a run leaves in its --out folder and reads back.
 *   model.safetensors   master weights under MiniMind's state-dict names (a tied weight under
 *                       both of its names), loadable by MiniMind's PyTorch code;
 *   config.json         the fields the graph file's checkpoint_config{} gives (MiniMind's
 *                       config), and under "mmc" the plan's graph, policy, settings, model{}
 *                       and export_hf{} fields;
 *   resume.safetensors  AdamW's moments, the step state and the data position, so that
 *                       --resume continues bit for bit.
 * The three are one set, DIR/ckpt-NNNNNNN with checkpoint.json (the update, the plan's hash
 * and each file's SHA-256), committed by renaming the set into place and naming it in
 * DIR/latest; the top-level files are hard links to the latest set's. */
#ifndef MMC_CHECKPOINT_H
#define MMC_CHECKPOINT_H

#include <jansson.h>
#include <stdint.h>

#include "backend.h"

typedef struct RunPosition {
    int64_t rows;      /* data rows consumed */
    uint64_t seed;     /* initial weights */
    uint64_t shuffle;  /* 0: file order */
    char data_sha256[65]; /* the token file trained on ("" if not recorded) */
    char data_file[256];  /* its name, for messages */
} RunPosition;

/* commits the backend's weights, moments and step state as DIR's latest set, and removes the
 * older sets */
void checkpoint_save(Backend *b, const char *dir, const RunPosition *pos);
/* What a killed run left in DIR: temp files, sets never committed, sets older than the latest;
 * the top-level files made the latest set's again. replace: the run's checkpoint goes too
 * (--force onto a folder). */
void checkpoint_tidy(const char *dir, int replace);
/* The folder of DIR's latest set, checked against its checkpoint.json (update, plan hash,
 * each file's SHA-256), or DIR itself for a folder from before sets; either way the model file
 * must be of the resume file's update and plan. *update: the model file's update (-1 where a
 * file from before sets does not say). Dies saying what does not belong. */
char *checkpoint_committed(const char *dir, const char *plan_hash, int64_t *update);
/* weights by name from a safetensors file (MiniMind's names; of a tied weight either key or
 * both); a missing, extra or misshapen tensor is named in the error */
void checkpoint_load_weights(Backend *b, const char *path);
/* model.safetensors and resume.safetensors of a run folder; returns its position. The step
 * state is checked against `saved_by`, the plan that made it (b's, or, for a run that goes
 * from plan to plan, the one of the last update done: plan_set.h), or NULL for b's. */
RunPosition checkpoint_resume(Backend *b, const char *dir, const Plan *saved_by);
/* writes the weights of a run's model.safetensors in another dtype (f16: what MiniMind's
 * torch.save files hold) */
void checkpoint_export(const char *model_path, const char *out_path, DType dtype);
/* DIR/NAME: the JSON, indented, in key order, written atomically; takes the reference */
void checkpoint_write_json(const char *dir, const char *name, json_t *j);
/* a run as a Hugging Face folder that transformers loads as LlamaForCausalLM (export_hf.c);
 * tokenizer: a tokenizer.json path, "default" for the built-in one, or NULL for the run's own
 * (else the built-in one) */
void export_hf(const char *run_dir, const char *out_dir, DType dtype, const char *tokenizer);

#endif
