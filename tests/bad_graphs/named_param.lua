-- expect: named_param.lua:4: named: w is a parameter; its name is the one param() gave
local w = param("w", {2}, "ones")
local v = param("v", {2}, "ones")
named(w, "v")
loss(sum_all(mul(w, v)))
