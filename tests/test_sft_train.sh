#!/usr/bin/env bash
# MiniMind's second stage on the CPU (ref backend), with graphs/tiny.lua at seq 128:
#  1. a byte tokenizer for tiny (id = byte + 3 after <|endoftext|>, <|im_start|>, <|im_end|>:
#     tiny's vocabulary), written as a Hugging Face tokenizer.json and checked with
#     `tokenizers`; a conversation file of small sums made by the test; `mmc data --sft`;
#  2. a short pretraining run, then fine-tuning from its weights with --init (a fresh
#     optimizer), the stage's --lr and --loss-scale-init 32768: its first metrics line has
#     that scale, and the loss falls;
#  3. the masked loss counts the targets the mask keeps: `mmc eval` on the SFT file counts
#     exactly the mask's bits of its batches (Python counts them from the file), and the same
#     rows without the mask count every target that is not padding;
#  4. `mmc generate --chat` starts from the ChatML prompt of one user turn and the
#     assistant's opening (its ids checked against the template rendered in Python) and
#     prints the reply alone.
set -eu
cd "$(dirname "$0")/.."
tmp=${MMC_KEEP:-$(mktemp -d)}; [ -n "${MMC_KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp" <<'PY'
import json, random, sys
from tokenizers import Tokenizer
d = sys.argv[1]
t = json.load(open("tokenizer/default/tokenizer.json"))  # the built-in one's structure
# GPT-2's byte-to-unicode map, which the ByteLevel pre-tokenizer applies
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
char = dict(zip(bs, map(chr, cs)))
vocab = {a["content"]: a["id"] for a in t["added_tokens"]}
assert vocab == {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}, vocab
vocab.update({char[b]: b + 3 for b in range(256)})
t["model"]["vocab"], t["model"]["merges"] = vocab, []
json.dump(t, open(f"{d}/tokenizer.json", "w"), ensure_ascii=False)
tok = Tokenizer.from_file(f"{d}/tokenizer.json")
assert tok.encode("<|im_start|>ab\n", add_special_tokens=False).ids == [1, 97 + 3, 98 + 3, 10 + 3]
rnd = random.Random(3)
with open(f"{d}/conv.jsonl", "w") as f:
    for _ in range(96):
        turns = []
        for _ in range(rnd.randrange(1, 3)):
            a, b = rnd.randrange(10), rnd.randrange(10)
            turns += [{"role": "user", "content": f"{a} plus {b}?"}, {"role": "assistant", "content": f"{a + b}."}]
        f.write(json.dumps({"conversations": turns}) + "\n")
PY
./mmc data --sft "$tmp/conv.jsonl" --tokenizer "$tmp/tokenizer.json" --seq 128 -o "$tmp/sft.bin" --quiet >/dev/null
./mmc compile graphs/tiny.lua -D seq=128 -o "$tmp/tiny" --quiet
python3 tests/make_byte_tokens.py README.md "$tmp/text.bin" --row-length 129
run() { ./mmc train "$tmp/tiny" --backend ref --quiet "$@"; }
run --data "$tmp/text.bin" --steps 20 --out "$tmp/pre"
run --data "$tmp/sft.bin" --init "$tmp/pre/model.safetensors" --lr 2e-3 --loss-scale-init 32768 --steps 60 --out "$tmp/sft" \
  --tokenizer "$tmp/tokenizer.json"
# the same rows without the mask: a version 1 file of the SFT file's ids
python3 - "$tmp/sft.bin" "$tmp/plain.bin" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
version, vocab, count, row, pad = struct.unpack("<IIQII", data[8:32])
assert version == 2, version
open(sys.argv[2], "wb").write(b"mmctoken" + struct.pack("<IIQII", 1, vocab, count, row, pad) + data[32:64]
                              + data[128:128 + 2 * count])
PY
./mmc eval "$tmp/sft" --data "$tmp/sft.bin" --backend ref >"$tmp/eval_sft.txt"
./mmc eval "$tmp/sft" --data "$tmp/plain.bin" --backend ref >"$tmp/eval_plain.txt"
./mmc generate "$tmp/sft" --chat "3 plus 4?" --greedy --max-new-tokens 12 --ids --backend ref --quiet >"$tmp/chat.txt"
python3 - "$tmp" <<'PY'
import json, re, struct, sys
d = sys.argv[1]
m = [json.loads(l) for l in open(f"{d}/sft/metrics.jsonl")]
assert m[0]["scale"] == 32768, m[0]
first, last = sum(r["loss"] for r in m[:10]) / 10, sum(r["loss"] for r in m[-10:]) / 10
assert last < first, (first, last)
data = open(f"{d}/sft.bin", "rb").read()
_, _, count, row, pad = struct.unpack("<IIQII", data[8:32])
mask_at = struct.unpack("<Q", data[72:80])[0]
ids = struct.unpack(f"<{count}H", data[128:128 + 2 * count])
bit = lambda i: data[mask_at + i // 8] >> (i % 8) & 1
batch = 4
rows = count // row // batch * batch  # eval takes every whole batch
masked = sum(bit(r * row + k) for r in range(rows) for k in range(1, row))
plain = sum(ids[r * row + k] != pad for r in range(rows) for k in range(1, row))
got = lambda name: float(re.search(r"([0-9]+) targets", open(f"{d}/{name}").read()).group(1))
assert got("eval_sft.txt") == masked, (got("eval_sft.txt"), masked)
assert got("eval_plain.txt") == plain and plain > masked, (got("eval_plain.txt"), plain)
chat = open(f"{d}/chat.txt").read()
prompt = "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\n3 plus 4?<|im_end|>\n<|im_start|>assistant\n"
want = []
for part in re.split(r"(<\|im_start\|>|<\|im_end\|>)", prompt):
    want += [1] if part == "<|im_start|>" else [2] if part == "<|im_end|>" else [b + 3 for b in part.encode()]
got_ids = [int(x) for x in re.search(r"^ids:(.*)$", chat, re.M).group(1).split()]
assert got_ids[:len(want)] == want, (got_ids[:len(want)], want)
assert "You are a helpful assistant" not in chat.split("ids:")[0], chat  # the reply alone
print(f"sft: loss {first:.3f} -> {last:.3f} over 60 updates from the pretrained weights; eval counts the mask's "
      f"{masked} targets ({plain} without it); generate --chat starts from the ChatML prompt")
PY
echo "test_sft_train: all checks passed"
