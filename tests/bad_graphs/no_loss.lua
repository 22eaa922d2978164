-- expect: no_loss.lua:5: no loss
local x = param("x", {2, 3}, "normal(0,1)")
local y = silu(x)
-- forgot loss(...)
local z = sum_all(y)
