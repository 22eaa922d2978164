-- expect: lua_memory.lua: the graph file's Lua state ran past its limit of 1024 MiB
-- expect: (mmc compile --lua-memory MiB raises it)
local s = string.rep("x", 1 << 30)
