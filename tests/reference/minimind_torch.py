#!/usr/bin/env python3
"""MiniMind2-small in PyTorch, written from the numerical contract (docs/precision.md §1.1):
MiniMind's model code of 2025-10 (RMSNorm with x.float() and type_as, rotary embeddings from
f32 cos/sin tables, grouped-query SDPA, in-place residual add `h += residual`, SwiGLU, tied
embeddings) and its trainer (autocast fp16 + GradScaler + clip_grad_norm_(1.0) + AdamW,
masked mean cross-entropy, the cosine learning rate). It reads mmc's checkpoints and token
files, so both sides start from the same weights and see the same batches.

  minimind_torch.py grads  --run DIR --data F.bin --policy fp32|amp_fp16 [--scale S] -o G.safetensors
  minimind_torch.py train  --run DIR --data F.bin --steps N [--scale-interval K] [--inject-inf U] -o M.jsonl

DIR is an mmc run folder (`mmc init` or `mmc train --out` makes one): config.json, with the
dims in MiniMind's names, and model.safetensors.
`grads` writes the loss and every parameter's gradient of loss * scale (metadata "loss").
"""
import argparse
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

# ---- the model (MiniMind model/model_minimind.py, 2025-10)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self.weight * self._norm(x.float()).type_as(x)


def precompute_freqs_cis(dim, end, theta):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.cat([torch.cos(freqs), torch.cos(freqs)], dim=-1), torch.cat([torch.sin(freqs), torch.sin(freqs)], dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)
    q_embed = (q * cos.unsqueeze(1)) + (rotate_half(q) * sin.unsqueeze(1))
    k_embed = (k * cos.unsqueeze(1)) + (rotate_half(k) * sin.unsqueeze(1))
    return q_embed, k_embed


