#!/usr/bin/env python3
"""An independent model of each loss-scaler rule, checked against the scales mmc's rule
(templates/step_state.h, mmc_scaler_update) gave on random overflow sequences.

  python3 tests/scaler_model.py TRAJECTORIES.jsonl   (written by build/tests/test_scaler --trajectories)

Each rule as its source states it:
  - GradScaler.update (torch/amp/grad_scaler.py, _amp_update_scale_): on inf/nan the scale
    times backoff_factor and the growth tracker to 0; else the tracker + 1, and at
    growth_interval the scale times growth_factor (kept only if finite) and the tracker to 0;
  - max: a growth never takes the scale above it (a cap);
  - min: a backoff never takes it below it (a floor);
  - hysteresis N: only the N-th consecutive overflowing update and those after it back off;
    a clean update starts the count again (DeepSpeed's consecutive_hysteresis);
  - fixed: the scale never changes.
The scale is an f32; each product is taken in double and rounded to it.
"""
import json
import math
import struct
import sys


def f32(x):
    """x rounded to the nearest float32 (inf past its range)"""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def model(c):
    scale = f32(c["init"])
    tracker = streak = 0
    out = []
    for f in c["found"]:
        if c["fixed"]:
            out.append(scale)
            continue
        if f == "x":
            tracker = 0
            streak += 1
            if streak >= c["hysteresis"]:
                nxt = scale * c["backoff"]
                if c["min"] > 0:
                    nxt = max(nxt, c["min"])
                scale = f32(nxt)
        else:
            streak = 0
            tracker += 1
            if tracker == c["interval"]:
                nxt = scale * c["growth"]
                if c["max"] > 0:
                    nxt = min(nxt, c["max"])
                grown = f32(nxt)
                if math.isfinite(grown):
                    scale = grown
                tracker = 0
        out.append(scale)
    return out


def main():
    cases = [json.loads(line) for line in open(sys.argv[1])]
    bad = 0
    for c in cases:
        want = model(c)
        got = c["scales"]
        diff = next((i for i, (a, b) in enumerate(zip(got, want)) if f32(a) != b), None)
        if diff is not None or len(got) != len(want):
            bad += 1
            print(f"{c['case']}: update {diff + 1 if diff is not None else '?'}: mmc {got[diff] if diff is not None else '?'}, "
                  f"the model {want[diff] if diff is not None else '?'}")
    rates = sorted({round(100 * c["found"].count("x") / len(c["found"])) for c in cases})
    print(f"scaler model: {len(cases)} sequences of {len(cases[0]['found'])} updates ({', '.join(sorted({c['case'] for c in cases}))}; "
          f"overflow rates {rates[0]}% to {rates[-1]}%): {'all scales equal' if not bad else f'{bad} differ'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
