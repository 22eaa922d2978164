#!/usr/bin/env bash
# Makes the PyTorch fixtures of the tiny graph that CI checks the ref backend against
# (tests/test_pytorch_fixtures.sh), on a machine with a GPU and PyTorch: the weights mmc
# init gives tiny with seed 5, one batch of byte tokens, and PyTorch's loss and gradients
# for fp32 and for autocast fp16 at loss scale 1024. Run from the repository root:
#   bash tests/reference/make_fixtures.sh tests/fixtures
set -eu
out=${1:-tests/fixtures}
mkdir -p "$out"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 tests/make_byte_tokens.py README.md "$out/tiny_batch.bin"
./mmc compile graphs/tiny.lua -o "$tmp/tiny" --quiet
rm -rf "$out/tiny_init" && ./mmc init "$tmp/tiny" -o "$out/tiny_init" --seed 5
rm -f "$out/tiny_init/resume.safetensors"
python3 tests/reference/minimind_torch.py grads --run "$out/tiny_init" --data "$out/tiny_batch.bin" --policy fp32 \
  -o "$out/tiny_grads_fp32.safetensors"
python3 tests/reference/minimind_torch.py grads --run "$out/tiny_init" --data "$out/tiny_batch.bin" --policy amp_fp16 \
  --scale 1024 -o "$out/tiny_grads_amp_fp16.safetensors"
python3 -c "import torch; print('made with PyTorch', torch.__version__, torch.cuda.get_device_name())" > "$out/README"
