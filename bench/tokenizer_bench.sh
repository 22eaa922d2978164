#!/usr/bin/env bash
# Encodes the same corpus with mmc and with Hugging Face tokenizers (encode_batch) on the
# same number of threads, in one run, and prints MB/s for both (the best of 3 runs each,
# timing only the encoding of texts already in memory); then mmc data's end-to-end rate
# (reading, JSON, encoding, writing) for the same corpus.
#   make bench-tokenizer [THREADS=n] [CORPUS=file.jsonl] [TOKENIZER=tokenizer.json]
# Without CORPUS: 32 MB spliced from the built-in corpus (bench/make_bench_corpus.py).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-$(nproc)}
TOKENIZER=${TOKENIZER:-tokenizer/default/tokenizer.json}
if [ -z "${CORPUS:-}" ]; then
    CORPUS=build/bench/tokenizer_corpus.jsonl
    mkdir -p build/bench
    [ -e "$CORPUS" ] || python3 bench/make_bench_corpus.py "$CORPUS" 32
fi
python3 -c "import tokenizers" 2>/dev/null || { echo "needs Hugging Face tokenizers: pip install tokenizers"; exit 1; }
echo "corpus $CORPUS ($(du -m "$CORPUS" | cut -f1) MB file), tokenizer $TOKENIZER, $THREADS threads"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; tokenizers $(python3 -c 'import tokenizers; print(tokenizers.__version__)')"
mmc_line=$(./mmc tokenizer bench "$TOKENIZER" "$CORPUS" --threads "$THREADS" --repeat 3)
hf_line=$(python3 bench/tokenizer_bench.py "$TOKENIZER" "$CORPUS" "$THREADS" 3)
echo "$mmc_line"
echo "$hf_line"
mmc_rate=$(echo "$mmc_line" | sed -E 's/.*: ([0-9.]+) MB\/s.*/\1/')
hf_rate=$(echo "$hf_line" | sed -E 's/.*: ([0-9.]+) MB\/s.*/\1/')
awk -v a="$mmc_rate" -v b="$hf_rate" 'BEGIN { printf "mmc / Hugging Face: %.2fx\n", a / b }'
./mmc data "$CORPUS" --tokenizer "$TOKENIZER" --seq 512 -o build/bench/tokenizer_bench.bin --threads "$THREADS" --quiet | tail -1 | sed 's/^/mmc data end to end: /'
rm -f build/bench/tokenizer_bench.bin
