-- expect: bad_policy_file.lua:2: policy: rounding must be "eager" or "fused"
return policy {
  name = "broken",
  rounding = "sometimes",
}
