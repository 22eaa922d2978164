-- expect: role_unknown.lua:3: input input_ids: unknown role 'token' (tokens or targets)
local w = param("w", {8, 3}, "normal(0,1)")
local ids = input("input_ids", {2, 4}, "i32", { role = "token" })
loss(sum_all(embedding(w, ids)))
