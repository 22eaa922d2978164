#!/usr/bin/env python3
"""Checks `mmc data` against MiniMind's pretraining semantics, with ids from Hugging Face
tokenizers. usage: check_data.py MMC TOKENIZER.json WORKDIR

Token files (runtime/tokens.h): 64-byte header, then u16 ids; rows of seq + 1.
  rows:    each document is <|im_start|> + ids[:seq - 1] + <|im_end|>, padded with
           <|endoftext|> (id 0, the pad id in the header) to seq + 1;
  --pack:  documents back to back, cut into rows of seq + 1, the last one padded;
  --val:   each document goes to train.bin or train.val.bin; every document is in exactly
           one of them, in corpus order; identical texts go to the same file;
  bad lines are reported by line number and skipped, or stop the run with --strict, which
  leaves no output; blank lines, CRLF and a byte order mark are fine;
  the output is the same for 1, 2 and 3 threads, with chunks of the file processed out
  of order (a 12 MB corpus, one line longer than a chunk)."""
import json
import os
import random
import struct
import subprocess
import sys

from tokenizers import Tokenizer

mmc, tok_path, work = sys.argv[1:4]
tok = Tokenizer.from_file(tok_path)
BOS, EOS, PAD = tok.token_to_id("<|im_start|>"), tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")
rng = random.Random(6)
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print(f"FAIL {what}")


