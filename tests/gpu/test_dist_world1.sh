#!/usr/bin/env bash
# Data parallelism's step on one GPU: MMC_NCCL_WORLD1=1 runs mmc train as a job of one rank
# (runtime/train_dist.h), through the rendezvous, a one-rank NCCL communicator and the
# all-reduce of the gradients at the start of each captured update phase. Averaging over one
# rank changes nothing, so the metrics (seconds aside) equal the ordinary run's, bit for bit,
# over 30 updates with an overflow injected, and through a precision schedule (the all-reduce
# follows the switch of plans).
set -eu
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 tests/make_byte_tokens.py README.md "$tmp/text.bin"
./mmc compile graphs/tiny.lua -o "$tmp/tiny" --quiet
cp graphs/tiny.lua graphs/minimind.lua "$tmp/"
printf 'include "tiny.lua"\ntrain { schedule = { {updates = 10, policy = "fp32"}, {policy = "amp_fp16"} } }\n' >"$tmp/sched.lua"
./mmc compile "$tmp/sched.lua" -o "$tmp/sched" --quiet
for plan in tiny sched; do
  ./mmc train "$tmp/$plan" --backend cuda --data "$tmp/text.bin" --steps 30 --inject-inf 17 --quiet --out "$tmp/$plan.one"
  MMC_NCCL_WORLD1=1 ./mmc train "$tmp/$plan" --backend cuda --data "$tmp/text.bin" --steps 30 --inject-inf 17 --quiet \
    --out "$tmp/$plan.nccl"
done
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
strip = lambda r: {k: v for k, v in r.items() if k != "seconds"}
for plan in ("tiny", "sched"):
    a = [strip(json.loads(l)) for l in open(f"{d}/{plan}.one/metrics.jsonl")]
    b = [strip(json.loads(l)) for l in open(f"{d}/{plan}.nccl/metrics.jsonl")]
    assert len(a) == len(b) == 30 and a == b, (plan, next((x, y) for x, y in zip(a, b) if x != y))
    assert a[16]["skipped"] == 1, a[16]
print("a job of one rank through NCCL: the same 30 metrics lines as the ordinary run, with a schedule too")
PY
echo "test_dist_world1: all checks passed"
