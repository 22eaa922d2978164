-- expect: rule_limit.lua:5: rule: the graph has 10000 precision rules, the most a graph file may make
-- every rule is matched against every node, so their number is bounded as the nodes' is
loss(sum_all(param("w", {2}, "ones")))
for i = 1, 20000 do
  rule { op = "silu", compute = "f32" }
end
