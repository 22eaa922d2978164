#!/usr/bin/env python3
"""`make bench`: the MiniMind2-small training step (graphs/minimind.lua, amp_fp16 under its
default eager rounding) in mmc beside PyTorch eager (autocast fp16 + GradScaler + AdamW)
and torch.compile with fused AdamW, at each batch size, seq 512, in one run on one GPU.

mmc runs `mmc bench` twice per batch: with an empty kernel cache (NVRTC compiles, so its
first step is a cold start) and again warm, with the per-kernel profile. At the first batch size
mmc also runs amp_fp16 with rounding = "fused" (the policy file with that one line changed)
and amp_bf16, so the table shows what each precision choice costs, and amp_fp16 compiled
with --fuse-loss-grad (the cross-entropy's gradient in the loss's kernel). PyTorch runs
bench/torch_bench.py, one process per setup. Every setup: median of CUDA-event timings of
at least 20 consecutive steps after a warm-up, tokens/s, MFU (FLOPs per token 6 N + 6 L T d
against the H200's 989 TFLOP/s dense fp16), peak device memory (mmc: all it took; PyTorch:
max_memory_reserved), kernel launches per step and the time to the first step. Results go
to bench/results/*.json; the last lines printed are the table.

  python3 bench/train_bench.py [--batches 64,32] [--steps 30] [--warmup 5] [--no-torch]
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

from gpu_clock import ClockSampler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
PEAK_FLOPS = 989e12  # H200 (SXM) dense fp16 tensor-core peak, datasheet


CLOCKS = {}  # by result file: the GPU's clocks while the command that wrote it ran (gpu_clock.py)


def run(cmd, env=None, result=None):
    print("$ " + " ".join(cmd), flush=True)
    sampler = ClockSampler() if result else None
    p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if sampler:
        CLOCKS[result] = sampler.stop()
    print(p.stdout, end="", flush=True)
    if p.returncode:
        sys.exit(f"bench: {' '.join(cmd)} failed with status {p.returncode}")
    return p.stdout


def load(path):
    with open(path) as f:
        return dict(json.loads(f.readline()), **CLOCKS.get(path, {}))


def plan_config(plan_dir):
    with open(os.path.join(plan_dir, "plan")) as f:
        for line in f:
            if line.startswith("config "):
                return {k: float(v) for k, v in (w.split("=", 1) for w in line.split()[1:])}
    sys.exit(f"bench: {plan_dir}/plan has no config line")


def variants(batch, a, env):
    """mmc at this batch under amp_fp16 with rounding = "fused", under amp_bf16, and with the
    compile options that are not yet the default (--fuse-loss-grad)"""
    rows = []
    with open(os.path.join(ROOT, "graphs", "policies", "amp_fp16.lua")) as f:
        text = f.read()
    fused = text.replace('rounding = "eager"', 'rounding = "fused"').replace('name = "amp_fp16"', 'name = "amp_fp16_fused"')
    if fused == text:
        sys.exit("bench: graphs/policies/amp_fp16.lua has no 'rounding = \"eager\"' line to change")
    policy_file = os.path.join(ROOT, "build", "bench", "amp_fp16_fused.lua")
    os.makedirs(os.path.dirname(policy_file), exist_ok=True)
    with open(policy_file, "w") as f:
        f.write(fused)
    for setup, tag, options in (("mmc amp_fp16, rounding fused", "fused", ["--policy", policy_file]),
                                ("mmc amp_bf16", "amp_bf16", ["--policy", "amp_bf16"]),
                                ("mmc amp_fp16, --fuse-loss-grad", "loss_grad", ["--fuse-loss-grad"])):
        plan = os.path.join(ROOT, "build", "bench", f"minimind_b{batch}_{tag}")
        run(["./mmc", "compile", "graphs/minimind.lua", "-D", f"batch={batch}", *options, "-o", plan, "--quiet"])
        out = os.path.join(RESULTS, f"mmc_b{batch}_{tag}.json")
        run(["./mmc", "bench", plan, "--steps", str(a.steps), "--warmup", str(a.warmup), "--json", out], env, out)
        rows.append(dict(load(out), setup=setup))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="64,32")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-torch", action="store_true", help="mmc only")
    a = ap.parse_args()
    if a.steps < 20:
        sys.exit("bench: --steps must be at least 20")
    os.makedirs(RESULTS, exist_ok=True)
    rows = []
    batches = [int(b) for b in a.batches.split(",")]
    for batch in batches:
        plan = os.path.join(ROOT, "build", "bench", f"minimind_b{batch}")
        run(["./mmc", "compile", "graphs/minimind.lua", "-D", f"batch={batch}", "-o", plan, "--quiet"])
        cfg = plan_config(plan)
        cache = tempfile.mkdtemp(prefix="mmc-cache-")
        env = dict(os.environ, MMC_CACHE=cache)
        cold_json = os.path.join(RESULTS, f"mmc_b{batch}_cold.json")
        run(["./mmc", "bench", plan, "--steps", "20", "--warmup", "3", "--json", cold_json], env)
        warm_json = os.path.join(RESULTS, f"mmc_b{batch}.json")
        run(["./mmc", "bench", plan, "--steps", str(a.steps), "--warmup", str(a.warmup), "--profile", "--json", warm_json],
            env, warm_json)
        if batch != batches[0]:
            shutil.rmtree(cache, ignore_errors=True)
        mmc = load(warm_json)
        mmc["first_step_cold_s"] = load(cold_json)["first_step_s"]
        mmc["first_step_warm_s"] = mmc["first_step_s"]
        flops = 6 * mmc["params"] + 6 * cfg["layers"] * cfg["seq"] * cfg["dim"]
        batch_rows = [dict(mmc, setup="mmc amp_fp16")]
        if batch == batches[0]:
            batch_rows += variants(batch, a, env)
            shutil.rmtree(cache, ignore_errors=True)
        if not a.no_torch:
            for mode in ("eager", "compile"):
                out = os.path.join(RESULTS, f"torch_{mode}_b{batch}.json")
                run([sys.executable, "bench/torch_bench.py", "--mode", mode, "--batch", str(batch), "--seq",
                     str(int(cfg["seq"])), "--steps", str(a.steps), "--warmup", str(a.warmup), "--json", out], result=out)
                r = load(out)
                r["setup"] = {"eager": "PyTorch eager", "compile": "torch.compile"}[mode]
                batch_rows.append(r)
        ref = next((r for r in batch_rows if r["setup"] == "torch.compile"), None)
        for r in batch_rows:
            r["mfu"] = r["tokens_per_s"] * flops / PEAK_FLOPS
            r["flops_per_token"] = flops
            if ref:
                r["vs_torch_compile"] = r["tokens_per_s"] / ref["tokens_per_s"]
        rows += batch_rows
    summary = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "gpu": next((r["gpu"] for r in rows if "gpu" in r), None), "rows": rows}
    with open(os.path.join(RESULTS, "summary.json.tmp"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    os.replace(os.path.join(RESULTS, "summary.json.tmp"), os.path.join(RESULTS, "summary.json"))

    print(f"\nMiniMind2-small training step, seq 512, amp_fp16 ({summary['gpu'] or 'GPU'}), median of {a.steps} steps")
    print("| setup | batch | tokens/s | ms/step | MFU | peak GiB | launches/step | first step | tokens/s vs torch.compile |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        first = (f"{r['first_step_cold_s']:.1f} s cold, {r['first_step_warm_s']:.2f} s warm" if "first_step_cold_s" in r
                 else f"{r['first_step_s']:.1f} s")
        ratio = f"{r['vs_torch_compile']:.2f}x" if "vs_torch_compile" in r else "-"
        launches = (f"{r['launches_per_step']} ({r['launches_micro']} + {r['launches_update']} update)"
                    if "launches_update" in r else f"{r['launches_per_step']}")
        print(f"| {r['setup']} | {r['batch']} | {r['tokens_per_s'] / 1e6:.3f} M | {r['ms_per_step']:.2f} | "
              f"{100 * r['mfu']:.1f}% | {r['device_bytes'] / 2**30:.2f} | {launches} | {first} | {ratio} |")
    clocked = [r for r in rows if "sm_clock_mhz" in r]
    if clocked:
        print("\nThe GPU while each setup ran (nvidia-smi every 100 ms, samples at least 80% busy; median):")
        for r in clocked:
            print(f"  {r['setup']}, batch {r['batch']}: SM clock {r['sm_clock_mhz']:.0f} MHz, {r['power_w']:.0f} W, "
                  f"at the power cap {100 * r['power_capped']:.0f}% of the time")


if __name__ == "__main__":
    main()
