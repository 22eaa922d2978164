-- expect: node_limit.lua:5: scale: the graph has 1000000 nodes, the most a graph file may make
-- a loop that makes nodes for ever ends at the node limit, long before the step limit
local x = param("w", {1}, "ones")
while true do
  x = scale(x, 2)
end
