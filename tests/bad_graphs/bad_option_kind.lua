-- expect: bad_option_kind.lua:6: attention: option 'causal' must be true or false
-- (Lua's 0 is true: a number here would silently mean causal)
local q = param("q", {1, 4, 8}, "normal(0,1)")
local k = param("k", {1, 4, 8}, "normal(0,1)")
local v = param("v", {1, 4, 8}, "normal(0,1)")
local o = attention(q, k, v, { heads = 2, causal = 0 })
loss(sum_all(o))
