-- expect: json_field_space.lua:4: export_hf: model_type = "my llama": a string here may hold no spaces
local x = param("x", {2, 3}, "normal(0,1)")
loss(sum_all(silu(x)))
export_hf { model_type = "my llama" }
