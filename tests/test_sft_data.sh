#!/usr/bin/env bash
# `mmc data --sft` against MiniMind's SFTDataset, reimplemented in tests/sft_reference.py with
# ids from Hugging Face tokenizers and templates run by jinja2: every row's ids and loss-mask
# bits for positional and as-written roles, mmc's and MiniMind2's templates, --pack and
# --val; bad lines, --strict, the template check, thread-count independence, `mmc tokens`
# on masked files, version 1 files still read and damaged version 2 files refused.
set -euo pipefail
cd "$(dirname "$0")/.."
MMC=${MMC:-./mmc}
python3 -c "import tokenizers, jinja2" 2>/dev/null || { echo "needs python3 with Hugging Face tokenizers and jinja2: pip install -r tests/requirements.txt"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 tests/sft_reference.py "$MMC" tokenizer/default/tokenizer.json "$T"
