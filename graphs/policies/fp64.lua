-- fp64: everything in float64, for checking gradients against finite differences on the
-- ref backend (tests/test_gradcheck.c). Not meant for training speed.
return policy {
  name = "fp64",
  rounding = "eager",
  master = "f64",
  loss_scaling = false,
  at_least = "f64",       -- the graph's explicit casts (RMSNorm's x.float()) widen to f64 too
  rule { class = "lower_precision", compute = "f64" },
  rule { class = "fp32", compute = "f64" },
  rule { class = "follow", compute = "promote" },
}
