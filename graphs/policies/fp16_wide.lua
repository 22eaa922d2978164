-- fp16_wide: keeps more in fp16 than autocast does. The residual stream is fp16 from the
-- embedding on, RoPE and the norm's weight multiply run in fp16 (so q, k and the norm
-- outputs are stored in fp16 and no cast is needed before the matmuls), and fused kernels
-- keep fp32 in registers instead of rounding at every op. RMSNorm's reduction still
-- computes in fp32 (as every kernel does inside), and the loss is fp32.
return policy {
  name = "fp16_wide",
  rounding = "fused",
  master = "f32",
  loss_scaling = true,
  rule { class = "lower_precision", compute = "f16" },
  rule { class = "fp32", compute = "f32" },
  rule { class = "follow", compute = "follow" },
  rule { op = "embedding", compute = "f16" },
  rule { op = "rope", compute = "f16" },
  rule { op = "mul", compute = "f16" },
  rule { op = "add_", compute = "f16" },
}
