-- expect: shape_in_helper.lua:8 (in proj, :5): linear: last dim of x != in_features of weight
-- expect: [2,3,5]
local x = param("x", {2, 3, 8}, "normal(0,1)")
local function proj(h, n)
  return linear(h, param("w" .. n, {5, n}, "normal(0,1)"))
end
local a = proj(x, 8)
local b = proj(a, 7)
loss(sum_all(b))
