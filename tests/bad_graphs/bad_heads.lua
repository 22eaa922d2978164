-- expect: bad_heads.lua:5: attention: heads must be a positive multiple of kv_heads
-- expect: [1,4,12]
local q = param("q", {1, 4, 12}, "normal(0,1)")
local k = param("k", {1, 4, 8}, "normal(0,1)")
local o = attention(q, k, k, { heads = 3, kv_heads = 2 })
loss(sum_all(o))
