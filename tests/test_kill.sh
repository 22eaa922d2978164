#!/usr/bin/env bash
# Nothing lost, nothing trusted: a run killed with SIGKILL at any instant and resumed ends as
# the run that never stopped, bit for bit. The tiny graph (batch 2, seq 16, on the ref
# backend) trains 20 updates with a checkpoint after each; 12 runs of it are killed at
# instants drawn with a fixed seed over the first 80% of the reference run's time (startup
# included), each resumed to the end (or, killed before its first checkpoint, started again
# with --force), and must give the reference run's model.safetensors and resume.safetensors
# bytes and its metrics lines (every field but the wall-clock "seconds"), with no temp file
# and one set left. Then what a resume must refuse: a set file that changed since it was
# saved, a model file of another update beside a resume file, another plan; a second process
# on a folder in use; a metrics file that cannot be written; --out ''.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
export MMC_THREADS=1 # the same bits on any count; one thread leaves the other core to the test
python3 tests/make_byte_tokens.py /usr/share/common-licenses/GPL-3 "$tmp/text.bin" 2>/dev/null \
  || python3 tests/make_byte_tokens.py README.md "$tmp/text.bin"
./mmc compile graphs/tiny.lua -D batch=2 -D seq=16 -o "$tmp/plan" --quiet || exit 1
N=20 K=12
args="--backend ref --data $tmp/text.bin --steps $N --shuffle 5 --seed 3 --save-interval 1 --quiet"
fail=0
t0=$(date +%s.%N)
./mmc train "$tmp/plan" $args --out "$tmp/whole" || exit 1
t1=$(date +%s.%N)
duration=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")

# the metrics without the wall clock, one line per update
metrics() { python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); r.pop("seconds"); print(json.dumps(r))' "$1"; }
metrics "$tmp/whole/metrics.jsonl" >"$tmp/whole.txt"

RANDOM=10 # the instants repeat from run to run of the test
kills=0 resumed=0 restarted=0 identical=0
for k in $(seq $K); do
  run=$tmp/k$k
  at=$(awk "BEGIN { printf \"%.3f\", $duration * $((RANDOM % 800)) / 1000 }")
  ./mmc train "$tmp/plan" $args --out "$run" & pid=$!
  sleep "$at"
  kill -9 $pid 2>/dev/null && kills=$((kills + 1))
  wait $pid 2>/dev/null
  if [ -e "$run/latest" ]; then
    ./mmc train "$tmp/plan" --backend ref --data "$tmp/text.bin" --resume "$run" --quiet && resumed=$((resumed + 1))
  else # killed before its first checkpoint: resume says so, and the run starts again
    if ./mmc train "$tmp/plan" --backend ref --data "$tmp/text.bin" --resume "$run" --quiet 2>"$tmp/err"; then
      echo "k$k: a resume with no checkpoint ran"; fail=1
    fi
    grep -q "holds no checkpoint" "$tmp/err" || { echo "k$k: unexpected: $(cat "$tmp/err")"; fail=1; }
    ./mmc train "$tmp/plan" $args --out "$run" --force && restarted=$((restarted + 1))
  fi
  metrics "$run/metrics.jsonl" >"$tmp/k.txt"
  left=$(find "$run" -name '*.tmp*' | wc -l) sets=$(find "$run" -maxdepth 1 -name 'ckpt-*' | wc -l)
  if cmp -s "$tmp/whole/model.safetensors" "$run/model.safetensors" \
    && cmp -s "$tmp/whole/resume.safetensors" "$run/resume.safetensors" && cmp -s "$tmp/whole.txt" "$tmp/k.txt" \
    && [ "$left" -eq 0 ] && [ "$sets" -eq 1 ]; then
    identical=$((identical + 1))
  else
    echo "k$k (killed at ${at}s of ${duration}s): not the uninterrupted run ($left temp files, $sets sets;" \
      "$(diff "$tmp/whole.txt" "$tmp/k.txt" | head -3))"
    fail=1
  fi
done
echo "kill -9: $kills kills over ${duration}s runs, $resumed resumed, $restarted restarted before a checkpoint," \
  "$identical of $K bit-identical to the uninterrupted run"
[ $((resumed + restarted)) -eq $K ] || fail=1
[ $kills -ge $((K / 2)) ] || { echo "most runs ended before their kill: the test shows nothing"; fail=1; }

# refused: $1 is what the message must hold, the rest the command
refused() {
  local want=$1; shift
  if "$@" 2>"$tmp/err"; then echo "accepted: $*"; fail=1; fi
  grep -qF -- "$want" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err") (want: $want)"; fail=1; }
}
resume() { ./mmc train "$tmp/plan" --backend ref --data "$tmp/text.bin" --quiet "$@"; }
# a resume checks the set against its checkpoint.json: a file changed after the save
cp -r "$tmp/k1" "$tmp/bad"
set=$tmp/bad/$(cat "$tmp/bad/latest")
./mmc train "$tmp/plan" $args --steps 3 --out "$tmp/three"
cp "$tmp/three/model.safetensors" "$set/model.safetensors"
refused "model.safetensors: changed since it was saved" resume --resume "$tmp/bad" --steps 30
# a folder without sets (from an older mmc): the model file must be of the resume file's update
rm -rf "$tmp/bad/latest" "$tmp/bad"/ckpt-*
cp "$tmp/three/model.safetensors" "$tmp/bad/model.safetensors"
refused "model.safetensors is from update 3 (plan" resume --resume "$tmp/bad" --steps 30
# another plan
./mmc compile graphs/tiny.lua -D batch=2 -D seq=16 -D lr=1e-3 -o "$tmp/plan_lr" --quiet || fail=1
refused "made with another plan" ./mmc train "$tmp/plan_lr" --backend ref --data "$tmp/text.bin" --resume "$tmp/whole" --quiet
# one writer per folder: a second process on it is refused, naming the first one's pid
./mmc train "$tmp/plan" $args --steps 100000 --save-interval 0 --out "$tmp/busy" & pid=$!
for _ in $(seq 600); do [ -s "$tmp/busy/metrics.jsonl" ] && break; sleep 0.05; done
refused "$tmp/busy is in use by another mmc (pid $pid)" resume --resume "$tmp/busy"
refused "$tmp/busy is in use by another mmc (pid $pid)" ./mmc train "$tmp/plan" $args --out "$tmp/busy" --force
kill -9 $pid; wait $pid 2>/dev/null
# a metrics file that cannot be written stops the run, naming it, and keeps whole lines (a
# file size limit makes the write fail: 2 KiB is some 12 lines)
(trap '' XFSZ; ulimit -f 2; exec ./mmc train "$tmp/plan" $args --save-interval 0 --out "$tmp/full") 2>"$tmp/err" \
  && { echo "a run with a metrics file it cannot write succeeded"; fail=1; }
grep -q "full/metrics.jsonl: cannot write: File too large; the run stops here, before its first checkpoint" "$tmp/err" \
  || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
metrics "$tmp/full/metrics.jsonl" >/dev/null && [ "$(tail -c 1 "$tmp/full/metrics.jsonl" | od -An -c | tr -d ' ')" = '\n' ] \
  || { echo "the metrics of a failed write are torn"; fail=1; }
refused "train: --out and --resume need a folder, not an empty name" ./mmc train "$tmp/plan" $args --out ''
refused "init: -o needs a folder, not an empty name" ./mmc init "$tmp/plan" -o ''
[ $fail -eq 0 ] && echo "refused: a changed set file, a model of another update, another plan, a folder in use, an unwritable metrics file, an empty --out"
exit $fail
