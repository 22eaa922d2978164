-- expect: broadcast_mismatch.lua:5: add: shapes do not broadcast
-- expect: [2,3,8]
-- expect: [3,7]
local x, y = param("x", {2, 3, 8}, "normal(0,1)"), param("y", {3, 7}, "normal(0,1)")
local z = add(x, y)
loss(sum_all(z))
