#!/usr/bin/env python3
"""Writes corpus.jsonl, mmc's built-in corpus, from the Debian package fortunes-zh
(apt-get install fortunes-zh): 300 Tang poems, 100 Song lyrics and the `chinese` fortunes
(sayings and Debian tips). One {"text": ...} line per fortune, the terminal colour codes
taken out. Run it again to refresh the corpus; then retrain the built-in tokenizer with
    ./mmc tokenizer train tokenizer/default/corpus.jsonl --vocab 6400 -o tokenizer/default/tokenizer.json
usage: make_corpus.py [OUT.jsonl]   (default: corpus.jsonl next to this script)
"""
import json
import os
import re
import sys

FORTUNES = "/usr/share/games/fortunes"
SOURCES = ["tang300", "song100", "chinese"]  # poems first, then sayings
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b")


def fortunes(path):
    with open(path, encoding="utf-8") as f:
        text = ESCAPE.sub("", f.read())
    for entry in re.split(r"^%\n", text, flags=re.M):
        lines = [line.rstrip() for line in entry.split("\n")]
        body = "\n".join(lines).strip("\n")
        if body.strip():
            yield body


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.jsonl")
    missing = [s for s in SOURCES if not os.path.exists(os.path.join(FORTUNES, s))]
    if missing:
        sys.exit(f"make_corpus: {', '.join(missing)} not found in {FORTUNES}: apt-get install fortunes-zh")
    n = 0
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        for source in SOURCES:
            for text in fortunes(os.path.join(FORTUNES, source)):
                f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                n += 1
    os.replace(out + ".tmp", out)
    print(f"{out}: {n} documents")


if __name__ == "__main__":
    main()
