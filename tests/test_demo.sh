#!/usr/bin/env bash
# `make demo`'s CPU path, shortened to 20 updates (tools/demo.sh with DEMO_STEPS): the data
# and its validation split, the banner, training with the validation loss every tenth of the
# run, the checkpoint and tokenizer in the run folder, the plot, and text from two prompts.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then echo "a GPU here: the demo takes its GPU path (not this test's)"; exit 0; fi
DEMO_STEPS=20 DEMO_OUT="$tmp/demo" bash tools/demo.sh >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
grep -q "^== make demo: graphs/tiny.lua on the CPU" "$tmp/log" || { echo "no CPU banner"; fail=1; }
grep -q "^mmc train: build/demo/plan made again with lr=3e-3 (graph tiny, policy amp_fp16) | .* parameters | build/demo/data.bin: [0-9]* rows of seq 32 | 20 updates" "$tmp/log" \
  || { echo "no train banner"; fail=1; }
[ "$(grep -c '^Eval(' "$tmp/log")" -eq 10 ] || { echo "want 10 evaluations"; fail=1; }
grep -q "^Epoch\[1/1\](20/20) loss [0-9.]* val [0-9.]* lr" "$tmp/log" || { echo "no progress line with the validation loss"; fail=1; }
grep -q "^eval: build/demo/data.val.bin, 20 batches of 4 rows, .* targets: loss" "$tmp/log" || { echo "no mmc eval line"; fail=1; }
for f in model.safetensors resume.safetensors config.json tokenizer.json metrics.jsonl curves.png; do
  [ -s "$tmp/demo/$f" ] || { echo "the run folder has no $f"; fail=1; }
done
[ "$(grep -c '^床前明月光\|^人生' "$tmp/log")" -ge 2 ] || { echo "no generated text"; fail=1; }
[ $fail -eq 0 ] && echo "make demo (CPU, 20 updates): banner, 10 evaluations, checkpoint, plot, text from 2 prompts"
[ $fail -eq 0 ] || cat "$tmp/log"
exit $fail