def repeat_kv(x, n_rep):
    bs, slen, kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return x[:, :, :, None, :].expand(bs, slen, kv_heads, n_rep, head_dim).reshape(bs, slen, kv_heads * n_rep, head_dim)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads, self.n_kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = c["hidden_size"] // self.n_heads
        d = c["hidden_size"]
        self.q_proj = nn.Linear(d, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        xq, xk, xv = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        xq = xq.view(b, t, self.n_heads, self.head_dim)
        xk = xk.view(b, t, self.n_kv, self.head_dim)
        xv = xv.view(b, t, self.n_kv, self.head_dim)
        xq, xk = apply_rotary_pos_emb(xq, xk, cos[:t], sin[:t])
        rep = self.n_heads // self.n_kv
        xq, xk, xv = xq.transpose(1, 2), repeat_kv(xk, rep).transpose(1, 2), repeat_kv(xv, rep).transpose(1, 2)
        out = F.scaled_dot_product_attention(xq, xk, xv, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = FeedForward(c)

    def forward(self, h, cos, sin):
        residual = h
        h = self.self_attn(self.input_layernorm(h), cos, sin)
        h += residual  # in place: keeps the attention output's dtype (fp16 under autocast)
        return h + self.mlp(self.post_attention_layernorm(h))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Block(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        cos, sin = precompute_freqs_cis(c["hidden_size"] // c["num_attention_heads"], c.get("max_position_embeddings", 32768),
                                        c["rope_theta"])
        self.register_buffer("freqs_cos", cos, persistent=False)
        self.register_buffer("freqs_sin", sin, persistent=False)

    def forward(self, ids):
        h = self.embed_tokens(ids)
        for layer in self.layers:
            h = layer(h, self.freqs_cos, self.freqs_sin)
        return self.norm(h)


class MiniMindForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = Model(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        self.model.embed_tokens.weight = self.lm_head.weight

    def forward(self, ids):
        return self.lm_head(self.model(ids))


def masked_loss(logits, y, mask):
    """MiniMind's loss: per-token CE times the loss mask, summed, over the mask's sum. The mask is
    target != pad for pretraining rows, the file's loss-mask plane for SFT rows (train_full_sft.py)."""
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), reduction="none").view(y.size())
    return (loss * mask).sum() / mask.sum()


# ---- mmc's files


def read_tokens(path):
    """The ids, row length, pad id and the loss-mask bit of each token (None without a mask plane:
    format 1, or format 2 without flag 1), as README's "Token files" lays them out."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"mmctoken", path
    version, vocab, count, row, pad = struct.unpack("<IIQII", data[8:32])
    header, mask = 64, None
    if version == 2:
        header = 128
        flags, _, mask_at = struct.unpack("<IIQ", data[64:80])
        if flags & 1:
            bits = torch.frombuffer(bytearray(data[mask_at:mask_at + (count + 7) // 8]), dtype=torch.uint8)
            mask = ((bits.unsqueeze(1) >> torch.arange(8, dtype=torch.uint8)) & 1).flatten()[:count].to(torch.int32)
    ids = torch.frombuffer(bytearray(data[header:header + 2 * count]), dtype=torch.int16).to(torch.int32) & 0xFFFF
    return ids, row, pad, mask


class Batches:
    """Rows of T+1 tokens in file order, wrapping, as mmc's data reader gives them."""

    def __init__(self, path, batch, seq):
        self.ids, row, self.pad, self.mask = read_tokens(path)
        assert row in (0, seq + 1), (row, seq)
        self.batch, self.seq = batch, seq
        self.rows = len(self.ids) // (seq + 1)
        self.position = 0

    def next(self, device):
        """inputs, targets and the loss mask of the targets (MiniMind's loss_mask[1:])"""
        xs, ms = [], []
        for _ in range(self.batch):
            r = self.position % self.rows
            self.position += 1
            span = slice(r * (self.seq + 1), (r + 1) * (self.seq + 1))
            xs.append(self.ids[span])
            if self.mask is not None:
                ms.append(self.mask[span])
        rows = torch.stack(xs).long().to(device)
        y = rows[:, 1:].contiguous()
        mask = torch.stack(ms)[:, 1:].long().to(device) if ms else (y != self.pad).long()
        return rows[:, :-1].contiguous(), y, mask


def load(run, device):
    c = json.load(open(os.path.join(run, "config.json")))
    model = MiniMindForCausalLM(c).to(device)
    weights = load_file(os.path.join(run, "model.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected, unexpected
    assert not [k for k in missing if not k.startswith("model.freqs")], missing
    return model, c


def context(policy):
    if policy == "amp_fp16":
        return torch.autocast("cuda", dtype=torch.float16)
    if policy == "amp_bf16":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cuda", enabled=False)


def cmd_grads(a):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, c = load(a.run, device)
    mm = c["mmc"]
    data = Batches(a.data, int(mm["batch"]), int(mm["seq"]))
    x, y, mask = data.next(device)
    with context(a.policy) if device == "cuda" else torch.autocast("cpu", enabled=False):
        loss = masked_loss(model(x), y, mask)
    (loss * a.scale).backward()
    grads = {n: p.grad.detach().float().contiguous().cpu() for n, p in model.named_parameters()}
    save_file(grads, a.o, metadata={"loss": repr(loss.item()), "scale": repr(a.scale), "policy": a.policy})
    print(f"loss {loss.item():.9g}")


def sdpa_context(name):
    from contextlib import nullcontext
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    return nullcontext() if name == "default" else sdpa_kernel(backends[name])


def cmd_train(a):
    torch.backends.cuda.matmul.allow_tf32 = False
    device = "cuda"
    model, c = load(a.run, device)
    mm = c["mmc"]
    accum = int(mm.get("accumulation", 1))
    lr0 = a.lr
    data = Batches(a.data, int(mm["batch"]), int(mm["seq"]))
    opt = torch.optim.AdamW(model.parameters(), lr=lr0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    scaler = torch.amp.GradScaler("cuda", init_scale=65536.0, growth_interval=a.scale_interval,
                                  enabled=a.policy == "amp_fp16")
    total = a.steps * accum
    out = open(a.o, "w")
    skipped = 0
    for u in range(a.steps):
        losses = []
        for m in range(accum):
            s = u * accum + m
            lr = lr0 / 10 + 0.5 * lr0 * (1 + math.cos(math.pi * s / total))
            for g in opt.param_groups:
                g["lr"] = lr
            x, y, mask = data.next(device)
            with context(a.policy), sdpa_context(a.sdpa):
                loss = masked_loss(model(x), y, mask)
            losses.append(loss.item())
            scaler.scale(loss / accum).backward()
        if u + 1 == a.inject_inf:
            next(model.parameters()).grad.view(-1)[0] = float("inf")
        scaler.unscale_(opt)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        before = scaler.get_scale() if scaler.is_enabled() else 1.0
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        scale = scaler.get_scale() if scaler.is_enabled() else 1.0
        if scale < before:
            skipped += 1
        tracker = int(scaler._get_growth_tracker()) if scaler.is_enabled() else 0
        out.write(json.dumps({"update": u + 1, "loss": sum(losses) / accum, "lr": lr, "scale": scale,
                              "growth_tracker": tracker, "skipped": skipped, "grad_norm": norm.item()}) + "\n")
    out.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grads")
    g.add_argument("--run", required=True)
    g.add_argument("--data", required=True)
    g.add_argument("--policy", default="amp_fp16")
    g.add_argument("--scale", type=float, default=1.0)
    g.add_argument("-o", required=True)
    t = sub.add_parser("train")
    t.add_argument("--run", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--policy", default="amp_fp16")
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--lr", type=float, default=5e-4)
    t.add_argument("--scale-interval", type=int, default=2000)
    t.add_argument("--inject-inf", type=int, default=0)
    t.add_argument("--sdpa", default="default", help="default, or force one backend: math, flash, efficient, cudnn")
    t.add_argument("-o", required=True)
    a = p.parse_args()
    {"grads": cmd_grads, "train": cmd_train}[a.cmd](a)


if __name__ == "__main__":
    main()
