-- MiniMind's second stage, supervised fine-tuning (its trainer/train_full_sft.py): the model
-- of graphs/minimind.lua with the stage's settings, started from the pretrained weights.
--   ./mmc data --sft sft_mini_512.jsonl --tokenizer tokenizer.json --seq 512 -o sft.bin --val 0.01
--   ./mmc compile graphs/minimind_sft.lua -o build/sft
--   ./mmc train build/sft --data sft.bin --val sft.val.bin --init runs/pretrain/model.safetensors --out runs/sft
include "minimind.lua"
train {
  optimizer = adamw { lr = 1e-5 }, -- train_full_sft.py's --learning_rate, a twentieth of pretraining's
  loss_scale = { init = 32768 },   -- fp16 fine-tuning starts its scaler one step lower
  epochs = 2,                      -- its --epochs
}
