#!/usr/bin/env bash
# Training on the CPU with the ref backend: the tiny graph learns real text (the GPL and
# Apache licence texts Debian ships, as byte tokens): over 200 updates the mean loss of the
# last 20 falls at least 1.0 nat below the first 20 (it starts near ln 320 = 5.77; bytes of
# English text are far from uniform); the ref backend gives the same bits on any number of
# threads. --val evaluates during the run as mmc eval does after it. A second run onto the same --out is refused unless
# --force. Token files with a bad id, rows of the wrong length, a pad id past the vocabulary
# or no target but padding are refused before training, naming the byte offset or the
# lengths, and so is a path that is not a regular file (a FIFO, a folder).
set -u
cd "$(dirname "$0")/.."
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
texts="/usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0"
python3 tests/make_byte_tokens.py $texts "$tmp/text.bin" || exit 1
./mmc compile graphs/tiny.lua -o "$tmp/tiny" --quiet || exit 1
./mmc train "$tmp/tiny" --backend ref --data "$tmp/text.bin" --steps 200 --log-interval 50 --out "$tmp/run" >"$tmp/log" \
  || { cat "$tmp/log"; exit 1; }
cat "$tmp/log"
python3 - "$tmp/run/metrics.jsonl" <<'PY' || fail=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 200, len(rows)
first = sum(r["loss"] for r in rows[:20]) / 20
last = sum(r["loss"] for r in rows[-20:]) / 20
print(f"mean loss: first 20 updates {first:.3f}, last 20 {last:.3f}")
assert rows[0]["loss"] > 5.5, rows[0]["loss"]  # starts near ln 320
assert last < first - 1.0, (first, last)
assert all(r["skipped"] == 0 for r in rows)
assert rows[0]["lr"] > rows[-1]["lr"]  # the cosine schedule decays
PY
grep -q "^Epoch\[1/1\](200/200) loss [0-9.]* lr [0-9.]* | .* tok/s .* ms/step | scale 65536 grad_norm [0-9.]* skipped 0" "$tmp/log" \
  || { echo "log line not in the expected shape"; fail=1; }
# the ref backend gives the same bits on one thread and on three
for n in 1 3; do
  MMC_THREADS=$n ./mmc train "$tmp/tiny" --backend ref --data "$tmp/text.bin" --steps 6 --quiet --out "$tmp/threads$n" || fail=1
done
cmp -s <(cut -d, -f1-8 "$tmp/threads1/metrics.jsonl") <(cut -d, -f1-8 "$tmp/threads3/metrics.jsonl") \
  && cmp -s "$tmp/threads1/model.safetensors" "$tmp/threads3/model.safetensors" \
  || { echo "the ref backend differs between 1 and 3 threads"; fail=1; }
# mmc plot draws the run's curves into a PNG; a folder without metrics is refused
./mmc plot "$tmp/run" -o "$tmp/curves.png" >/dev/null || { echo "plot failed"; fail=1; }
[ "$(head -c 8 "$tmp/curves.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] && [ "$(wc -c <"$tmp/curves.png")" -gt 20000 ] \
  || { echo "plot: not a PNG of curves"; fail=1; }
if TMPDIR="$tmp" ./mmc plot "$tmp" -o "$tmp/x.png" 2>"$tmp/err"; then echo "plot of a folder without metrics accepted"; fail=1; fi
grep -q "metrics.jsonl: No such file" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
[ ! -e "$tmp/x.png" ] && ! ls "$tmp"/mmc-plot-* >/dev/null 2>&1 || { echo "plot left files behind"; fail=1; }
# --out onto the finished run is refused and leaves it as it was (its lock file aside, which
# names the last process that held it); --force replaces it
sum_before=$(find "$tmp/run" -type f ! -name .lock | sort | xargs cat | sha256sum)
if ./mmc train "$tmp/tiny" --backend ref --data "$tmp/text.bin" --steps 2 --out "$tmp/run" 2>"$tmp/err"; then
  echo "--out onto a run accepted"; fail=1
fi
grep -q -- "--out $tmp/run already holds a run (model.safetensors); continue it with --resume $tmp/run, or replace it with --force" "$tmp/err" \
  || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
[ "$(find "$tmp/run" -type f ! -name .lock | sort | xargs cat | sha256sum)" = "$sum_before" ] || { echo "the refused run changed its folder"; fail=1; }
./mmc train "$tmp/tiny" --backend ref --data "$tmp/text.bin" --steps 2 --quiet --out "$tmp/run" --force \
  || { echo "--force refused"; fail=1; }
