#!/usr/bin/env bash
# mmc check-kernels compiles a plan's kernels.cu with NVRTC (no GPU needed) only if it is the
# plan's own: its SHA-256 is the one on the plan's kernels line. An empty kernels.cu, one of
# another plan and an edited one are refused in one line naming both files, before NVRTC sees
# them; a .cu file named itself is compiled as it is.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
./mmc compile graphs/tiny.lua -o "$tmp/a" --quiet || exit 1
./mmc compile graphs/tiny.lua --policy fp32 -o "$tmp/b" --quiet || exit 1
if ./mmc check-kernels "$tmp/a" --arch sm_90 >"$tmp/out" 2>"$tmp/err"; then
  grep -q "kernels.cu: sm_90 ok" "$tmp/out" || { echo "check-kernels: $(cat "$tmp/out")"; fail=1; }
elif grep -q "built without the CUDA toolkit" "$tmp/err"; then
  echo "this mmc has no NVRTC: $(cat "$tmp/err")"; exit 0
else
  echo "check-kernels on a fresh plan: $(cat "$tmp/err")"; fail=1
fi
refused() { # what: the plan folder's kernels.cu is not its own
  if ./mmc check-kernels "$tmp/a" --arch sm_90 >"$tmp/out" 2>"$tmp/err"; then echo "$1: accepted"; fail=1; return; fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "$tmp/a/kernels.cu: not the kernels of $tmp/a/plan" "$tmp/err" \
    || { echo "$1: $(cat "$tmp/err")"; fail=1; }
}
cp "$tmp/a/kernels.cu" "$tmp/own.cu"
: >"$tmp/a/kernels.cu"
refused "an empty kernels.cu"
cp "$tmp/b/kernels.cu" "$tmp/a/kernels.cu"
refused "another plan's kernels.cu"
cp "$tmp/own.cu" "$tmp/a/kernels.cu"
printf '\n' >>"$tmp/a/kernels.cu"
refused "a kernels.cu with one more byte"
# a .cu file given itself is compiled as it is: an NVRTC error names the kernel it is in (the
# first silu is in the epilogue of the gate/up GEMM)
sed "0,/ = mmc_silu(/s// = mmc_silu_typo(/" "$tmp/own.cu" >"$tmp/broken.cu"
if ./mmc check-kernels "$tmp/broken.cu" --arch sm_90 2>"$tmp/err"; then echo "a broken kernel compiled"; fail=1; fi
grep -q '\[k[0-9]*_linear_layers_0_mlp_gate_proj_up_proj\].*mmc_silu_typo' "$tmp/err" \
  || { echo "the NVRTC error does not name the kernel:"; cat "$tmp/err"; fail=1; }
[ $fail -eq 0 ] && echo "check-kernels: the plan's own kernels.cu compiles; an empty, a foreign and an edited one are refused; a broken .cu names its kernel"
exit $fail