def read_tokens(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, vocab, count, row, pad = struct.unpack_from("<8sIIQII", data)
    assert magic == b"mmctoken" and version == 1, path
    ids = list(struct.unpack_from(f"<{count}H", data, 64))
    assert len(data) == 64 + 2 * count
    return {"vocab": vocab, "row": row, "pad": pad, "ids": ids}


def run(*args, ok=True):
    p = subprocess.run([mmc, "data", *args], capture_output=True, text=True)
    if ok and p.returncode != 0:
        print(p.stderr)
        sys.exit(f"FAIL mmc data {' '.join(args)} exited {p.returncode}")
    return p


with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tokenizer", "default", "corpus.jsonl"), encoding="utf-8") as f:
    poems = [json.loads(line)["text"] for line in f]

# ---- a small corpus with every kind of line
good = poems[:120] + ["", "short", "x" * 3000, "<|im_start|>hi<|im_end|>", "a\u0000b", "混合 mixed 123 😀"] + poems[:5]
lines, texts, bad_lines = [], [], []
for t in good:
    lines.append(json.dumps({"text": t, "id": len(lines)}, ensure_ascii=rng.random() < 0.5))
    texts.append(t)
    if rng.random() < 0.08:
        kind = len(bad_lines) % 6
        bad = ['{"text": "unterminated', '{"title": "no text"}', '{"text": 42}', '["text"]',
               '{"text": "\\ud800 lone surrogate"}', '{"text": "ok"} trailing'][kind]
        lines.append(bad)
        bad_lines.append(len(lines))  # 1-based line number
    if rng.random() < 0.05:
        lines.append("   ")  # blank: ignored, not bad
small = os.path.join(work, "small.jsonl")
with open(small, "wb") as f:
    f.write(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8") + b"\r\n")
ids = [e.ids for e in tok.encode_batch(texts)]

for seq in (16, 256):
    out = os.path.join(work, f"rows{seq}.bin")
    p = run(small, "--tokenizer", tok_path, "--seq", str(seq), "-o", out, "--val", "0.2", "--quiet")
    for n in bad_lines[:10]:
        check(f"small.jsonl:{n}:" in p.stderr, f"bad line {n} reported")
    check(f"{len(bad_lines)} bad lines skipped (the first: line {bad_lines[0]})" in p.stdout, "bad line count in the summary")
    train, val = read_tokens(out), read_tokens(out[:-4] + ".val.bin")
    for f in (train, val):
        check(f["row"] == seq + 1 and f["pad"] == PAD and f["vocab"] == tok.get_vocab_size(), f"header seq {seq}")
    rows = {k: [f["ids"][i:i + seq + 1] for i in range(0, len(f["ids"]), seq + 1)] for k, f in (("train", train), ("val", val))}
    at = {"train": 0, "val": 0}
    side_of = {}
    for t, doc in zip(texts, ids):
        want = ([BOS] + doc[:seq - 1] + [EOS] + [PAD] * (seq + 1))[:seq + 1]
        side = next((k for k in ("train", "val") if at[k] < len(rows[k]) and rows[k][at[k]] == want), None)
        check(side is not None, f"seq {seq}: the row of {t[:30]!r} is the next row of train.bin or train.val.bin")
        if side is None:
            break
        check(side_of.setdefault(t, side) == side, f"identical texts in the same split: {t[:30]!r}")
        at[side] += 1
    check(at["train"] == len(rows["train"]) and at["val"] == len(rows["val"]), f"seq {seq}: no extra rows")
    check(0 < at["val"] < at["train"], f"seq {seq}: both splits used ({at})")

# ---- --pack
out = os.path.join(work, "pack.bin")
run(small, "--tokenizer", tok_path, "--seq", "64", "-o", out, "--pack", "--val", "0.2", "--quiet")
train, val = read_tokens(out), read_tokens(out[:-4] + ".val.bin")
rows = run(small, "--tokenizer", tok_path, "--seq", "64", "-o", os.path.join(work, "split.bin"), "--val", "0.2", "--quiet")
split = read_tokens(os.path.join(work, "split.bin"))["ids"]
in_train = {tuple(split[i:i + 65]) for i in range(0, len(split), 65)}
streams = {"train": [], "val": []}
for doc in ids:
    row = tuple(([BOS] + doc[:63] + [EOS] + [PAD] * 65)[:65])
    streams["train" if row in in_train else "val"] += [BOS] + doc + [EOS]
for name, f in (("train", train), ("val", val)):
    s = streams[name]
    want = s + [PAD] * (-len(s) % 65)
    check(f["ids"] == want, f"--pack {name}: documents back to back, the last row padded")
    check(f["row"] == 65 and len(f["ids"]) % 65 == 0, f"--pack {name}: whole rows")

# ---- --strict: stops at the first bad line, leaves nothing behind
before = set(os.listdir(work))
out = os.path.join(work, "strict.bin")
p = run(small, "--tokenizer", tok_path, "--seq", "32", "-o", out, "--val", "0.1", "--strict", ok=False)
check(p.returncode == 1, "--strict exits 1")
check(f"small.jsonl:{bad_lines[0]}:" in p.stderr and "--strict" in p.stderr, "--strict names the first bad line")
check(set(os.listdir(work)) == before, f"--strict leaves no files: {set(os.listdir(work)) - before}")

# ---- threads: a corpus of several chunks, one line longer than a chunk
big = os.path.join(work, "big.jsonl")
with open(big, "w", encoding="utf-8") as f:
    for i in range(6):
        for t in poems:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        if i == 2:
            f.write(json.dumps({"text": "长" * 2_000_000}, ensure_ascii=False) + "\n")
            f.write("{bad\n")
outputs = []
for threads in (1, 2, 3):
    for pack in ([], ["--pack"]):
        out = os.path.join(work, f"t{threads}{len(pack)}.bin")
        run(big, "--tokenizer", tok_path, "--seq", "128", "-o", out, "--val", "0.01", "--threads", str(threads), "--quiet", *pack)
        with open(out, "rb") as a, open(out[:-4] + ".val.bin", "rb") as b:
            outputs.append((len(pack), a.read() + b.read()))
for pack in (0, 1):
    same = {o for p, o in outputs if p == pack}
    check(len(same) == 1, f"{'--pack ' if pack else ''}output is the same for 1, 2 and 3 threads")

# ---- the built-in corpus and tokenizer
out = os.path.join(work, "default.bin")
p = run("--default", "--seq", "128", "-o", out, "--val", "0.005")
check(read_tokens(out)["row"] == 129 and "5671 lines" in p.stdout, "--default: the built-in corpus with its tokenizer")

if failures:
    sys.exit(f"FAIL mmc data: {failures} checks failed")
print("ok mmc data: rows, --pack, --val, bad lines, --strict, threads, --default")
