#!/usr/bin/env python3
"""Compares mmc's output with Hugging Face's, line by line, and shows the first differences.
With --codepoints FILE (the jsonl the outputs came from, one code point a line) a line may
differ only if its code point is unassigned in utf8proc's Unicode version: Hugging Face's
regex engine may know a newer Unicode. usage: compare.py MMC_OUT HF_OUT WHAT [--codepoints FILE]"""
import ctypes
import json
import sys

mmc_out, hf_out, what = sys.argv[1:4]
with open(mmc_out, encoding="utf-8", errors="surrogateescape") as f:
    m = f.read().split("\n")
with open(hf_out, encoding="utf-8", errors="surrogateescape") as f:
    h = f.read().split("\n")
if len(m) != len(h):
    sys.exit(f"FAIL {what}: {len(m)} lines from mmc, {len(h)} from Hugging Face")
diff = [i for i, (a, b) in enumerate(zip(m, h)) if a != b]
newer = []
if "--codepoints" in sys.argv:
    with open(sys.argv[sys.argv.index("--codepoints") + 1], encoding="utf-8") as f:
        points = [ord(json.loads(line)["text"][1]) for line in f]
    category = ctypes.CDLL("libutf8proc.so.2").utf8proc_category
    newer = [i for i in diff if category(points[i]) == 0]  # 0: Cn, unassigned for utf8proc
    diff = [i for i in diff if category(points[i]) != 0]
    if newer:
        print(f"note {what}: {len(newer)} code points unknown to utf8proc classified by Hugging Face's newer Unicode "
              f"(e.g. U+{points[newer[0]]:04X})")
for i in diff[:5]:
    print(f"line {i + 1}:\n  mmc: {m[i][:300]}\n  hf:  {h[i][:300]}")
if diff:
    sys.exit(f"FAIL {what}: {len(diff)} of {len(m)} lines differ")
print(f"ok {what}: {len(m) - 1 - len(newer)} lines identical")
