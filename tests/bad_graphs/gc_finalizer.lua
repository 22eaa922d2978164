-- expect: gc_finalizer.lua:3: setmetatable: a graph file may not set __gc
-- Lua runs a finalizer with hooks off, so no step limit would stop this one
setmetatable({}, { __gc = function() while true do end end })
loss(sum_all(param("w", {2}, "ones")))