[ "$(wc -l <"$tmp/run/metrics.jsonl")" -eq 2 ] || { echo "--force did not replace the run"; fail=1; }
# a token id beyond the model's vocabulary is refused with its byte offset
python3 - "$tmp/bad.bin" <<'PY'
import struct, sys
ids = [5] * 100
ids[37] = 400  # vocab of the file and of tiny is 320
open(sys.argv[1], "wb").write(b"mmctoken" + struct.pack("<IIQII", 1, 1000, len(ids), 0, 0) + bytes(32) + struct.pack("<100H", *ids))
PY
if ./mmc train "$tmp/tiny" --backend ref --data "$tmp/bad.bin" --steps 1 2>"$tmp/err"; then echo "bad id accepted"; fail=1; fi
grep -q "bad.bin: byte 138: token id 400 is >= the model's vocab size 320" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
# rows made for another sequence length are refused
python3 tests/make_byte_tokens.py $texts "$tmp/rows.bin" --row-length 65
if ./mmc train "$tmp/tiny" --backend ref --data "$tmp/rows.bin" --steps 1 2>"$tmp/err"; then echo "wrong rows accepted"; fail=1; fi
grep -q "rows of 65 tokens (seq 64) but the plan was compiled for seq 32" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
# a pad id no token can be, and a file whose every target is padding (its loss would be a
# mean over nothing, nan), are refused before training; so is a FIFO, which would block
python3 - "$tmp" <<'PY'
import struct, sys
def write(path, ids, pad):
    open(path, "wb").write(b"mmctoken" + struct.pack("<IIQII", 1, 320, len(ids), 33, pad) + bytes(32) + struct.pack(f"<{len(ids)}H", *ids))
write(f"{sys.argv[1]}/pad.bin", [5] * 33 * 8, 320)
write(f"{sys.argv[1]}/allpad.bin", ([1] + [0] * 32) * 8, 0)
write(f"{sys.argv[1]}/otherpad.bin", list(range(1, 34)) * 8, 7)
PY
mkfifo "$tmp/fifo.bin"
for c in "--data $tmp/pad.bin:pad.bin: byte 28: pad id 320 is not below the vocab size 320" \
         "--data $tmp/allpad.bin:allpad.bin: every target of its 8 rows is the pad id 0" \
         "--data $tmp/fifo.bin:fifo.bin: is a FIFO; a token file must be a regular file" \
         "--data $tmp/text.bin --val $tmp/fifo.bin:fifo.bin: is a FIFO; a token file must be a regular file" \
         "--data $tmp:$tmp: is a folder; a token file must be a regular file" \
         "--data $tmp/otherpad.bin:otherpad.bin: padded with id 7, but the model's pad id is 0"; do
  if timeout 20 ./mmc train "$tmp/tiny" --backend ref ${c%%:*} --steps 1 --quiet 2>"$tmp/err"; then echo "${c%%:*} accepted"; fail=1; fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF -- "${c#*:}" "$tmp/err" || { echo "${c%%:*}: $(cat "$tmp/err")"; fail=1; }
done
# every command prints its usage with --help; a misspelt command or option gets the near one
./mmc train --help | grep -q "^usage: mmc train PLAN_DIR --data FILE" || { echo "train --help: no usage"; fail=1; }
if ./mmc trian 2>"$tmp/err"; then echo "a misspelt command ran"; fail=1; fi
grep -q "unknown command 'trian'; did you mean 'train'?" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
if ./mmc train "$tmp/tiny" --data "$tmp/text.bin" --stpes 3 2>"$tmp/err"; then echo "a misspelt option ran"; fail=1; fi
grep -q "train: unknown option --stpes; did you mean --steps?" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
# a forward-only plan computes losses, and train refuses it: mmc eval on it gives the loss
# mmc step gives on the same first batch, and a mean over the file
./mmc compile graphs/tiny.lua --forward -o "$tmp/fwd" --quiet || fail=1
one=$(./mmc eval "$tmp/fwd" --init "$tmp/run" --data "$tmp/text.bin" --backend ref --batches 1 | sed -n 's/.*: loss \([^,]*\),.*/\1/p')
step=$(./mmc step "$tmp/tiny" --backend ref --data "$tmp/text.bin" --init "$tmp/run/model.safetensors" -o "$tmp/g.st" | sed -n 's/^loss //p')
[ -n "$one" ] && [ "$one" = "$step" ] || { echo "eval's loss $one, step's $step"; fail=1; }
./mmc eval "$tmp/fwd" --init "$tmp/run" --data "$tmp/text.bin" --backend ref --batches 8 | grep -q "8 batches of 4 rows, .* targets: loss [0-9.]*, perplexity [0-9.]*" \
  || { echo "eval over 8 batches: no mean"; fail=1; }
# --val: evaluations every --eval-interval updates and after the last, in the log and in
# metrics.jsonl; the last one is mmc eval's loss of the final weights, bit for bit
./mmc train "$tmp/tiny" --backend ref --data "$tmp/text.bin" --val "$tmp/text.bin" --val-batches 6 --eval-interval 4 \
  --steps 10 --log-interval 5 --out "$tmp/vrun" >"$tmp/vlog" || { cat "$tmp/vlog"; fail=1; }
