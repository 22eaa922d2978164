-- expect: graph_too_large.lua:4: input x17 [1099511627776]: the graph's values hold more than 2^44 elements in all
-- each value may have 2^40 elements, the graph's values 2^44 together: the 17th is one too many
for i = 1, 17 do
  input("x" .. i, {1 << 40})
end
