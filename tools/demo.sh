#!/usr/bin/env bash
# `make demo`: the main job on this machine, from the built-in corpus to generated text.
#  - data: the built-in fortunes-zh corpus (poems, song lyrics, sayings), tokenized with the
#    built-in tokenizer, packed at the model's seq, with a validation split (5%, on a GPU 10%:
#    a batch of 64 rows of 512);
#  - on a GPU: MiniMind2-small (graphs/minimind.lua, amp_fp16), DEMO_STEPS updates (600: the corpus is 883 rows of 512, so 43 epochs);
#    without one: the tiny graph at the built-in tokenizer's vocabulary on the CPU (the ref
#    backend) at lr 3e-3, DEMO_STEPS updates (400, about two minutes on two cores);
#  - the validation loss every tenth of the run, shuffled rows, a checkpoint at the end;
#  - then the final weights' validation loss (mmc eval), a plot of the run (RUN/curves.png)
#    and text generated from two prompts.
# The run goes to DEMO_OUT (runs/demo), replacing an earlier demo's.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DEMO_OUT:-runs/demo}
work=build/demo
mkdir -p "$work"
if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  where="on the GPU ($(nvidia-smi -L | head -1 | sed 's/^GPU 0: //; s/ (UUID.*//'))"
  graph=graphs/minimind.lua; defines=(); backend=cuda; seq=512; steps=${DEMO_STEPS:-600}; lr=(); val=0.1
else
  where="on the CPU (no GPU here), the tiny graph"
  graph=graphs/tiny.lua; defines=(-D vocab=6400); backend=ref; seq=32; steps=${DEMO_STEPS:-400}; lr=(--lr 3e-3); val=0.05
fi
echo "== make demo: $graph $where, $steps updates"
./mmc data --default --seq $seq --pack --val $val -o "$work/data.bin"
./mmc compile "$graph" "${defines[@]}" -o "$work/plan" --quiet
every=$(( steps / 10 > 0 ? steps / 10 : 1 ))
[ -e "$out" ] && echo "(replacing the earlier demo run in $out)"
./mmc train "$work/plan" --backend $backend --data "$work/data.bin" --val "$work/data.val.bin" --eval-interval $every \
  --val-batches 20 --log-interval $every --shuffle 1 --steps "$steps" "${lr[@]}" --out "$out" --force
./mmc eval "$out" --backend $backend --data "$work/data.val.bin" --batches 20
if command -v gnuplot >/dev/null; then
  ./mmc plot "$out" -o "$out/curves.png"
else
  echo "(no gnuplot here: sudo apt-get install gnuplot-nox for $out/curves.png)"
fi
for prompt in "床前明月光" "人生"; do
  ./mmc generate "$out" --backend $backend --prompt "$prompt" --max-new-tokens 48 --temperature 0.8 --top-p 0.9
done
echo "== the run is in $out: ./mmc generate $out --prompt TEXT, ./mmc export $out --format hf -o DIR"
