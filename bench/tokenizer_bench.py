#!/usr/bin/env python3
"""The Hugging Face side of bench/tokenizer_bench.sh: encodes the "text" of every jsonl
line with tokenizers' encode_batch on THREADS threads (RAYON_NUM_THREADS), timing only
the encoding, and prints MB/s in the same form as `mmc tokenizer bench`.
usage: tokenizer_bench.py TOKENIZER.json CORPUS.jsonl THREADS [REPEATS]"""
import json
import os
import sys

tok_path, corpus, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 3
os.environ["RAYON_NUM_THREADS"] = str(threads)  # before tokenizers starts its pool
os.environ["TOKENIZERS_PARALLELISM"] = "true"
import time  # noqa: E402

from tokenizers import Tokenizer  # noqa: E402

tok = Tokenizer.from_file(tok_path)
texts = []
with open(corpus, encoding="utf-8") as f:
    for line in f:
        if line.strip():
            texts.append(json.loads(line)["text"])
size = sum(len(t.encode("utf-8")) for t in texts)
best = None
for _ in range(repeats):  # the best of a few runs, as for mmc
    start = time.perf_counter()
    out = tok.encode_batch(texts)
    secs = time.perf_counter() - start
    best = secs if best is None or secs < best else best
tokens = sum(len(e.ids) for e in out)
print(f"hf:  {size / 1e6:.2f} MB, {len(texts)} texts, {tokens} tokens in {best:.3f} s: {size / 1e6 / best:.2f} MB/s ({threads} threads)")
