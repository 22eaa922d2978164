#!/usr/bin/env bash
# mmc train's monitoring (runtime/monitor.h) on graphs/tiny.lua, on the backend named (ref;
# cuda from tests/gpu/run.sh):
#  1. the skip rate of each log interval: an inf injected into update 7 shows as 1 of the 5
#     updates of the interval 6..10, and 0 elsewhere, in metrics.jsonl and in the log line;
#  2. underflow: a fixed loss scale of 2^-30 makes every f16 weight gradient 0 (the smallest
#     f16 is 2^-24), so the norm alarm and the per-tensor zero shares (1 for each tensor with
#     an f16 gradient, none for the f32 embedding's) say so; at scale 65536 there is none;
#  3. a loss spike: 100 updates on one repeated sentence, then random bytes: the first update
#     on random bytes is flagged, none before it;
#  4. a run stopped at update 57 and resumed writes the metrics lines (seconds aside) of the
#     run that went through: the interval and the loss window are rebuilt from the file.
set -eu
cd "$(dirname "$0")/.."
backend=${1:-ref}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 tests/make_byte_tokens.py README.md "$tmp/text.bin"
./mmc compile graphs/tiny.lua -o "$tmp/tiny" --quiet
train() { # NAME FLAGS...: metrics in $tmp/NAME/metrics.jsonl, stdout in $tmp/NAME.out, stderr in $tmp/NAME.err
  local name=$1; shift
  ./mmc train "$tmp/tiny" --backend "$backend" --out "$tmp/$name" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" \
    || { cat "$tmp/$name.out" "$tmp/$name.err"; exit 1; }
}
train skips --data "$tmp/text.bin" --steps 12 --log-interval 5 --inject-inf 7
train underflow --data "$tmp/text.bin" --steps 3 --loss-scale-fixed 9.313225746154785e-10
train healthy --data "$tmp/text.bin" --steps 3
python3 - "$tmp/spike.txt" <<'PY'
import random, sys
rnd = random.Random(5)
row = 33  # tiny's seq 32 + 1
text = ("the quick brown fox jumps over the lazy dog. " * 400)[:100 * 4 * row]  # 100 updates of 4 rows
text += "".join(chr(rnd.randrange(33, 127)) for _ in range(20 * 4 * row))     # then 20 of noise
open(sys.argv[1], "w").write(text)
PY
python3 tests/make_byte_tokens.py "$tmp/spike.txt" "$tmp/spike.bin"
train spike --data "$tmp/spike.bin" --steps 104 --log-interval 25
train cut --data "$tmp/spike.bin" --steps 104 --log-interval 25 --stop-after 57
train cut --data "$tmp/spike.bin" --steps 104 --log-interval 25 --resume "$tmp/cut"
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
rows = lambda name: [json.loads(l) for l in open(f"{d}/{name}/metrics.jsonl")]
s = rows("skips")
ends = {r["update"]: (r["interval_updates"], r["interval_skipped"], r["skip_rate"]) for r in s if "skip_rate" in r}
assert ends == {5: (5, 0, 0), 10: (5, 1, 0.2), 12: (2, 0, 0)}, ends
u = rows("underflow")
assert all(r.get("underflow") is True for r in u), u
share = u[-1]["zero_share"]
assert share and all(v == 1 for v in share.values()), share
assert not any("embed" in k for k in share), share  # the embedding's gradient is f32 from the start
h = rows("healthy")
assert not any("underflow" in r for r in h) and all(v < 0.25 for v in h[-1]["zero_share"].values()), h[-1]
sp = rows("spike")
flagged = [r["update"] for r in sp if r.get("loss_spike")]
assert flagged and flagged[0] == 101, flagged
a, b = rows("spike"), rows("cut")
strip = lambda r: {k: v for k, v in r.items() if k != "seconds"}
assert len(a) == len(b) == 104 and all(strip(x) == strip(y) for x, y in zip(a, b)), \
    next((strip(x), strip(y)) for x, y in zip(a, b) if strip(x) != strip(y))
print("metrics: skip rate per interval, underflow with zero shares, the loss spike at update 101, the same lines after a resume")
PY
grep -q "skipped 1 (1 of the last 5, 20.0%)" "$tmp/skips.out" || { echo "no skip rate in the log line:"; cat "$tmp/skips.out"; exit 1; }
grep -q "the gradient norm is 0, below 1e-05" "$tmp/underflow.err" || { echo "no underflow alarm:"; cat "$tmp/underflow.err"; exit 1; }
[ "$(grep -c "underflow\|spiked" "$tmp/healthy.err" || true)" = 0 ] || { echo "an alarm on a healthy run:"; cat "$tmp/healthy.err"; exit 1; }
grep -q "update 101: the loss spiked" "$tmp/spike.err" || { echo "no spike alarm:"; cat "$tmp/spike.err"; exit 1; }
echo "test_monitor ($backend): all checks passed"
