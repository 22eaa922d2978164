-- expect: train_range.lua:6: train: beta1: 1 is outside [0, 0.999999999]
-- (AdamW's bias correction divides by 1 - beta1^t)
local x = param("x", {4}, "normal(0,1)")
loss(sum_all(x))
precision "fp32"
train { optimizer = adamw { lr = 1e-3, betas = { 1, 0.999 } } }
