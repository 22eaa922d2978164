#!/usr/bin/env bash
# mmc train through a precision schedule and a fallback (runtime/plan_set.h), on graphs/tiny.lua
# on the backend named (ref; cuda from tests/gpu/run.sh):
#  1. schedule { 5 updates fp32, then amp_fp16 }: updates 1-5 are fp32's (the same losses as
#     an fp32 run, scale 1), update 6 enters amp_fp16 at its init scale, and the metrics line
#     says which precision each plan starts with;
#  2. the fallback { overflow_rate = 0.1 over 5 updates, to amp_bf16 }: an inf injected into
#     update 9 makes 1 of 5 overflow, which fires at update 9 for update 12 (the trainer reads
#     each update's state two updates behind), logged once and in metrics;
#  3. a run stopped after updates 3, 5 (the phase boundary), 9, 11 (the fallback boundary) or
#     13 and resumed writes the metrics lines (seconds aside) of the run that went through;
#  4. --no-fallback never falls back; a fixed-scale fallback (to = 256) runs at that scale;
#     --val evaluates under each plan's policy as the run switches.
set -eu
cd "$(dirname "$0")/.."
backend=${1:-ref}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 tests/make_byte_tokens.py README.md "$tmp/text.bin"
cp graphs/tiny.lua graphs/minimind.lua "$tmp/" # beside the graphs, which read below their folder
graph() { # NAME TRAIN-FIELDS: tiny with one more train{} call
  printf 'include "tiny.lua"\ntrain {\n  %s\n}\n' "$2" >"$tmp/$1.lua"
}
graph sched 'schedule = { {updates = 5, policy = "fp32"}, {policy = "amp_fp16"} },
  fallback = { overflow_rate = 0.1, window = 5, to = "amp_bf16" },'
graph fixed 'fallback = { overflow_rate = 0.1, window = 5, to = 256 },'
./mmc compile "$tmp/sched.lua" -o "$tmp/sched" --quiet
./mmc compile "$tmp/fixed.lua" -o "$tmp/fixed" --quiet
./mmc compile graphs/tiny.lua --policy fp32 -o "$tmp/fp32" --quiet
train() { # PLAN OUT FLAGS...: 16 updates, an inf in update 9
  local plan=$1 out=$2; shift 2
  ./mmc train "$tmp/$plan" --backend "$backend" --data "$tmp/text.bin" --steps 16 --inject-inf 9 --out "$tmp/$out" "$@"
}
train sched whole >"$tmp/whole.out" 2>"$tmp/whole.err"
train fp32 fp32 --quiet
for k in 3 5 9 11 13; do
  train sched cut$k --quiet --stop-after $k
  train sched cut$k --quiet --resume "$tmp/cut$k" 2>/dev/null
done
train sched off --quiet --no-fallback
train sched val --quiet --val "$tmp/text.bin" --eval-interval 8 --val-batches 2 2>/dev/null # --val's plan follows the switches
train fixed fixed --quiet 2>/dev/null
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
rows = lambda name: [json.loads(l) for l in open(f"{d}/{name}/metrics.jsonl")]
w, f32 = rows("whole"), rows("fp32")
assert [r["loss"] for r in w[:5]] == [r["loss"] for r in f32[:5]], "the fp32 phase is not an fp32 run"
assert [r["scale"] for r in w[:5]] == [1] * 5 and w[5]["scale"] == 65536, [r["scale"] for r in w[:7]]
assert [(r["update"], r["precision"]) for r in w if "precision" in r] == [(1, "fp32"), (6, "amp_fp16"), (12, "amp_bf16")], w
fired = [r for r in w if "fallback" in r]
assert [(r["update"], r["fallback"], r["fallback_at"]) for r in fired] == [(9, "amp_bf16", 12)], fired
assert all(r["scale"] == 1 for r in w[11:]), [r["scale"] for r in w]  # bf16 scales no loss
strip = lambda r: {k: v for k, v in r.items() if k != "seconds"}
for k in (3, 5, 9, 11, 13):
    c = rows(f"cut{k}")
    assert len(c) == 16 and all(strip(a) == strip(b) for a, b in zip(w, c)), \
        (k, next(((a["update"], strip(a), strip(b)) for a, b in zip(w, c) if strip(a) != strip(b)), len(c)))
v = rows("val")
assert [r["update"] for r in v if "val_loss" in r] == [8, 16] and all(r["val_loss"] > 0 for r in v if "val_loss" in r), v
off = rows("off")
assert not any("fallback" in r for r in off) and off[-1]["scale"] != 1, off[-1]
fx = rows("fixed")
assert [(r["update"], r.get("precision")) for r in fx if "precision" in r] == [(1, "amp_fp16"), (12, "amp_fp16")], fx
assert all(r["scale"] == 256 for r in fx[11:]), [r["scale"] for r in fx]
print("schedule: fp32 then amp_fp16, the fallback to amp_bf16 at update 12, the same lines after a resume at 3, 5, 9, "
      "11 and 13; --no-fallback; a fixed-scale fallback")
PY
grep -q "update 6: phase 2 of 2, amp_fp16" "$tmp/whole.out" || { echo "no phase line:"; cat "$tmp/whole.out"; exit 1; }
[ "$(grep -c "falling back to amp_bf16 from update 12" "$tmp/whole.err")" = 1 ] || { echo "no fallback line:"; cat "$tmp/whole.err"; exit 1; }
echo "test_schedule_train ($backend): all checks passed"
