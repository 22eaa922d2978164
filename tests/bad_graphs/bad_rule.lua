-- expect: bad_rule.lua:5: rule: unknown compute 'f8'
local x = param("x", {2, 3}, "normal(0,1)")
loss(sum_all(silu(x)))
precision "amp_fp16"
rule { op = "linear", compute = "f8" }
