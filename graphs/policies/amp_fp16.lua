-- amp_fp16: torch.autocast("cuda", dtype=torch.float16) as PyTorch 2.11 applies it
-- (docs/precision.md §1), with fp32 master weights and a dynamic loss scale (GradScaler).
-- Each rule names a precision class of ops (see README, "Precision policies"), an op, or
-- nodes by name (a shell glob), and the dtype they compute in; the best match wins
-- (highest priority, then the rule written last).
return policy {
  name = "amp_fp16",
  rounding = "eager",     -- round wherever PyTorch eager rounds; "fused" keeps fp32 inside kernels
  master = "f32",         -- master weights, gradients and AdamW state
  loss_scaling = true,    -- GradScaler: fp16 gradients underflow without it
  -- autocast's lower_precision_fp list: linear, attention (SDPA)
  rule { class = "lower_precision", compute = "f16" },
  -- autocast's fp32 list: rms_normalize (pow, mean, rsqrt), sum
  rule { class = "fp32", compute = "f32" },
  -- not listed: embedding, add, mul, silu, rope, cross_entropy run in their inputs' dtype
  rule { class = "follow", compute = "follow" },
}
