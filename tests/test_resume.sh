#!/usr/bin/env bash
# A run stopped and resumed continues bit for bit: the tiny graph trained 16 updates
# (2 micro-batches each, shuffled rows) in one go, and the same run stopped after update 7
# and resumed with --resume, give identical per-update losses, learning rates, scales and
# gradient norms, and identical checkpoint files; so does a run stopped by SIGINT (Ctrl-C).
# A finished run extended with --steps keeps its updates and goes on with the schedule of the
# longer run. A resume on another token file or with another --shuffle is refused, and so is
# a resume file whose step state or data position no update leaves (update -1, a position
# "abc" or "-5"), naming the field.
# Usage: test_resume.sh [ref|cuda].
set -u
cd "$(dirname "$0")/.."
backend=${1:-ref}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 tests/make_byte_tokens.py /usr/share/common-licenses/GPL-3 "$tmp/text.bin" 2>/dev/null \
  || python3 tests/make_byte_tokens.py README.md "$tmp/text.bin"
./mmc compile graphs/tiny.lua -D accumulation=2 -o "$tmp/plan" --quiet || exit 1
args="--backend $backend --data $tmp/text.bin --steps 16 --shuffle 9 --seed 4 --quiet"
./mmc train "$tmp/plan" $args --out "$tmp/whole" || exit 1
./mmc train "$tmp/plan" $args --out "$tmp/parts" --stop-after 7 || exit 1
[ "$(wc -l <"$tmp/parts/metrics.jsonl")" -eq 7 ] || { echo "the stopped run logged $(wc -l <"$tmp/parts/metrics.jsonl") updates, want 7"; exit 1; }
./mmc train "$tmp/plan" --backend "$backend" --data "$tmp/text.bin" --resume "$tmp/parts" --quiet || exit 1
fail=0
python3 - "$tmp/whole/metrics.jsonl" "$tmp/parts/metrics.jsonl" <<'PY' || fail=1
import json, sys
keys = ("update", "loss", "lr", "scale", "grad_norm", "skipped", "growth_tracker")
a = [{k: json.loads(l)[k] for k in keys} for l in open(sys.argv[1])]
b = [{k: json.loads(l)[k] for k in keys} for l in open(sys.argv[2])]
assert len(a) == len(b) == 16, (len(a), len(b))
bad = [x["update"] for x, y in zip(a, b) if x != y]
assert not bad, f"updates {bad} differ"
print("16 updates, stopped after 7 and resumed: identical losses, lr, scales and norms")
PY
for f in model.safetensors resume.safetensors; do
  cmp -s "$tmp/whole/$f" "$tmp/parts/$f" || { echo "$f differs between the whole and the resumed run"; fail=1; }
done
# Ctrl-C: the update in flight finishes, a checkpoint is written, the exit status is 130;
# resumed, the run ends as the one that was never stopped. The GPU runs the tiny plan's 16
# updates faster than a signal can be sent after the second, so there the run is longer.
sig_steps=16; [ "$backend" = ref ] || sig_steps=3000
sig_args=${args/--steps 16/--steps $sig_steps}
if [ $sig_steps -eq 16 ]; then sig_whole=$tmp/whole; else
  sig_whole=$tmp/sig_whole; ./mmc train "$tmp/plan" $sig_args --out "$sig_whole" || fail=1
