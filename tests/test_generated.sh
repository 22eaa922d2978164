#!/usr/bin/env bash
# generated/minimind is what `make generate` makes now; compiling twice gives identical
# bytes; NVRTC compiles every generated kernel for sm_90, sm_80 and sm_75 (no GPU needed),
# for the shipped graph and for the tiny graph under every shipped policy.
set -u
cd "$(dirname "$0")/.."
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
./mmc compile graphs/minimind.lua -o "$tmp/a" --quiet || exit 1
./mmc compile graphs/minimind.lua -o "$tmp/b" --quiet || exit 1
cmp -s "$tmp/a/kernels.cu" "$tmp/b/kernels.cu" && cmp -s "$tmp/a/plan" "$tmp/b/plan" \
  || { echo "compiling twice gave different bytes"; fail=1; }
if ! diff -r -q generated/minimind "$tmp/a" >/dev/null; then
  echo "generated/minimind is stale: run 'make generate' and commit generated/"
  diff -r generated/minimind "$tmp/a" | head -20
  fail=1
fi
./mmc check-kernels generated/minimind --arch sm_90a --arch sm_90 --arch sm_80 --arch sm_75 || fail=1
for policy in amp_fp16 fp32 amp_bf16 fp16_wide fp64; do
  ./mmc compile graphs/tiny.lua --policy "$policy" -o "$tmp/tiny_$policy" --quiet || { fail=1; continue; }
  ./mmc check-kernels "$tmp/tiny_$policy" --arch sm_90a --arch sm_90 --arch sm_80 --arch sm_75 >/dev/null || { echo "tiny/$policy: NVRTC failed"; fail=1; }
done
# an NVRTC error names the kernel it is in (the edited file checked as a file: beside its plan,
# check-kernels refuses it first, as no longer the plan's; the first silu is in the epilogue of the
# gate/up GEMM)
./mmc compile graphs/tiny.lua -o "$tmp/broken" --quiet
sed -i "0,/ = mmc_silu(/s// = mmc_silu_typo(/" "$tmp/broken/kernels.cu"
if ./mmc check-kernels "$tmp/broken/kernels.cu" --arch sm_90 2>"$tmp/err"; then echo "a broken kernel compiled"; fail=1; fi
grep -q '\[k[0-9]*_linear_layers_0_mlp_gate_proj_up_proj\].*mmc_silu_typo' "$tmp/err" \
  || { echo "the NVRTC error does not name the kernel:"; cat "$tmp/err"; fail=1; }
exit $fail
