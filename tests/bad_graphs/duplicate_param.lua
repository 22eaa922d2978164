-- expect: duplicate_param.lua:4: param w: declared twice (first at
-- expect: duplicate_param.lua:3)
local a = param("w", {3}, "ones")
local b = param("w", {3}, "ones")
loss(sum_all(mul(a, b)))
