-- expect: syntax_error.lua:5:
-- expect: unexpected symbol near '*'
local x = param("x", {2, 3}, "normal(0,1)")
local y = silu(x)
local z = y +* 2
loss(sum_all(z))
