#!/usr/bin/env bash
# The built-in corpus and tokenizer are what the project's recipe makes: the corpus is
# tokenizer/default/make_corpus.py's output from the Debian package fortunes-zh, and the
# tokenizer is `mmc tokenizer train` of that corpus (vocab 6400), from the file and from
# the copy embedded in ./mmc alike.
set -euo pipefail
cd "$(dirname "$0")/.."
MMC=${MMC:-./mmc}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if [ -e /usr/share/games/fortunes/tang300 ]; then
    python3 tokenizer/default/make_corpus.py "$T/corpus.jsonl" > /dev/null
    cmp "$T/corpus.jsonl" tokenizer/default/corpus.jsonl || { echo "FAIL: make_corpus.py does not make the committed corpus"; exit 1; }
    echo "ok corpus: make_corpus.py from fortunes-zh makes tokenizer/default/corpus.jsonl"
else
    echo "skipped the corpus check: fortunes-zh is not installed (tests/apt-packages.txt)"
fi
$MMC tokenizer train tokenizer/default/corpus.jsonl --vocab 6400 -o "$T/file.json" --quiet
$MMC tokenizer train --default -o "$T/embedded.json" --quiet
cmp "$T/file.json" tokenizer/default/tokenizer.json
cmp "$T/embedded.json" tokenizer/default/tokenizer.json
[ "$($MMC tokenizer encode default '床前明月光，疑是地上霜。')" = "$($MMC tokenizer encode tokenizer/default/tokenizer.json '床前明月光，疑是地上霜。')" ]
[ "$($MMC tokenizer decode default 1 3600 724 2136 2)" = "<|im_start|>床前明月<|im_end|>" ]
echo "ok tokenizer: mmc trains tokenizer/default/tokenizer.json from the corpus, file or embedded"
