-- expect: name_newline.lua:5: named: the name "h\nparam 1 evil shape=1 offset=0 node=%0" has a newline at character 2
-- a newline in a name would start a plan line of its own
local w = param("w", {2}, "ones")
local h = silu(w)
named(h, "h\nparam 1 evil shape=1 offset=0 node=%0")
loss(sum_all(h))
