#!/usr/bin/env bash
# mmc builds without the CUDA toolkit (make CUDA=/nonexistent, into build/nocuda): the
# compiler, training on the ref backend and generate work, and what needs a GPU or NVRTC
# says in one line that this build has neither.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
make -s -j2 CUDA=/nonexistent OBJDIR=build/nocuda MMC=build/nocuda/mmc build/nocuda/mmc >"$tmp/make" 2>&1 \
  || { cat "$tmp/make"; exit 1; }
m=build/nocuda/mmc
if ldd "$m" | grep -q -E "libcudart|libnvrtc|libcublas"; then echo "the no-CUDA build links CUDA libraries"; fail=1; fi
$m compile graphs/tiny.lua -D vocab=6400 -o "$tmp/plan" --quiet || fail=1
$m data --default --seq 32 --pack -o "$tmp/d.bin" >/dev/null || fail=1
$m train "$tmp/plan" --backend ref --data "$tmp/d.bin" --steps 3 --quiet --out "$tmp/run" || fail=1
$m generate "$tmp/run" --prompt "床前明月光" --max-new-tokens 4 --greedy >"$tmp/gen" 2>"$tmp/err" || fail=1
grep -q "no GPU (this mmc was built without the CUDA toolkit" "$tmp/err" || { echo "generate: $(cat "$tmp/err")"; fail=1; }
if $m train "$tmp/plan" --data "$tmp/d.bin" --steps 1 2>"$tmp/err"; then echo "--backend cuda ran"; fail=1; fi
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "built without the CUDA toolkit.*use --backend ref" "$tmp/err" \
  || { echo "train --backend cuda: $(cat "$tmp/err")"; fail=1; }
if $m check-kernels "$tmp/plan" 2>"$tmp/err"; then echo "check-kernels ran"; fail=1; fi
grep -q "check-kernels: this mmc was built without the CUDA toolkit" "$tmp/err" || { echo "check-kernels: $(cat "$tmp/err")"; fail=1; }
[ $fail -eq 0 ] && echo "built without the CUDA toolkit: compile, train on the CPU and generate work; cuda and NVRTC say they are absent"
exit $fail
