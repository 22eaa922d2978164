-- expect: loss_not_scalar.lua:3: loss: must be a scalar
local x = param("x", {2, 3}, "normal(0,1)")
loss(silu(x))
