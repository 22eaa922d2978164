-- expect: bad_schedule.lua:4: train: schedule must be minimind_cosine or constant, got 'cosine'
local w = param("w", {4}, "normal(0,1)")
loss(sum_all(w))
train { schedule = "cosine" }
