-- expect: bad_rule_op.lua:4: rule: unknown op 'matmul'
local x = param("x", {2, 3}, "normal(0,1)")
loss(sum_all(silu(x)))
rule { op = "matmul", compute = "f16" }
