-- expect: shape_mismatch.lua:5: linear: last dim of x != in_features of weight
-- expect: [2,3,8]
-- expect: [5,7]
local x = param("x", {2, 3, 8}, "normal(0,1)")
local y = linear(x, param("w", {5, 7}, "normal(0,1)"))
loss(sum_all(y))
