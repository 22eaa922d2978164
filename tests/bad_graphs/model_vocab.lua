-- expect: model_vocab.lua:4: model: vocab 100, but the embedding emb (
-- expect: model_vocab.lua:7) of the tokens input input_ids has 8 rows [8,3]
local w = param("w", {8, 3}, "normal(0,1)")
model { vocab = 100 }
local ids = input("input_ids", {2, 4}, "i32", { role = "tokens" })
local labels = input("labels", {2, 4}, "i32", { role = "targets" })
local x = embedding(w, ids, { name = "emb" })
loss(cross_entropy(linear(x, param("head", {8, 3}, "normal(0,1)")), labels))
