-- expect: shape_too_large.lua:4: param w: [1048576,1048576,1048576] has more than 2^40 elements, the most one value may have
-- 2^60 elements: shape_numel's int64 holds them, but no byte count after it would
local x = param("x", {2}, "ones")
local w = param("w", {1 << 20, 1 << 20, 1 << 20}, "ones")
loss(sum_all(x))
