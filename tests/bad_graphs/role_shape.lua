-- expect: role_shape.lua:4: input labels: the role targets needs the shape of input input_ids (role tokens, [2,4]), not [2,5]
local w = param("w", {8, 3}, "normal(0,1)")
local ids = input("input_ids", {2, 4}, "i32", { role = "tokens" })
local labels = input("labels", {2, 5}, "i32", { role = "targets" })
loss(sum_all(embedding(w, ids)))
