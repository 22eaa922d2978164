-- fp32: everything in float32, no loss scaling (PyTorch without autocast).
return policy {
  name = "fp32",
  rounding = "eager",
  master = "f32",
  loss_scaling = false,
  rule { class = "lower_precision", compute = "f32" },
  rule { class = "fp32", compute = "f32" },
  rule { class = "follow", compute = "follow" },
}
