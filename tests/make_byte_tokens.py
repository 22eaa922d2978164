#!/usr/bin/env python3
"""Writes an mmc token file of a text file's bytes: id = byte + 3, after MiniMind's
special tokens 0 (pad), 1 (bos), 2 (eos); one bos at the start. Used by tests to train the
tiny graph (vocab 320) on real text without a tokenizer.

usage: make_byte_tokens.py TEXT_FILE... OUT.bin [--row-length N]"""
import array
import struct
import sys

args = sys.argv[1:]
row = 0
if "--row-length" in args:
    i = args.index("--row-length")
    row = int(args[i + 1])
    del args[i:i + 2]
*inputs, out = args
ids = array.array("H", [1])
for path in inputs:
    ids.extend(b + 3 for b in open(path, "rb").read())
if row:
    del ids[len(ids) // row * row:]
if sys.byteorder != "little":
    ids.byteswap()
header = b"mmctoken" + struct.pack("<IIQII", 1, 320, len(ids), row, 0) + bytes(32)
with open(out, "wb") as f:
    f.write(header)
    f.write(ids.tobytes())
