-- expect: lua_steps_library.lua:4: the graph file ran past its limit of 100000000 Lua steps
-- a library function's own loop counts too: table.move walks every index of the range, in C
local t = {}
table.move(t, 1, 1 << 40, 2)
