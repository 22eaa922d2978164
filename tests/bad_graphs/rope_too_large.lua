-- expect: rope_too_large.lua:2: const rope_cos: [1073741824,4096] has more than 2^40 elements
local cos, sin = rope_tables(1 << 30, 1 << 12, 1e4)
