#!/usr/bin/env python3
"""One PyTorch setup of `make bench`: MiniMind2-small (tests/reference/minimind_torch.py's
model) trained as MiniMind trains it, autocast fp16 + GradScaler + clip_grad_norm_(1.0) +
AdamW, on a fixed random batch, either eagerly (AdamW's default foreach path) or with the
loss function under torch.compile and fused AdamW. Prints one JSON line and writes it to
--json: the median of CUDA-event timings of consecutive steps after the warm-up, the time
from the start of this process to the end of the first step (torch.compile compiles
there), kernel launches in one step (torch.profiler), and max_memory_reserved.

  torch_bench.py --mode eager|compile --batch 64 --seq 512 [--steps 30] [--warmup 5] [--json OUT]
"""
import time

START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from minimind_torch import MiniMindForCausalLM, masked_loss  # noqa: E402

# MiniMind2-small, as graphs/minimind.lua
CONFIG = dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2, intermediate_size=1408,
              vocab_size=6400, rms_norm_eps=1e-5, rope_theta=1e6, max_position_embeddings=32768)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["eager", "compile"], required=True)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args()

    torch.manual_seed(0)
    model = MiniMindForCausalLM(CONFIG).cuda()
    rows = torch.randint(0, CONFIG["vocab_size"], (a.batch, a.seq + 1), generator=torch.Generator().manual_seed(1)).cuda()
    ids, labels = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
    compiled = a.mode == "compile"
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            fused=True if compiled else None)
    scaler = torch.amp.GradScaler("cuda", init_scale=65536.0)

    def loss_of(x, y):
        with torch.autocast("cuda", dtype=torch.float16):
            return masked_loss(model(x), y, (y != 0).long())  # MiniMind's pretraining mask: targets not padding

    forward = torch.compile(loss_of) if compiled else loss_of

    def step():
        loss = forward(ids, labels)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    step()
    torch.cuda.synchronize()
    first_step_s = time.perf_counter() - START
    for _ in range(a.warmup - 1):
        step()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps + 1)]
    marks[0].record()
    for i in range(a.steps):
        step()
        marks[i + 1].record()
    torch.cuda.synchronize()
    ms = sorted(marks[i].elapsed_time(marks[i + 1]) for i in range(a.steps))

    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith(("Memcpy", "Memset"))]

    median = statistics.median(ms)
    tokens = a.batch * a.seq
    out = {"setup": f"torch_{a.mode}", "batch": a.batch, "seq": a.seq, "tokens_per_step": tokens, "steps": a.steps,
           "ms_per_step": median, "ms_min": ms[0], "ms_max": ms[-1], "tokens_per_s": tokens / (median * 1e-3),
           "device_bytes": torch.cuda.max_memory_reserved(), "launches_per_step": len(kernels),
           "first_step_s": first_step_s, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
           "optimizer": "AdamW fused" if compiled else "AdamW foreach"}
    line = json.dumps(out)
    print(line)
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
