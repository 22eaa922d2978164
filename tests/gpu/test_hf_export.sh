#!/usr/bin/env bash
# The Hugging Face export loads in transformers as LlamaForCausalLM, without remote code, and
# computes mmc's numbers: on the first batch of a token file, the loss of transformers'
# logits (f32, ignoring pad targets as mmc does) equals `mmc step`'s f32 loss within 1e-5
# relative (two f32 forward passes that sum in different orders); and `mmc generate`'s greedy
# tokens under the fp32 policy, on the GPU and on the CPU, are transformers' greedy
# `generate` tokens from the same prompt. Needs torch and transformers (the GPU machine has
# both).
set -u
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
./mmc compile graphs/tiny.lua -D vocab=6400 -o "$tmp/plan" --quiet || exit 1
./mmc compile graphs/tiny.lua -D vocab=6400 --policy fp32 -o "$tmp/plan32" --quiet || exit 1
./mmc data --default --seq 32 --pack -o "$tmp/small.bin" >/dev/null || exit 1
./mmc train "$tmp/plan" --backend ref --data "$tmp/small.bin" --steps 20 --quiet --out "$tmp/run" || exit 1
./mmc export "$tmp/run" --format hf -o "$tmp/hf" >/dev/null || exit 1
./mmc step "$tmp/plan32" --backend ref --data "$tmp/small.bin" --init "$tmp/run/model.safetensors" -o "$tmp/g.safetensors" >/dev/null || exit 1
for backend in cuda ref; do
  ./mmc generate "$tmp/run" --policy fp32 --backend $backend --prompt "床前明月光" --max-new-tokens 24 --greedy --ids \
    >"$tmp/gen_$backend" 2>"$tmp/gen_$backend.err" || { cat "$tmp/gen_$backend.err"; exit 1; }
  tail -1 "$tmp/gen_$backend.err"
done
python3 - "$tmp" <<'PY'
import json, struct, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
d = sys.argv[1]
model = AutoModelForCausalLM.from_pretrained(f"{d}/hf", torch_dtype=torch.float32)
assert type(model).__name__ == "LlamaForCausalLM", type(model).__name__
raw = open(f"{d}/small.bin", "rb").read()
ids = struct.unpack(f"<{(len(raw) - 64) // 2}H", raw[64:])
rows = [ids[r * 33:(r + 1) * 33] for r in range(4)]  # tiny: batch 4, seq 32
x, y = torch.tensor([r[:32] for r in rows]), torch.tensor([r[1:] for r in rows])
with torch.no_grad():
    logits = model(x).logits.float()
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=0).item()
g = open(f"{d}/g.safetensors", "rb").read()
mmc = float(json.loads(g[8:8 + struct.unpack("<Q", g[:8])[0]])["__metadata__"]["loss"])
rel = abs(loss - mmc) / abs(mmc)
print(f"hf export in transformers: loss {loss:.7f}, mmc step {mmc:.7f}, relative difference {rel:.1e} (tolerance 1e-5)")
assert rel < 1e-5, rel
tok = AutoTokenizer.from_pretrained(f"{d}/hf")
prompt = tok.apply_chat_template([{"role": "user", "content": "你好"}], tokenize=False, add_generation_prompt=True)
assert prompt.endswith("<|im_start|>assistant\n"), prompt
prompt = [1] + tok.encode("床前明月光", add_special_tokens=False)  # <|im_start|> first, as mmc generate does
out = model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False)[0].tolist()
for backend in ("cuda", "ref"):
    mine = [int(x) for x in open(f"{d}/gen_{backend}").read().split("\nids: ")[1].split()]
    assert mine == out, (backend, mine, out)
print(f"greedy: mmc generate (cuda and ref) and transformers give the same {len(out) - len(prompt)} tokens:",
      repr(tok.decode(out[len(prompt):])))
PY
