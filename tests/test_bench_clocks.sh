#!/usr/bin/env bash
# bench/gpu_clock.py's summary of nvidia-smi samples, on canned lines: the idle and the
# unreadable ones are left out, the medians and the share at the power cap are of the rest.
set -eu
cd "$(dirname "$0")/.."
python3 - <<'PY'
import sys
sys.path.insert(0, "bench")
from gpu_clock import summarize
lines = ["0, 1980, 120.5, 0x0000000000000000",       # idle: left out
         "100, 1635, 690.2, 0x0000000000000004",
         "97, 1500, 695.0, 0x0000000000000004",
         "99, 1980, 430.0, 0x0000000000000000",
         "100, [N/A], [N/A], [N/A]",                  # unreadable: left out
         "100, 16"]                                   # cut short when sampling stopped
s = summarize(lines)
assert s == {"sm_clock_mhz": 1635, "power_w": 690.2, "power_capped": 2 / 3}, s
assert summarize(["5, 1980, 100.0, 0x0"]) == {}
assert summarize([]) == {}
print("ok: gpu_clock.summarize")
PY
