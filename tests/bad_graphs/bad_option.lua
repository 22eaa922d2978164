-- expect: bad_option.lua:5: attention: unknown option 'head'
local q = param("q", {1, 4, 8}, "normal(0,1)")
local k = param("k", {1, 4, 8}, "normal(0,1)")
local v = param("v", {1, 4, 8}, "normal(0,1)")
local o = attention(q, k, v, { head = 2 })
loss(sum_all(o))
