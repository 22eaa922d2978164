-- expect: tie_taken.lua:5: tie: the name head.weight is taken (by param head.weight, at
-- expect: tie_taken.lua:3)
local h = param("head.weight", {4, 2}, "ones")
local e = param("embed.weight", {4, 2}, "ones")
tie("head.weight", e)
loss(sum_all(mul(h, e)))
