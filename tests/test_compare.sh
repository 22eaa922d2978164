#!/usr/bin/env bash
# mmc compare on the ref backend: the tiny graph under fp32, amp_fp16 and amp_bf16 from the
# same weights on the same batches, 20 updates each, evaluated on another text: the table,
# DIR/summary.json (a row per policy, fp32 the baseline, perplexities within 5% of it for so
# short a run), one run folder per policy and the PNG of their curves; and a schedule as an
# entry, fp32:5+amp_fp16 (5 updates of fp32, then amp_fp16): its first 5 updates are the
# fp32 run's.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 tests/make_byte_tokens.py /usr/share/common-licenses/GPL-3 "$tmp/train.bin" --row-length 33
python3 tests/make_byte_tokens.py /usr/share/common-licenses/Apache-2.0 "$tmp/val.bin" --row-length 33
./mmc compare graphs/tiny.lua --policies fp32,amp_fp16,amp_bf16,fp32:5+amp_fp16 --data "$tmp/train.bin" --val "$tmp/val.bin" --steps 20 \
  --val-batches 10 --backend ref --quiet --out "$tmp/cmp" >"$tmp/log"
cat "$tmp/log"
grep -q "^| policy | final train loss | val ppl | vs fp32 | tokens/s | peak GiB | skipped | lowest scale |$" "$tmp/log"
for p in fp32 amp_fp16 amp_bf16 fp32_5+amp_fp16; do # the schedule's row and folder: its phases with their updates
  grep -q "^| $p | " "$tmp/log"
  test -s "$tmp/cmp/$p/metrics.jsonl"
done
head -c 8 "$tmp/cmp/compare.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a"
python3 - "$tmp/cmp/summary.json" "$tmp/cmp" <<'PY'
import json, math, sys
s = json.load(open(sys.argv[1]))
runs = ["fp32", "amp_fp16", "amp_bf16", "fp32_5+amp_fp16"]
assert s["baseline"] == "fp32" and s["steps"] == 20 and [r["run"] for r in s["runs"]] == runs, s
base = s["runs"][0]
for r in s["runs"]:
    assert math.isfinite(r["val_ppl"]) and r["val_ppl"] > 1 and r["tokens_per_s"] > 0, r
    assert abs(r["val_ppl"] / base["val_ppl"] - 1 - r["val_ppl_vs_baseline"]) < 1e-12 and r["flagged"] == (abs(r["val_ppl_vs_baseline"]) > 0.05), r
    assert not r["flagged"] and r["skipped"] == 0 and r["device_bytes"] is None, r
assert s["runs"][0]["lowest_scale"] == 1 and s["runs"][1]["lowest_scale"] == 65536, s
rows = lambda d: [json.loads(l) for l in open(f"{sys.argv[2]}/{d}/metrics.jsonl")]
f32, warm = rows("fp32"), rows("fp32_5+amp_fp16")
assert [r["loss"] for r in warm[:5]] == [r["loss"] for r in f32[:5]] and warm[5]["scale"] == 65536, warm[:6]
assert [(r["update"], r["precision"]) for r in warm if "precision" in r] == [(1, "fp32"), (6, "amp_fp16")], warm
print("summary.json: 4 runs, fp32 the baseline, every perplexity within 5% of it; the warm-up schedule starts as fp32")
PY
if ./mmc compare graphs/tiny.lua --policies fp32,fp32 --data "$tmp/train.bin" --val "$tmp/val.bin" --steps 1 --out "$tmp/x" 2>"$tmp/err"; then
  echo "a policy named twice was accepted"; exit 1
fi
grep -q "names fp32 twice" "$tmp/err"
echo "test_compare: all checks passed"
