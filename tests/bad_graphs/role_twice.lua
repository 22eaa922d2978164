-- expect: role_twice.lua:4: input labels: the role tokens is taken by input input_ids (at
-- expect: role_twice.lua:3)
local ids = input("input_ids", {2, 4}, "i32", { role = "tokens" })
local labels = input("labels", {2, 4}, "i32", { role = "tokens" })
local w = param("w", {8, 3}, "normal(0,1)")
loss(cross_entropy(embedding(w, ids), labels))
