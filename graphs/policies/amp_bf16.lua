-- amp_bf16: torch.autocast("cuda", dtype=torch.bfloat16). bf16 has fp32's exponent range,
-- so gradients do not underflow and no loss scaling is needed (MiniMind's current trainer
-- enables its GradScaler only for float16).
return policy {
  name = "amp_bf16",
  rounding = "eager",
  master = "f32",
  loss_scaling = false,
  rule { class = "lower_precision", compute = "bf16" },
  rule { class = "fp32", compute = "f32" },
  rule { class = "follow", compute = "follow" },
}
