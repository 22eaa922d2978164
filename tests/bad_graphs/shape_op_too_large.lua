-- expect: shape_op_too_large.lua:5: linear %2: [1073741824,2048] has more than 2^40 elements
-- each input is small enough; the product the op makes is not
local x = input("x", {1 << 30, 1})
local w = param("w", {1 << 11, 1}, "ones")
loss(sum_all(linear(x, w)))
