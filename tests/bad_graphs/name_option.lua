-- expect: name_option.lua:4: silu: the name "%7" has '%' at character 1
-- '%' starts the names mmc makes itself
local w = param("w", {2}, "ones")
loss(sum_all(silu(w, { name = "%7" })))
