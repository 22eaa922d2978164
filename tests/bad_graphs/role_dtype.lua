-- expect: role_dtype.lua:3: input input_ids: the role tokens needs dtype i32, not f32
local w = param("w", {8, 3}, "normal(0,1)")
local ids = input("input_ids", {2, 4}, "f32", { role = "tokens" })
loss(sum_all(mul(ids, ids)))
