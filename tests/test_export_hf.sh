#!/usr/bin/env bash
# `mmc export RUN_DIR --format hf`: a folder in Hugging Face's Llama layout. config.json says
# LlamaForCausalLM with the run's sizes; model.safetensors holds every parameter under its
# Llama name in the export dtype; tokenizer.json is the built-in tokenizer and
# tokenizer_config.json's chat template renders ChatML (with jinja2, as transformers does).
# A run folder keeps the tokenizer its data was made with, and the export takes that one. A
# tokenizer whose ids do not fit the model's vocabulary is refused. (That transformers
# loads the folder and computes mmc's loss is tests/gpu/test_hf_export.sh, on the GPU machine,
# which has torch.)
set -u
cd "$(dirname "$0")/.."
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
./mmc compile graphs/tiny.lua -D vocab=6400 -o "$tmp/plan" --quiet || exit 1
./mmc data --default --seq 32 --pack -o "$tmp/small.bin" >/dev/null || exit 1
./mmc train "$tmp/plan" --backend ref --data "$tmp/small.bin" --steps 2 --quiet --out "$tmp/run" || exit 1
./mmc export "$tmp/run" --format hf -o "$tmp/hf" >/dev/null || exit 1
./mmc export "$tmp/run" --format hf --dtype f16 -o "$tmp/hf16" >/dev/null || exit 1
python3 - "$tmp" <<'PY' || fail=1
import json, struct, sys
import jinja2
d = sys.argv[1]
run, hf = json.load(open(f"{d}/run/config.json")), json.load(open(f"{d}/hf/config.json"))
assert hf["architectures"] == ["LlamaForCausalLM"] and hf["model_type"] == "llama", hf
for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "vocab_size", "rms_norm_eps", "rope_theta", "tie_word_embeddings"):
    assert hf[k] == run[k], (k, hf[k], run[k])
assert hf["head_dim"] == 16 and hf["hidden_act"] == "silu" and not hf["attention_bias"] and not hf["mlp_bias"]
def header(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n]); h.pop("__metadata__", None)
    return h
h32, h16 = header(f"{d}/hf/model.safetensors"), header(f"{d}/hf16/model.safetensors")
want = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"} | {
    f"model.layers.{l}.{m}.weight" for l in range(2) for m in (
        "input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
        "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
assert set(h32) == want, set(h32) ^ want
assert {t["dtype"] for t in h32.values()} == {"F32"} and {t["dtype"] for t in h16.values()} == {"F16"}
assert json.load(open(f"{d}/hf16/config.json"))["torch_dtype"] == "float16"
assert open(f"{d}/hf/tokenizer.json").read() == open("tokenizer/default/tokenizer.json").read()
tc = json.load(open(f"{d}/hf/tokenizer_config.json"))
assert (tc["bos_token"], tc["eos_token"], tc["pad_token"]) == ("<|im_start|>", "<|im_end|>", "<|endoftext|>"), tc
t = jinja2.Environment().from_string(tc["chat_template"])
got = t.render(messages=[{"role": "user", "content": "你好"}], add_generation_prompt=True)
assert got == "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n", repr(got)
got = t.render(messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "a"},
                         {"role": "assistant", "content": "b"}], add_generation_prompt=False)
assert got == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n", repr(got)
print("hf export: LlamaForCausalLM config, 21 tensors in f32 and f16, the built-in tokenizer, ChatML template")
PY
# a run keeps the tokenizer its data was made with (named by hash in the token file): given
# with --tokenizer, or found beside the data; without either it says so; the export takes it
./mmc tokenizer train --default --vocab 400 -o "$tmp/tok400.json" >/dev/null || exit 1
mkdir -p "$tmp/d"
./mmc data --default --tokenizer "$tmp/tok400.json" --seq 32 --pack -o "$tmp/d/small.bin" >/dev/null || exit 1
./mmc compile graphs/tiny.lua -D vocab=400 -o "$tmp/p400" --quiet || exit 1
t400() { ./mmc train "$tmp/p400" --backend ref --data "$tmp/d/small.bin" --steps 1 --quiet "$@"; }
t400 --out "$tmp/r1" 2>"$tmp/err" || fail=1
grep -q "small.bin was made with a tokenizer (sha256 .*give it with --tokenizer FILE" "$tmp/err" && [ ! -e "$tmp/r1/tokenizer.json" ] \
  || { echo "a tokenizer that cannot be found: unexpected $(cat "$tmp/err")"; fail=1; }
t400 --tokenizer "$tmp/tok400.json" --out "$tmp/r2" || fail=1
cmp -s "$tmp/tok400.json" "$tmp/r2/tokenizer.json" || { echo "--tokenizer: not kept in the run"; fail=1; }
if t400 --tokenizer default --out "$tmp/r4" 2>"$tmp/err"; then echo "a wrong --tokenizer accepted"; fail=1; fi
grep -q "is not the tokenizer .*small.bin was made with" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
cp "$tmp/tok400.json" "$tmp/d/tokenizer.json"
t400 --out "$tmp/r3" || fail=1
cmp -s "$tmp/tok400.json" "$tmp/r3/tokenizer.json" || { echo "the tokenizer beside the data: not kept in the run"; fail=1; }
./mmc export "$tmp/r2" --format hf -o "$tmp/hf400" >/dev/null || fail=1
cmp -s "$tmp/tok400.json" "$tmp/hf400/tokenizer.json" || { echo "export: not the run's tokenizer"; fail=1; }
cmp -s tokenizer/default/tokenizer.json "$tmp/run/tokenizer.json" || { echo "the built-in tokenizer: not kept in the run"; fail=1; }
# the built-in tokenizer (6400 ids) does not fit tiny's 320-token vocabulary
./mmc compile graphs/tiny.lua -o "$tmp/plan320" --quiet || exit 1
./mmc init "$tmp/plan320" -o "$tmp/run320" || exit 1
if ./mmc export "$tmp/run320" --format hf -o "$tmp/bad" 2>"$tmp/err"; then echo "a tokenizer larger than the vocabulary accepted"; fail=1; fi
grep -q "the built-in tokenizer has ids up to 6399 but the model's vocabulary is 320" "$tmp/err" || { echo "unexpected: $(cat "$tmp/err")"; fail=1; }
exit $fail
