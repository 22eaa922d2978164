#!/usr/bin/env bash
# `mmc generate` on the CPU: from a run folder (the tiny graph at the built-in tokenizer's
# vocabulary, trained a few updates), greedy decoding repeats itself, top-k 1 is greedy at
# any temperature, a seed repeats a sampled text, the printed text is the prompt and then
# what the ids decode to, a window longer than the plan's seq slides, and the weights file
# inside the run folder works as the folder does. Bad input is refused with one message.
# (Greedy tokens equal to Hugging Face's are tests/gpu/test_hf_export.sh, which has torch.)
set -u
cd "$(dirname "$0")/.."
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
./mmc compile graphs/tiny.lua -D vocab=6400 -o "$tmp/plan" --quiet || exit 1
./mmc data --default --seq 32 --pack -o "$tmp/small.bin" >/dev/null || exit 1
./mmc train "$tmp/plan" --backend ref --data "$tmp/small.bin" --steps 30 --quiet --out "$tmp/run" || exit 1
gen() { ./mmc generate "$@" --backend ref --quiet; }
gen "$tmp/run" --prompt "床前明月光" --max-new-tokens 12 --greedy --ids >"$tmp/g1" || fail=1
gen "$tmp/run" --prompt "床前明月光" --max-new-tokens 12 --greedy --ids >"$tmp/g2" || fail=1
gen "$tmp/run/model.safetensors" --prompt "床前明月光" --max-new-tokens 12 --greedy --ids >"$tmp/g3" || fail=1
gen "$tmp/run" --prompt "床前明月光" --max-new-tokens 12 --top-k 1 --temperature 1.7 --ids >"$tmp/k1" || fail=1
cmp -s "$tmp/g1" "$tmp/g2" || { echo "greedy decoding differs between two runs"; fail=1; }
cmp -s "$tmp/g1" "$tmp/g3" || { echo "the run folder and its model.safetensors generate different text"; fail=1; }
cmp -s "$tmp/g1" "$tmp/k1" || { echo "--top-k 1 is not greedy"; fail=1; }
for s in 1 1 2; do
  gen "$tmp/run" --prompt "春眠不觉晓" --max-new-tokens 16 --temperature 0.9 --top-p 0.9 --seed $s --ids >"$tmp/s$s.$RANDOM" || fail=1
done
[ "$(cat "$tmp"/s1.* | sort | uniq | wc -l)" -eq 2 ] || { echo "--seed 1 twice gave two texts"; fail=1; }
# the window slides past the plan's seq (32): 6 prompt tokens and 40 new ones
gen "$tmp/run" --prompt "床前明月光" --max-new-tokens 40 --greedy --ignore-eos --ids >"$tmp/long" || fail=1
python3 - "$tmp" <<'PY' || fail=1
import subprocess, sys
d = sys.argv[1]
def run(*args):
    return subprocess.run(["./mmc", "tokenizer", *args], capture_output=True, text=True, check=True).stdout.rstrip("\n")
def ids_of(name):
    text, ids = open(f"{d}/{name}").read().split("\nids: ")
    return text, [int(x) for x in ids.split()]
prompt = [int(x) for x in run("encode", "default", "床前明月光").split()]
text, ids = ids_of("g1")
assert ids[:1 + len(prompt)] == [1] + prompt, ids  # <|im_start|> first, as every row of mmc data starts
assert len(ids) <= 1 + len(prompt) + 12, ids
assert text == "床前明月光" + run("decode", "default", *map(str, ids[1 + len(prompt):]), "--skip-special"), text
_, long_ids = ids_of("long")
assert len(long_ids) == 1 + len(prompt) + 40, long_ids  # past the seq of 32: the window slid
print(f"generate: greedy {len(ids) - 1 - len(prompt)} tokens repeat; top-k 1 is greedy; a seed repeats; "
      f"the window slides ({len(long_ids)} ids, seq 32)")
PY
# bad input: one message each, a non-zero exit
check() {
  local want=$1; shift
  if ./mmc generate "$@" --backend ref >"$tmp/out" 2>"$tmp/err"; then echo "accepted: $*"; fail=1
  elif ! grep -q -- "$want" "$tmp/err"; then echo "for $*: wanted '$want', got: $(cat "$tmp/err")"; fail=1; fi
}
check "usage: mmc generate" "$tmp/run"
check "--top-p 1.5: in (0, 1]" "$tmp/run" --prompt x --top-p 1.5
check "--max-new-tokens needs a positive integer" "$tmp/run" --prompt x --max-new-tokens 0
check "unknown option --top-kk; did you mean --top-k?" "$tmp/run" --prompt x --top-kk 3
check "no such run folder or weights file" "$tmp/none" --prompt x
cp "$tmp/run/model.safetensors" "$tmp/w.safetensors"
check "names the graph: give it with --graph FILE" "$tmp/w.safetensors" --prompt x
gen "$tmp/w.safetensors" --graph graphs/tiny.lua -D vocab=6400 --prompt "床前明月光" --max-new-tokens 12 --greedy --ids >"$tmp/g4" || fail=1
cmp -s "$tmp/g1" "$tmp/g4" || { echo "weights with --graph and -D generate other text than their run folder"; fail=1; }
exit $fail
