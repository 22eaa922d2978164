#!/usr/bin/env bash
# The ref backend against PyTorch without a GPU: tests/fixtures holds the tiny graph's
# weights, one batch, and the loss and gradients PyTorch 2.11 computed from them on an H200
# (tests/reference/make_fixtures.sh): in fp32, and under autocast fp16 at loss scale 1024.
# Tolerances: fp32 loss 1e-5 relative and gradients 1e-4 relative L2 (both sum in fp32, in
# different orders); amp_fp16 loss 2e-3 and gradients 1e-2 (f16 rounding of different
# GEMM and attention kernels).
set -u
cd "$(dirname "$0")/.."
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
f=tests/fixtures
for policy in fp32 amp_fp16; do
  scale=1; tl=1e-5; tt=1e-4
  [ $policy = amp_fp16 ] && scale=1024 tl=2e-3 tt=1e-2
  ./mmc compile graphs/tiny.lua --policy $policy -o "$tmp/$policy" --quiet || exit 1
  ./mmc step "$tmp/$policy" --backend ref --data $f/tiny_batch.bin --init $f/tiny_init/model.safetensors \
    --scale $scale -o "$tmp/g_$policy.st" >/dev/null || { fail=1; continue; }
  echo "$policy:"
  python3 tests/compare_tensors.py "$tmp/g_$policy.st" $f/tiny_grads_$policy.safetensors --loss-tol $tl --tensor-tol $tt || fail=1
done
exit $fail
