#!/usr/bin/env python3
"""Writes the corpora the tokenizer tests compare mmc and Hugging Face tokenizers on:
  corpus.jsonl      Chinese (the built-in corpus), English with every contraction,
                    digits, emoji, mixed white space and newlines, special tokens in text,
                    scripts from Arabic to Tamil, and random strings of all of them;
  codepoints.jsonl  every code point but the surrogates, each in contexts that show which
                    class (letter, number, space, other) the pre-tokenizer puts it in;
  invalid-N.bin     byte strings that are not valid UTF-8.
Fixed seed: the same files every run. usage: make_test_corpus.py OUTDIR"""
import json
import os
import random
import sys
import unicodedata

out = sys.argv[1]
rng = random.Random(4)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "..", "..", "tokenizer", "default", "corpus.jsonl"), encoding="utf-8") as f:
    chinese = [json.loads(line)["text"] for line in f]

def is_char(c):
    return not 0xD800 <= c <= 0xDFFF


SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PIECES = [
    "Hello world", "It's", "they're", "we've", "I'm", "you'll", "he'd", "don't", "IT'S", "'s", "''s", "'ll've",
    "3.14159", "2024年10月1日", "1,000,000", "0x7fff", "١٢٣", "½", "Ⅻ", "①②", "99%", "-42", "1e-9",
    "😀", "👍🏽", "👨‍👩‍👧", "🇨🇳", "🏳️‍🌈", "❤️", "🤖🤖", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𠀀𠀁", "🀄",
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u3000", "\u00a0", "\u2028", "\u0085", "\u200b", "\ufeff",
    "\u180e", "\u001c", "\x00", "\x7f",
    "مرحبا بالعالم", "नमस्ते दुनिया", "안녕하세요 세계", "こんにちは世界", "Привет, мир", "Γειά σου Κόσμε",
    "שלום עולם", "สวัสดีชาวโลก", "வணக்கம்", "e\u0301", "ﬁ", "Å", "ß", "İ",
    "∑∫√∞≠", "→←↑↓", "©®™", "«»“”‘’", "…", "—", "!!!", "???", "...", "$$$", "#", "@user", "a_b", "C++",
    "<|", "|>", "<|im_end", "im_end|>", "<<|im_end|>>", "<|im_start|><|im_end|>",
    "床前明月光", "，", "。", "！", "？", "“", "”", "（）", "《》",
    "<tool_call>", " \t<tool_call>\n ", "hello", "world", "say hello  world  ",
]


# Random characters come from those Python's (older) Unicode tables know: code points
# assigned in later Unicode versions are classified by each library's own version (see
# the codepoint check in test_tokenizer_hf.sh).
ASSIGNED = [chr(c) for c in range(0x20, 0x110000) if is_char(c) and unicodedata.category(chr(c)) not in ("Cn", "Cs")]


def random_text():
    parts = []
    for _ in range(rng.randint(1, 30)):
        r = rng.random()
        if r < 0.5:
            parts.append(rng.choice(PIECES))
        elif r < 0.7:
            parts.append(rng.choice(SPECIAL))
        elif r < 0.85:
            s = rng.choice(chinese)
            i = rng.randrange(len(s))
            parts.append(s[i:i + rng.randint(1, 40)])
        else:
            parts.append("".join(rng.choice(ASSIGNED) for _ in range(rng.randint(1, 8))))
        if rng.random() < 0.5:
            parts.append(rng.choice([" ", "  ", "\n", "\t", " \n", "", ""]))
    return "".join(parts)


texts = chinese[:400] + [
    "The quick brown fox jumps over the lazy dog. It's 12:30 and we've 3 cats; they'll eat 1000000 fish.",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\t\tmore\ttabs\n\nnew  lines \n\n\n end",
    "<|im_start|>system\nYou are MiniMind.<|im_end|>\n<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|><|endoftext|>text<|im_end|>",
    "", " ", "\n", "a", "床", "😀",
] + [random_text() for _ in range(3000)]
with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
    for t in texts:
        f.write(json.dumps({"text": t}, ensure_ascii=rng.random() < 0.3) + "\n")

# Every code point c of planes 0-3 and 14 (plus a sample of the unassigned and private
# planes), one a line, as "a c 1 c ! c": next to a letter, a digit and a symbol, each class
# (letter, number, space, other) splits differently.
points = [c for c in range(0x110000) if is_char(c) and (c < 0x40000 or 0xE0000 <= c < 0xF0000 or c % 97 == 0)]
with open(os.path.join(out, "codepoints.jsonl"), "w", encoding="utf-8") as f:
    for c in points:
        f.write(json.dumps({"text": f"a{chr(c)}1{chr(c)}!{chr(c)}"}, ensure_ascii=False) + "\n")

invalid = [
    b"\xff", b"\xc0\xaf", b"\xe4\xb8", b"\xe4\xb8A", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98",
    b"abc\x80def", "床前".encode() + b"\xe6\x98" + "月光".encode(), b"\xf8\x88\x80\x80\x80", b"\xe0\x80\x80",
    b"<|im_end|>\xfe<|im_start|>", b"\xc3", b"\xef\xbb\xbf\xef\xbb", b" \x80 \x81\n\x82",
] + [bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))) for _ in range(25)]
for i, b in enumerate(invalid):
    with open(os.path.join(out, f"invalid-{i:02d}.bin"), "wb") as f:
        f.write(b)
