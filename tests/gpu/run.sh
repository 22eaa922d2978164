#!/usr/bin/env bash
# `make test-gpu`: the tests that need a GPU, from the repository root.
#  - every kernel of the tiny plan against the ref backend (tests/gpu/test_gpu_kernels.c), on an
#    H100 or H200 once more without its sm_90a kernels (MMC_CUDA_ARCH=sm_90);
#  - the same under compute-sanitizer's memcheck and racecheck, when it is installed;
#  - the flash attention kernels against the exact ones (tests/gpu/test_attention.c);
#  - the GEMM epilogues' branch-free silu against the exact one (tests/gpu/test_silu_fast.c);
#  - a run stopped and resumed continues bit for bit on the GPU (tests/test_resume.sh cuda);
#  - the loss scaler's settings from mmc train's command line, and --find-overflow naming the
#    op that overflows (tests/test_scaler_model.sh cuda, tests/test_find_overflow.sh cuda);
#  - the skip rate, underflow and loss-spike monitoring (tests/test_monitor.sh cuda);
#  - a precision schedule and its fallback, resumed across both boundaries
#    (tests/test_schedule_train.sh cuda);
#  - data parallelism's step as a job of one rank through NCCL (tests/gpu/test_dist_world1.sh);
#  - the tiny graph trained 60 updates on the GPU and on the CPU from the same weights and
#    data: per-update losses within 2e-2 relative (fp16 rounding differences between
#    cuBLAS and the ref's double sums compound over the run), the same skipped updates;
#    and on the GPU with the cross-entropy's gradient in the loss's kernel (--fuse-loss-grad):
#    the same weights bit for bit;
#  - MiniMind2-small against PyTorch (tests/gpu/test_pytorch.sh), its SFT loss on masked rows
#    (tests/gpu/test_sft_pytorch.sh), and the Hugging Face export in transformers
#    (tests/gpu/test_hf_export.sh); MMC_SKIP_PYTORCH=1 skips the three.
# On the GPU machine run it as `bash tests/gpu/run.sh` with ./mmc and build/gpu built here.
set -u
cd "$(dirname "$0")/../.."
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "test-gpu: no GPU on this machine (nvidia-smi lists none); run it where there is one"
  exit 1
fi
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
build/gpu/test_gpu_kernels || fail=1
if nvidia-smi --query-gpu=compute_cap --format=csv,noheader | grep -q '^9\.0'; then
  # the same kernels.cu without the sm_90a kernels: cuBLASLt and the GEMM epilogues alone
  MMC_CUDA_ARCH=sm_90 build/gpu/test_gpu_kernels || fail=1
fi
build/gpu/test_attention || fail=1
build/gpu/test_silu_fast || fail=1
bash tests/test_resume.sh cuda || fail=1
bash tests/test_scaler_model.sh cuda || fail=1
bash tests/test_find_overflow.sh cuda || fail=1
bash tests/test_monitor.sh cuda || fail=1
bash tests/test_schedule_train.sh cuda || fail=1
bash tests/gpu/test_dist_world1.sh || fail=1
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 1 build/gpu/test_gpu_kernels amp_fp16 amp_bf16 >"$tmp/$tool" 2>&1 \
      || { echo "$tool found errors:"; tail -30 "$tmp/$tool"; fail=1; }
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$tmp/$tool" | sed "s/^=* */$tool: /"
  done
  # the GEMM-epilogue kernels (on an H100 or H200 the TMA and wgmma GEMM)
  compute-sanitizer --tool memcheck --error-exitcode 1 build/gpu/test_gpu_kernels --epilogues >"$tmp/epilogues" 2>&1 \
    || { echo "memcheck found errors in the GEMM epilogues:"; tail -30 "$tmp/epilogues"; fail=1; }
  grep -E "ERROR SUMMARY" "$tmp/epilogues" | sed "s/^=* */memcheck (epilogues): /"
fi
python3 tests/make_byte_tokens.py /usr/share/common-licenses/GPL-3 "$tmp/text.bin" 2>/dev/null \
  || python3 tests/make_byte_tokens.py README.md "$tmp/text.bin"
./mmc compile graphs/tiny.lua -o "$tmp/tiny" --quiet || exit 1
for backend in ref cuda; do
  ./mmc train "$tmp/tiny" --backend "$backend" --data "$tmp/text.bin" --steps 60 --quiet --out "$tmp/$backend" || fail=1
done
python3 - "$tmp/ref/metrics.jsonl" "$tmp/cuda/metrics.jsonl" <<'PY' || fail=1
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
gpu = [json.loads(l) for l in open(sys.argv[2])]
assert len(ref) == len(gpu) == 60
worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(ref, gpu))
print(f"tiny, 60 updates, GPU vs CPU: worst per-update loss difference {worst:.2e} relative; "
      f"final loss {gpu[-1]['loss']:.4f} (GPU) {ref[-1]['loss']:.4f} (CPU)")
assert worst < 2e-2, worst
assert [r["skipped"] for r in ref] == [r["skipped"] for r in gpu]
PY
# the cross-entropy's gradient written by the loss's kernel (--fuse-loss-grad): the same
# weights after 60 updates as its two kernels, bit for bit, and the same losses
./mmc compile graphs/tiny.lua --fuse-loss-grad -o "$tmp/tiny_lg" --quiet || exit 1
./mmc train "$tmp/tiny_lg" --backend cuda --data "$tmp/text.bin" --steps 60 --quiet --out "$tmp/cuda_lg" || fail=1
python3 - "$tmp/cuda" "$tmp/cuda_lg" <<'PY' || fail=1
import glob, json, os, struct, sys
def tensors(path):  # a safetensors file's tensors as bytes, its metadata (the plan's hash) left out
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in head.items() if k != "__metadata__"}
a, b = sys.argv[1], sys.argv[2]
files = sorted(os.path.relpath(f, a) for f in glob.glob(os.path.join(a, "**", "*.safetensors"), recursive=True))
assert files, "no checkpoint"
for f in files:
    x, y = tensors(os.path.join(a, f)), tensors(os.path.join(b, f))
    same = sum(x[k] == y.get(k) for k in x)
    print(f"tiny, 60 updates, --fuse-loss-grad: {f}: {same} of {len(x)} tensors bit-identical")
    assert same == len(x) == len(y)
la = [json.loads(l)["loss"] for l in open(os.path.join(a, "metrics.jsonl"))]
lb = [json.loads(l)["loss"] for l in open(os.path.join(b, "metrics.jsonl"))]
worst = max(abs(p - q) / abs(p) for p, q in zip(la, lb))
print(f"tiny, 60 updates, --fuse-loss-grad: worst loss difference {worst:.2e} relative")
assert len(la) == len(lb) == 60 and worst < 1e-6, worst
PY
[ -n "${MMC_SKIP_PYTORCH:-}" ] || bash tests/gpu/test_pytorch.sh || fail=1
[ -n "${MMC_SKIP_PYTORCH:-}" ] || bash tests/gpu/test_sft_pytorch.sh || fail=1
[ -n "${MMC_SKIP_PYTORCH:-}" ] || bash tests/gpu/test_hf_export.sh || fail=1
exit $fail