[ "$(grep -c '^Eval(' "$tmp/vlog")" -eq 3 ] || { echo "--val: want 3 Eval lines"; cat "$tmp/vlog"; fail=1; }
last=$(./mmc eval "$tmp/fwd" --init "$tmp/vrun" --data "$tmp/text.bin" --backend ref --batches 6 | sed -n 's/.*: loss \([^,]*\),.*/\1/p')
# mmc eval RUN_DIR: the run's graph compiled forward-only again gives the same loss
again=$(./mmc eval "$tmp/vrun" --data "$tmp/text.bin" --backend ref --batches 6 | sed -n 's/.*: loss \([^,]*\),.*/\1/p')
[ -n "$last" ] && [ "$last" = "$again" ] || { echo "mmc eval RUN_DIR: $again, with its plan: $last"; fail=1; }
python3 - "$tmp/vrun/metrics.jsonl" "$last" <<'PY' || fail=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["update"] for r in rows if "val_loss" in r] == [4, 8, 10], rows
assert abs(rows[-1]["val_loss"] - float(sys.argv[2])) <= 1e-8 * abs(float(sys.argv[2])), (rows[-1], sys.argv[2])
print(f"--val: val_loss at updates 4, 8, 10; the last {rows[-1]['val_loss']} = mmc eval's {sys.argv[2]}")
PY
# --lr and --clip at train time make the plan again with those settings: the same run as a
# plan compiled with -D lr=... -D clip=...
./mmc train "$tmp/tiny" --backend ref --data "$tmp/text.bin" --steps 4 --lr 2e-3 --clip 0.5 --quiet --out "$tmp/lr1" || fail=1
./mmc compile graphs/tiny.lua -D lr=2e-3 -D clip=0.5 -o "$tmp/tiny_lr" --quiet || fail=1
./mmc train "$tmp/tiny_lr" --backend ref --data "$tmp/text.bin" --steps 4 --quiet --out "$tmp/lr2" || fail=1
cmp -s <(cut -d, -f1-8 "$tmp/lr1/metrics.jsonl") <(cut -d, -f1-8 "$tmp/lr2/metrics.jsonl") \
  || { echo "train --lr --clip: not the run of a plan compiled with -D lr -D clip"; fail=1; }
cmp -s <(cut -d, -f1-8 "$tmp/lr1/metrics.jsonl") <(head -4 "$tmp/run/metrics.jsonl" | cut -d, -f1-8) \
  && { echo "train --lr: the same run as without"; fail=1; }
# --warmup 4: the lr of updates 1..4 is the schedule's times 1/4, 2/4, 3/4, 1, then the schedule's
./mmc train "$tmp/tiny" --backend ref --data "$tmp/text.bin" --steps 6 --warmup 4 --quiet --out "$tmp/wu" || fail=1
./mmc train "$tmp/tiny" --backend ref --data "$tmp/text.bin" --steps 6 --quiet --out "$tmp/nowu" || fail=1
python3 - "$tmp/wu/metrics.jsonl" "$tmp/nowu/metrics.jsonl" <<'PY' || fail=1
import json, sys
a, b = ([json.loads(l)["lr"] for l in open(p)] for p in sys.argv[1:])
ratios = [x / y for x, y in zip(a, b)]
assert all(abs(r - w) < 1e-6 for r, w in zip(ratios, [0.25, 0.5, 0.75, 1, 1, 1])), ratios
print("--warmup 4: lr x", ", ".join(f"{r:g}" for r in ratios))
PY
if ./mmc train "$tmp/tiny" --backend ref --data "$tmp/text.bin" --steps 1 --lr abc 2>"$tmp/err"; then echo "--lr abc accepted"; fail=1; fi
grep -q "train: --lr needs a number, got 'abc'" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
if ./mmc train "$tmp/fwd" --backend ref --data "$tmp/text.bin" --steps 1 2>"$tmp/err"; then echo "train on a forward plan ran"; fail=1; fi
grep -q "has no backward pass (compiled with --forward)" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
# the runtime finds the batch's inputs by their role alone: a graph whose inputs have none
# compiles, but train names the plan and the role it lacks
cat >"$tmp/noroles.lua" <<'EOF'
model { vocab = 320 }
local ids = input("ids", {4, 32}, "i32")
loss(sum_all(embedding(param("w", {320, 8}, init.normal(0, 1)), ids)))
EOF
./mmc compile "$tmp/noroles.lua" -o "$tmp/noroles" --quiet || fail=1
if ./mmc train "$tmp/noroles" --backend ref --data "$tmp/text.bin" --steps 1 2>"$tmp/err"; then echo "train without a tokens role ran"; fail=1; fi
grep -q "$tmp/noroles/plan: no input has the role tokens: give one in $tmp/noroles.lua as input(name, shape, \"i32\", { role = \"tokens\" })" "$tmp/err" \
  || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
# without a GPU the cuda backend says so in one line and points to the ref backend
if ./mmc train "$tmp/tiny" --backend cuda --data "$tmp/text.bin" --steps 1 2>"$tmp/err"; then :; else
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "--backend ref" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
fi
exit $fail
