#!/usr/bin/env python3
"""Writes a benchmark corpus of about SIZE_MB megabytes: documents of 200 to 4000 bytes
spliced from random spans of the built-in corpus, so most words are new (a corpus that
only repeated itself would be all cache hits). Fixed seed.
usage: make_bench_corpus.py OUT.jsonl [SIZE_MB]"""
import json
import os
import random
import sys

out = sys.argv[1]
size = float(sys.argv[2]) * 1e6 if len(sys.argv) > 2 else 32e6
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "..", "tokenizer", "default", "corpus.jsonl"), encoding="utf-8") as f:
    docs = [json.loads(line)["text"] for line in f]
rng = random.Random(7)
written = 0
with open(out + ".tmp", "w", encoding="utf-8") as f:
    while written < size:
        want, parts, n = rng.randint(200, 4000), [], 0
        while n < want:
            d = rng.choice(docs)
            i = rng.randrange(len(d))
            span = d[i:i + rng.randint(5, 80)]
            parts.append(span)
            n += len(span.encode("utf-8"))
        text = "".join(parts)
        f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
        written += len(text.encode("utf-8"))
os.replace(out + ".tmp", out)
