-- expect: init_space.lua:3: param w: bad init 'normal(0, 1)'
-- the plan holds an initialiser as one word
local w = param("w", {2}, "normal(0, 1)")
loss(sum_all(w))
