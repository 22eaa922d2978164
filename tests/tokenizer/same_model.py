#!/usr/bin/env python3
"""Exits 0 if two tokenizer.json files hold the same tokenizer: the same vocabulary, the
same merges in the same order (either spelling, "a b" or ["a", "b"]), the same added
tokens and pipeline. usage: same_model.py A.json B.json"""
import json
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    m = j["model"]
    m["merges"] = [tuple(x.split(" ")) if isinstance(x, str) else tuple(x) for x in m["merges"]]
    return j


a, b = load(sys.argv[1]), load(sys.argv[2])
bad = False
for key in ["added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder"]:
    if a.get(key) != b.get(key):
        print(f"{key} differs:\n  {a.get(key)}\n  {b.get(key)}")
        bad = True
va, vb = a["model"]["vocab"], b["model"]["vocab"]
if va != vb:
    only_a = sorted(set(va.items()) - set(vb.items()), key=lambda x: x[1])[:10]
    only_b = sorted(set(vb.items()) - set(va.items()), key=lambda x: x[1])[:10]
    print(f"vocab differs ({len(va)} vs {len(vb)}): first only in A {only_a}, only in B {only_b}")
    bad = True
ma, mb = a["model"]["merges"], b["model"]["merges"]
if ma != mb:
    first = next((i for i, (x, y) in enumerate(zip(ma, mb)) if x != y), min(len(ma), len(mb)))
    print(f"merges differ ({len(ma)} vs {len(mb)}), first at {first}: {ma[first:first+3]} vs {mb[first:first+3]}")
    bad = True
sys.exit(1 if bad else 0)
