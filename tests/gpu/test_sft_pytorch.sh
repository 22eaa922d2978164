#!/usr/bin/env bash
# The SFT loss on the GPU against PyTorch: MiniMind2-small at batch 8 on rows of `mmc data
# --sft` (conversations in ChatML with MiniMind's loss mask, tests/test_sft_data.sh checks
# the rows), one step from the same weights. tests/reference/minimind_torch.py reads the
# file's mask plane itself and takes MiniMind's (loss * loss_mask).sum() / loss_mask.sum():
#  1. fp32: loss within 1e-5 relative, every gradient within 1e-4 relative L2;
#  2. amp_fp16 at scale 65536: loss within 2e-3, gradients within 1e-2 (the tolerances of
#     tests/gpu/test_pytorch.sh, for the same reasons);
#  3. the mask matters: it counts between 5% and 95% of the batch's targets, so a loss that
#     ignored it, or counted the padding, would not have matched.
set -u
cd "$(dirname "$0")/../.."
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/conv.jsonl" <<'PY'
import json, random, sys
rnd = random.Random(11)
words = ["the", "model", "learns", "to", "answer", "questions", "about", "text", "and", "code", "clearly"]
zh = ["你好", "请", "介绍", "一下", "自己", "我们", "学习", "语言", "模型", "训练", "数据"]
def sentence(pool, n):
    return " ".join(rnd.choice(pool) for _ in range(n)) if pool is words else "".join(rnd.choice(pool) for _ in range(n))
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i in range(48):
        turns = []
        for t in range(rnd.randrange(1, 4)):
            pool = words if (i + t) % 2 else zh
            turns.append({"role": "user", "content": sentence(pool, rnd.randrange(4, 40))})
            turns.append({"role": "assistant", "content": sentence(pool, rnd.randrange(10, 120))})
        f.write(json.dumps({"conversations": turns}, ensure_ascii=False) + "\n")
PY
./mmc data --sft "$tmp/conv.jsonl" --tokenizer tokenizer/default/tokenizer.json --seq 512 -o "$tmp/sft.bin" --quiet || exit 1
./mmc tokens "$tmp/sft.bin"
B=8
./mmc compile graphs/minimind.lua -D batch=$B --policy fp32 -o "$tmp/fp32" --quiet || exit 1
./mmc compile graphs/minimind.lua -D batch=$B -o "$tmp/amp" --quiet || exit 1
./mmc init "$tmp/amp" -o "$tmp/w" --seed 5 || exit 1
ref=tests/reference/minimind_torch.py
echo "== 1. fp32: one step on SFT rows, loss and gradients"
./mmc step "$tmp/fp32" --data "$tmp/sft.bin" --init "$tmp/w/model.safetensors" -o "$tmp/g_mmc32.st" >/dev/null || fail=1
python3 $ref grads --run "$tmp/w" --data "$tmp/sft.bin" --policy fp32 -o "$tmp/g_pt32.st" >/dev/null || fail=1
python3 tests/compare_tensors.py "$tmp/g_mmc32.st" "$tmp/g_pt32.st" --loss-tol 1e-5 --tensor-tol 1e-4 || fail=1
echo "== 2. amp_fp16: one step at loss scale 65536"
./mmc step "$tmp/amp" --data "$tmp/sft.bin" --init "$tmp/w/model.safetensors" --scale 65536 -o "$tmp/g_mmc16.st" >/dev/null || fail=1
python3 $ref grads --run "$tmp/w" --data "$tmp/sft.bin" --policy amp_fp16 --scale 65536 -o "$tmp/g_pt16.st" >/dev/null || fail=1
python3 tests/compare_tensors.py "$tmp/g_mmc16.st" "$tmp/g_pt16.st" --loss-tol 2e-3 --tensor-tol 1e-2 || fail=1
echo "== 3. the mask matters"
python3 - "$tmp/sft.bin" <<'PY' || fail=1
import sys
sys.path.insert(0, "tests/reference")
from minimind_torch import read_tokens
ids, row, pad, mask = read_tokens(sys.argv[1])
targets = mask.view(-1, row)[:8, 1:]
share = targets.float().mean().item()
print(f"the first batch counts {share:.1%} of its targets")
assert 0.05 < share < 0.95, share
PY
[ $fail -eq 0 ] && echo "test_sft_pytorch: all checks passed"
exit $fail
