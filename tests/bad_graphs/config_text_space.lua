-- expect: config_text_space.lua:3: config: note "two words" has a space at character 4
-- the plan's config line holds key=value between spaces
local cfg = config { dim = 2, note = "two words" }
loss(sum_all(param("w", {cfg.dim}, "ones")))
