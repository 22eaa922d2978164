-- expect: name_space.lua:4: param: the name "model.embed tokens.weight" has a space at character 12
-- expect: a name holds letters, digits and _ . - : / (as a state-dict key does)
-- the plan keeps a name between spaces, so a space would cut it there
local w = param("model.embed tokens.weight", {4, 2}, "ones")
loss(sum_all(w))
