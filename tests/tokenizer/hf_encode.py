#!/usr/bin/env python3
"""Prints what Hugging Face tokenizers makes of each input, in `mmc tokenizer encode`'s
form: one line of space-separated ids per jsonl line (or per --file), or with --pretokens
the pre-tokenizer's pieces. Files are read as bytes and decoded with errors="replace".
usage: hf_encode.py TOKENIZER.json [--jsonl FILE] [--file FILE...] [--pretokens]"""
import argparse
import json
import sys

from tokenizers import Tokenizer

parser = argparse.ArgumentParser()
parser.add_argument("tokenizer")
parser.add_argument("--jsonl")
parser.add_argument("--file", nargs="*", default=[])
parser.add_argument("--pretokens", action="store_true")
args = parser.parse_args()
tok = Tokenizer.from_file(args.tokenizer)
pretokens = args.pretokens
texts = []
if args.jsonl:
    with open(args.jsonl, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
for path in args.file:
    with open(path, "rb") as f:
        texts.append(f.read().decode("utf-8", errors="replace"))
out = sys.stdout
if pretokens:
    for t in texts:
        out.write(" ".join(p for p, _ in tok.pre_tokenizer.pre_tokenize_str(t)) + "\n")
else:
    for e in tok.encode_batch(texts):
        out.write(" ".join(map(str, e.ids)) + "\n")
