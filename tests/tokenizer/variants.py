#!/usr/bin/env python3
"""Writes variants of a byte-level BPE tokenizer.json that exercise the less common parts
of the format, to compare mmc with Hugging Face on each:
  prefix     add_prefix_space: true
  noregex    use_regex: false (each piece between added tokens is one word)
  ignore     ignore_merges: true (a word that is a token is taken whole)
  added      more added tokens: plain and special, lstrip/rstrip, normalized, overlapping,
             one already in the vocabulary, one listed twice, merges as [a, b] pairs
  unk        the bytes 0x80..0x8F taken out of the vocabulary, unk_token, fuse_unk
  unkplain   the same without fuse_unk
  fallback   the same with byte_fallback and <0xNN> tokens instead of unk
  nodecoder  decoder: null (decoding joins the tokens' text with spaces)
usage: variants.py TOKENIZER.json OUTDIR (writes OUTDIR/variant-NAME.json)"""
import copy
import json
import os
import sys

src, out = sys.argv[1], sys.argv[2]
with open(src, encoding="utf-8") as f:
    base = json.load(f)


def byte_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def save(name, j):
    with open(os.path.join(out, f"variant-{name}.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=1)


def token(content, id, special=False, lstrip=False, rstrip=False, normalized=False):
    return {"id": id, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


j = copy.deepcopy(base)
j["pre_tokenizer"]["add_prefix_space"] = True
save("prefix", j)

j = copy.deepcopy(base)
j["pre_tokenizer"]["use_regex"] = False
save("noregex", j)

j = copy.deepcopy(base)
j["model"]["ignore_merges"] = True
save("ignore", j)

j = copy.deepcopy(base)
vocab = j["model"]["vocab"]
n = max(vocab.values()) + 1
in_vocab = next(t for t in vocab if len(t) > 2 and t.isascii() and t.isalpha())
j["added_tokens"] += [
    token("床前", n),
    token("<tool_call>", n + 1, special=True, lstrip=True, rstrip=True),
    token("hello", n + 2, normalized=True),
    token("world", n + 3, rstrip=True),
    token("<|im", n + 4),
    token(in_vocab, 0),                       # the id in the file is only a hint
    token("明月", n + 5, lstrip=True),
    token("明月", n + 5, lstrip=True, special=True),  # listed twice, now special
    token("  ", n + 6),
]
j["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in j["model"]["merges"]]
save("added", j)

chars = byte_chars()
gone = {chars[b] for b in range(0x80, 0x90)}
j = copy.deepcopy(base)
vocab = j["model"]["vocab"]
j["model"]["vocab"] = {t: i for t, i in vocab.items() if not (set(t) & gone)}
j["model"]["merges"] = [m for m in j["model"]["merges"]
                        if not (set(m if isinstance(m, str) else "".join(m)) & gone)]
j["model"]["unk_token"] = "<|endoftext|>"
j["model"]["fuse_unk"] = True
save("unk", j)
j["model"]["fuse_unk"] = False
save("unkplain", j)
j["model"]["unk_token"] = None
j["model"]["byte_fallback"] = True
n = max(vocab.values()) + 1
for c in sorted(gone):
    for b in c.encode("utf-8"):
        name = f"<0x{b:02X}>"
        if name not in j["model"]["vocab"]:
            j["model"]["vocab"][name] = n
            n += 1
save("fallback", j)

j = copy.deepcopy(base)
j["decoder"] = None
save("nodecoder", j)
