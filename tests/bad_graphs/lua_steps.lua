-- expect: lua_steps.lua:4: the graph file ran past its limit of 100000000 Lua steps
-- expect: (mmc compile --lua-steps N raises it)
-- a loop that never ends stops at the step limit, at the line it runs
while true do end
