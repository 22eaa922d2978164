-- expect: precision_outside.lua:5: precision:
-- expect: is /etc/passwd, outside the folders a graph file may read
local x = param("x", {2}, "ones")
loss(sum_all(x))
precision "../../../../../../../../../../etc/passwd"
