-- tiny: MiniMind's architecture (graphs/minimind.lua) at sizes the ref backend runs in
-- seconds, for tests and for training on a machine without a GPU. The vocabulary holds
-- bytes: id = byte + 3, after MiniMind's three special tokens (0 pad, 1 bos, 2 eos).
defaults {
  vocab = 320, dim = 64, layers = 2, heads = 4, kv_heads = 2, ffn = 192,
  batch = 4, seq = 32,
}
include "minimind.lua"
