-- expect: bad_rule_name.lua:4: rule name = "lm_haed" matches no node of graph
local x = param("x", {2, 3}, "normal(0,1)")
loss(sum_all(silu(x)))
rule { name = "lm_haed", compute = "f32" }
