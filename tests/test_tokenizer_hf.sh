#!/usr/bin/env bash
# The tokenizer against Hugging Face `tokenizers` (pip, tests/requirements.txt):
#   1. the trainer: mmc and tokenizers' BpeTrainer, given the same corpus and MiniMind's
#      settings, learn the same vocabulary and merges (on the built-in corpus and on a mixed
#      test corpus); the committed tokenizer/default/tokenizer.json is what mmc trains from
#      the committed corpus, byte for byte;
#   2. ids: mmc and tokenizers give identical ids on the test corpus (Chinese, English, digits,
#      emoji, white space of every kind, special tokens inside text, many scripts) and on
#      invalid UTF-8 (read the way bytes.decode("utf-8", "replace") reads it), for the trained
#      tokenizers and for variants exercising the rest of tokenizer.json (prefix space, no
#      regex, ignore_merges, added tokens with lstrip/rstrip, unk, byte_fallback, no decoder);
#      tokenizers loads mmc's tokenizer.json, so this also checks the trainer's output;
#   3. the pre-tokenizer puts every code point in the same class as tokenizers' regex does
#      (except code points newer than utf8proc's Unicode tables, which are only counted);
#   4. decode gives tokenizers' text, with and without --skip-special, and decoding the
#      ids of any valid text gives the text back.
set -euo pipefail
cd "$(dirname "$0")/.."
MMC=${MMC:-./mmc}
python3 -c "import tokenizers" 2>/dev/null || { echo "needs Hugging Face tokenizers: pip install -r tests/requirements.txt"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
H=tests/tokenizer
python3 $H/make_test_corpus.py "$T"

# 1. the trainer
$MMC tokenizer train tokenizer/default/corpus.jsonl --vocab 6400 -o "$T/default.json" --quiet
python3 $H/hf_train.py tokenizer/default/corpus.jsonl 6400 "$T/default-hf.json"
python3 $H/same_model.py "$T/default.json" "$T/default-hf.json"
cmp "$T/default.json" tokenizer/default/tokenizer.json || { echo "FAIL: tokenizer/default/tokenizer.json is not what mmc trains from the corpus"; exit 1; }
$MMC tokenizer train "$T/corpus.jsonl" --vocab 2000 -o "$T/mix.json" --quiet --threads 2
python3 $H/hf_train.py "$T/corpus.jsonl" 2000 "$T/mix-hf.json"
python3 $H/same_model.py "$T/mix.json" "$T/mix-hf.json"
$MMC tokenizer train "$T/corpus.jsonl" --vocab 2000 -o "$T/mix1.json" --quiet --threads 1
cmp "$T/mix.json" "$T/mix1.json"
echo "ok trainer: same vocabulary and merges as tokenizers' BpeTrainer"

# 2. ids
python3 $H/variants.py "$T/mix.json" "$T"
invalid=$(for f in "$T"/invalid-*.bin; do echo "--file $f"; done)
for tok in tokenizer/default/tokenizer.json "$T/mix.json" "$T"/variant-*.json; do
    name=$(basename "$tok" .json)
    $MMC tokenizer encode "$tok" --jsonl "$T/corpus.jsonl" > "$T/mmc.ids"
    python3 $H/hf_encode.py "$tok" --jsonl "$T/corpus.jsonl" > "$T/hf.ids" 2> "$T/hf.log"
    python3 $H/compare.py "$T/mmc.ids" "$T/hf.ids" "ids $name"
    # shellcheck disable=SC2086
    $MMC tokenizer encode "$tok" $invalid > "$T/mmc.ids"
    # shellcheck disable=SC2046
    python3 $H/hf_encode.py "$tok" --file "$T"/invalid-*.bin > "$T/hf.ids"
    python3 $H/compare.py "$T/mmc.ids" "$T/hf.ids" "invalid UTF-8 $name"
done

# 3. every code point
$MMC tokenizer encode "$T/mix.json" --pretokens --jsonl "$T/codepoints.jsonl" > "$T/mmc.pre"
python3 $H/hf_encode.py "$T/mix.json" --pretokens --jsonl "$T/codepoints.jsonl" > "$T/hf.pre"
python3 $H/compare.py "$T/mmc.pre" "$T/hf.pre" "pre-tokens of every code point" --codepoints "$T/codepoints.jsonl"

# 4. decode, and decode(encode(x)) == x
for tok in tokenizer/default/tokenizer.json "$T/mix.json"; do
    python3 $H/check_decode.py "$MMC" "$tok" "$T/corpus.jsonl" --roundtrip
done
for tok in "$T/variant-added.json" "$T/variant-fallback.json" "$T/variant-nodecoder.json"; do
    python3 $H/check_decode.py "$MMC" "$tok" "$T/corpus.jsonl"
done