fi
./mmc train "$tmp/plan" $sig_args --out "$tmp/int" & pid=$!
for _ in $(seq 600); do [ "$(cat "$tmp/int/metrics.jsonl" 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.05; done
kill -INT $pid; wait $pid; rc=$?
n=$(wc -l <"$tmp/int/metrics.jsonl")
if [ $rc -eq 130 ] && [ "$n" -lt $sig_steps ]; then
  ./mmc train "$tmp/plan" --backend "$backend" --data "$tmp/text.bin" --resume "$tmp/int" --quiet || fail=1
  cmp -s <(cut -d, -f1-8 "$sig_whole/metrics.jsonl") <(cut -d, -f1-8 "$tmp/int/metrics.jsonl") \
    || { echo "interrupted after $n updates and resumed: the metrics differ from the whole run's"; fail=1; }
  cmp -s "$sig_whole/model.safetensors" "$tmp/int/model.safetensors" || { echo "interrupted run: weights differ"; fail=1; }
  echo "interrupted after update $n of $sig_steps (exit 130) and resumed: identical metrics and weights"
else
  echo "SIGINT: exit status $rc after $n updates (want 130, fewer than $sig_steps)"; fail=1
fi
# a finished run extended with --steps: its first updates stay, and the new ones follow the
# schedule of a run planned that long from the start
./mmc train "$tmp/plan" --backend "$backend" --data "$tmp/text.bin" --resume "$tmp/whole" --steps 20 --quiet || fail=1
args20=${args/--steps 16/--steps 20}
./mmc train "$tmp/plan" $args20 --out "$tmp/long" || fail=1
python3 - "$tmp/whole/metrics.jsonl" "$tmp/parts/metrics.jsonl" "$tmp/long/metrics.jsonl" <<'PY' || fail=1
import json, sys
ext, first, fresh = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert len(ext) == 20 and len(fresh) == 20, (len(ext), len(fresh))
keys = ("update", "loss", "lr", "scale", "grad_norm")
assert [{k: r[k] for k in keys} for r in ext[:16]] == [{k: r[k] for k in keys} for r in first], "the first 16 updates changed"
assert [r["lr"] for r in ext[16:]] == [r["lr"] for r in fresh[16:]], ([r["lr"] for r in ext[16:]], [r["lr"] for r in fresh[16:]])
print("extended from 16 to 20 updates: the first 16 kept, the lr of updates 17-20 that of a 20-update run")
PY
# --resume with another token file, or another --shuffle, is refused and says what differs
python3 tests/make_byte_tokens.py README.md "$tmp/other.bin"
if ./mmc train "$tmp/plan" --backend "$backend" --data "$tmp/other.bin" --resume "$tmp/whole" --steps 21 --quiet 2>"$tmp/err"; then
  echo "resume on other data accepted"; fail=1
fi
grep -q "other.bin is not the data $tmp/whole was trained on (text.bin, sha256 " "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
if ./mmc train "$tmp/plan" --backend "$backend" --data "$tmp/text.bin" --resume "$tmp/whole" --steps 21 --shuffle 3 --quiet 2>"$tmp/err"; then
  echo "resume with another --shuffle accepted"; fail=1
fi
grep -q -- "--shuffle 3, but $tmp/whole was trained with --shuffle 9" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
[ "$(wc -l <"$tmp/whole/metrics.jsonl")" -eq 20 ] || { echo "a refused resume changed the run"; fail=1; }
# a resume file edited: each field is checked before it is used (a folder of the two files
# alone, as runs from before checkpoint sets left them)
python3 - "$tmp/whole/resume.safetensors" "$tmp" <<'PY' || fail=1
import json, os, shutil, struct, sys
raw, d = open(sys.argv[1], "rb").read(), sys.argv[2]
n = struct.unpack("<Q", raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])
def write(name, head, data):
    os.makedirs(f"{d}/{name}")
    shutil.copy(f"{d}/whole/model.safetensors", f"{d}/{name}/model.safetensors")
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    open(f"{d}/{name}/resume.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
update = head["step_state"]["data_offsets"][0] + 44  # MmcStepState.update
minus = bytearray(data)
minus[update:update + 4] = struct.pack("<i", -1)
write("update_minus_1", head, minus)
for name, value in (("rows_abc", "abc"), ("rows_minus_5", "-5")):
    write(name, dict(head, __metadata__=dict(head["__metadata__"], data_rows_consumed=value)), data)
PY
for c in "update_minus_1:step_state.update is -1, not a count of updates" \
         "rows_abc:data_rows_consumed is \"abc\", not a decimal integer" \
         "rows_minus_5:data_rows_consumed is \"-5\", not a decimal integer"; do
  dir=${c%%:*} want=${c#*:}
  if ./mmc train "$tmp/plan" --backend "$backend" --data "$tmp/text.bin" --resume "$tmp/$dir" --steps 21 --quiet 2>"$tmp/err"; then
    echo "$dir: resumed"; fail=1
  fi
  # one line (besides the cuda backend's line naming the device, when it opened first)
  [ "$(grep -vc '^mmc: cuda: ' "$tmp/err")" -eq 1 ] && grep -qF "$dir/resume.safetensors: $want" "$tmp/err" || { echo "$dir: $(cat "$tmp/err")"; fail=1; }
done
exit $fail
