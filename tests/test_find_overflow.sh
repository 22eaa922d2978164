#!/usr/bin/env bash
# mmc train --find-overflow on the ref backend (or the one named): in a small model whose `blowup` multiplies
# an f16 projection by 1e7 (past f16's 65504), the first update overflows and the finder
# names `blowup`, its graph file line, its kernel and what it read, also when blowup is fused
# into one kernel with the op after it (the kernel stores only that op's value, so only the
# op-by-op re-run on the ref backend can name blowup). An overflow that does not come back
# (an inf written into the gradients by --inject-inf) is reported as such.
set -eu
cd "$(dirname "$0")/.."
backend=${1:-ref} # tests/gpu/run.sh runs it on cuda
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 tests/make_byte_tokens.py README.md "$tmp/t.bin" --row-length 9
graph() { # NAME EXPRESSION: the model with `big` made by EXPRESSION
  cat >"$tmp/$1.lua" <<LUA
local ids = input("ids", {2, 8}, "i32", { role = "tokens" })
local labels = input("labels", {2, 8}, "i32", { role = "targets" })
model { vocab = 320, pad_id = 0 }
local emb = param("emb", {320, 16}, init.fan_in)
local x = embedding(emb, ids, { name = "embed" })
local h = linear(x, param("w", {16, 16}, init.fan_in), { name = "proj" })
local big = $2
local logits = linear(big, param("out", {320, 16}, init.fan_in), { name = "head" })
loss(cross_entropy(logits, labels, { ignore = 0, name = "loss" }))
precision "amp_fp16"
train { optimizer = adamw { lr = 1e-3 } }
LUA
  ./mmc compile "$tmp/$1.lua" -o "$tmp/$1" --quiet
}
graph alone 'scale(h, 1e7, { name = "blowup" })'
graph fused 'add(scale(h, 1e7, { name = "blowup" }), h, { name = "act" })'
for name in alone fused; do
  ./mmc train "$tmp/$name" --backend "$backend" --data "$tmp/t.bin" --steps 3 --quiet --find-overflow --out "$tmp/run_$name" \
    >"$tmp/$name.log"
  cat "$tmp/$name.log"
  grep -q "the first op whose value is not finite: blowup (scale, f16) at $tmp/$name.lua:7, in kernel k0" "$tmp/$name.log"
  grep -q "it read proj (f16), max |x|" "$tmp/$name.log"
done
grep -q "the kernel stores act, which is not finite either" "$tmp/fused.log"
python3 - "$tmp/run_fused/overflow.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["update"] == 1 and r["found"] and r["node"] == "blowup" and r["op"] == "scale", r
assert r["where"].endswith("fused.lua:7") and r["inputs"][0]["name"] == "proj" and 0 < r["inputs"][0]["max_abs"] < 10, r
PY
# training goes on after the report, and the run matches one without the finder
./mmc train "$tmp/fused" --backend "$backend" --data "$tmp/t.bin" --steps 3 --quiet --out "$tmp/plain" >/dev/null
cmp <(python3 -c 'import json,sys; [print(json.loads(l)["skipped"], json.loads(l)["scale"]) for l in open(sys.argv[1])]' "$tmp/plain/metrics.jsonl") \
    <(python3 -c 'import json,sys; [print(json.loads(l)["skipped"], json.loads(l)["scale"]) for l in open(sys.argv[1])]' "$tmp/run_fused/metrics.jsonl")
# cross-entropy's gradient, which its kernel writes over the logits (pass_memplan), overflows:
# one counted target a batch under a scale of 2^17 makes d = -scale / kept past f16's range.
# The re-run reads the logits as they were before the kernel, not what it wrote over them.
graph ce 'h'
python3 - "$tmp/one.bin" <<'PY'
import array, struct, sys
ids = array.array("H", [1, 40, 0, 0, 0, 0, 0, 0, 0] + [0] * 9) * 8  # rows of 9: one counted target in two rows
header = b"mmctoken" + struct.pack("<IIQII", 1, 320, len(ids), 9, 0) + bytes(32)
open(sys.argv[1], "wb").write(header + ids.tobytes())
PY
./mmc train "$tmp/ce" --backend "$backend" --data "$tmp/one.bin" --steps 2 --quiet --find-overflow --loss-scale-init 131072 \
  --out "$tmp/run_ce" >"$tmp/ce.log"
cat "$tmp/ce.log"
grep -q "the first op whose value is not finite: d:head (cross_entropy_backward, f16)" "$tmp/ce.log"
python3 - "$tmp/run_ce/overflow.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
logits = [i for i in r["inputs"] if i["name"] == "head"]
assert r["found"] and r["op"] == "cross_entropy_backward" and logits and 0 < logits[0]["max_abs"] < 100, r
PY
./mmc compile graphs/tiny.lua -o "$tmp/tiny" --quiet
python3 tests/make_byte_tokens.py README.md "$tmp/t33.bin" --row-length 33
./mmc train "$tmp/tiny" --backend "$backend" --data "$tmp/t33.bin" --steps 3 --quiet --find-overflow --inject-inf 2 >"$tmp/inj.log"
grep -q "update 2 overflowed" "$tmp/inj.log" && grep -q "every value stayed finite this time" "$tmp/inj.log"
echo "test_find_overflow: all checks passed"
