#!/usr/bin/env python3
"""Checks `mmc tokenizer decode --ids` against Hugging Face's decode, with and without
--skip-special: on the ids of every corpus line and on random ids (tokens that end inside a
UTF-8 character, ids with no token); with --roundtrip also that decoding mmc's own ids
gives every corpus text back, decode(encode(x)) == x (for tokenizers that cover all bytes
and strip nothing). usage: check_decode.py MMC TOKENIZER.json CORPUS.jsonl [--roundtrip]"""
import json
import os
import random
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer

mmc, path, corpus = sys.argv[1:4]
tok = Tokenizer.from_file(path)
rng = random.Random(5)
with open(corpus, encoding="utf-8") as f:
    texts = [json.loads(line)["text"] for line in f if line.strip()]
vocab = tok.get_vocab_size(with_added_tokens=True)
samples = [e.ids for e in tok.encode_batch(texts)]
samples += [[rng.randrange(vocab + 20) for _ in range(rng.randint(1, 60))] for _ in range(500)]


def mmc_decode(ids_file, skip):
    cmd = [mmc, "tokenizer", "decode", path, "--ids", ids_file] + (["--skip-special"] if skip else [])
    out = subprocess.run(cmd, capture_output=True, check=True).stdout.decode("utf-8")
    return [json.loads(line)["text"] for line in out.split("\n")[:-1]]


with tempfile.TemporaryDirectory() as tmp:
    ids_file = os.path.join(tmp, "ids")
    with open(ids_file, "w") as f:
        f.writelines(" ".join(map(str, ids)) + "\n" for ids in samples)
    for skip in (False, True):
        got = mmc_decode(ids_file, skip)
        want = tok.decode_batch(samples, skip_special_tokens=skip)
        bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
        for i in bad[:3]:
            print(f"ids {samples[i][:20]} skip_special={skip}:\n  mmc: {got[i][:200]!r}\n  hf:  {want[i][:200]!r}")
        if bad or len(got) != len(want):
            sys.exit(f"FAIL decode {path}: {len(bad)} of {len(samples)} differ (skip_special={skip})")
    if "--roundtrip" not in sys.argv:
        print(f"ok decode {os.path.basename(path)}: {2 * len(samples)} decodings identical")
        sys.exit(0)
    mine = subprocess.run([mmc, "tokenizer", "encode", path, "--jsonl", corpus], capture_output=True, check=True).stdout
    with open(ids_file, "wb") as f:
        f.write(mine)
    back = mmc_decode(ids_file, False)
    bad = [i for i, (a, b) in enumerate(zip(back, texts)) if a != b]
    for i in bad[:3]:
        print(f"line {i + 1}: decode(encode(x)) != x:\n  x:    {texts[i][:200]!r}\n  back: {back[i][:200]!r}")
    if bad or len(back) != len(texts):
        sys.exit(f"FAIL roundtrip {path}: {len(bad)} of {len(texts)} texts do not come back")
print(f"ok decode {os.path.basename(path)}: {2 * len(samples)} decodings identical, {len(texts)} texts come back")
