-- expect: unknown_op.lua:5: unknown op or DSL function 'matmull'
local x = param("x", {2, 3}, "normal(0,1)")
local w = param("w", {4, 3}, "normal(0,1)")
-- a typo for linear
local y = matmull(x, w)
loss(sum_all(y))
