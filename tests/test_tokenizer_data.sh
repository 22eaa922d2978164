#!/usr/bin/env bash
# `mmc data` against MiniMind's pretraining semantics (ids from Hugging Face tokenizers):
# rows of seq + 1 as <|im_start|> text <|im_end|> + padding, --pack, the --val split,
# bad lines reported and skipped or stopping --strict (which leaves no files), the same
# output for any number of threads, and --default. See tests/tokenizer/check_data.py.
set -euo pipefail
cd "$(dirname "$0")/.."
MMC=${MMC:-./mmc}
python3 -c "import tokenizers" 2>/dev/null || { echo "needs Hugging Face tokenizers: pip install -r tests/requirements.txt"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 tests/tokenizer/check_data.py "$MMC" tokenizer/default/tokenizer.json "$T"
