#!/usr/bin/env bash
# The loss scaler's rule (mmc_scaler_update) against an independent Python model of each
# setting (tests/scaler_model.py), over random overflow sequences; then mmc train's
# --loss-scale-* flags on the backend named (ref, or cuda from tests/gpu/run.sh, which skips
# the model part: it needs the C test built here).
set -eu
cd "$(dirname "$0")/.."
backend=${1:-ref}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [ "$backend" = ref ]; then
  make -s build/tests/test_scaler >/dev/null
  build/tests/test_scaler --trajectories "$tmp/trajectories.jsonl"
  python3 tests/scaler_model.py "$tmp/trajectories.jsonl"
fi

# The same settings from mmc train's command line, on the ref backend: --inject-inf N writes
# an inf into the gradients of update N.
tokens="$tmp/text.bin"
python3 tests/make_byte_tokens.py README.md "$tokens"
./mmc compile graphs/tiny.lua -o "$tmp/tiny" --quiet
run() { # NAME FLAGS...: 6 updates, the metrics in $tmp/NAME/metrics.jsonl, stderr in $tmp/NAME.err
  local name=$1; shift
  ./mmc train "$tmp/tiny" --backend "$backend" --data "$tokens" --steps 6 --quiet --out "$tmp/$name" "$@" 2>"$tmp/$name.err" \
    || { cat "$tmp/$name.err"; exit 1; }
}
run hysteresis --loss-scale-init 4096 --loss-scale-hysteresis 2 --inject-inf 3
run fixed --loss-scale-fixed 1024 --inject-inf 2
run floor --loss-scale-init 64 --loss-scale-min 64 --inject-inf 2
run capped --loss-scale-init 1024 --loss-scale-interval 1 --loss-scale-max 4096
python3 - "$tmp" "$backend" <<'PY'
import json, sys
def rows(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}/metrics.jsonl")]
h = rows("hysteresis")
assert [r["scale"] for r in h] == [4096] * 6, [r["scale"] for r in h]  # one overflow is forgiven
assert h[2]["skipped"] == 1 and h[2]["overflow_streak"] == 1 and h[3]["overflow_streak"] == 0, h[2:4]
f = rows("fixed")
assert [r["scale"] for r in f] == [1024] * 6 and f[-1]["skipped"] == 1, [r["scale"] for r in f]
fl = rows("floor")
assert [r["scale"] for r in fl] == [64] * 6 and fl[1].get("scale_floor") is True and "scale_floor" not in fl[2], fl[:3]
c = rows("capped")
assert [r["scale"] for r in c] == [2048, 4096, 4096, 4096, 4096, 4096], [r["scale"] for r in c]
print(f"mmc train --loss-scale-* ({sys.argv[2]}): hysteresis forgives one overflow, fixed stays, the floor holds and warns, the cap holds")
PY
grep -q "overflowed with the loss scale at its floor (loss_scale min = 64)" "$tmp/floor.err" \
  || { echo "no floor alarm:"; cat "$tmp/floor.err"; exit 1; }
if ./mmc train "$tmp/tiny" --backend ref --data "$tokens" --steps 1 --quiet --loss-scale-min 1e9 2>"$tmp/bad.err"; then
  echo "a floor above the init scale was accepted"; exit 1
fi
grep -q "init 65536 is below min 1e+09" "$tmp/bad.err" || { echo "unexpected message:"; cat "$tmp/bad.err"; exit 1; }
./mmc compile graphs/tiny.lua -o "$tmp/tiny32" --policy fp32 --quiet
if ./mmc train "$tmp/tiny32" --backend ref --data "$tokens" --steps 1 --quiet --loss-scale-init 1024 2>"$tmp/bad32.err"; then
  echo "--loss-scale-init on an fp32 plan was accepted"; exit 1
fi
grep -q "scales no loss" "$tmp/bad32.err" || { echo "unexpected message:"; cat "$tmp/bad32.err"; exit 1; }
echo "test_scaler_model: all checks passed"
