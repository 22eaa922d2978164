-- MiniMind2-small (jingyaogong/minimind, model/model_minimind.py, 2025-10): a decoder-only
-- GPT with RMSNorm, rotary embeddings, grouped-query attention, a SwiGLU MLP and tied
-- input/output embeddings, under MiniMind's state-dict names: 25,829,888 parameters.
-- Every op below is the op MiniMind's forward runs, in its order, so that under the default
-- policy each value has the dtype PyTorch autocast gives it (docs/precision.md §1.1).
local cfg = config {
  vocab = 6400, dim = 512, layers = 8, heads = 8, kv_heads = 2, ffn = 1408,
  eps = 1e-5, rope_theta = 1e6, pad_id = 0,
  batch = 64, seq = 512, accumulation = 1, scale_interval = 2000,
  lr = 5e-4, weight_decay = 0.01, clip = 1.0, warmup = 0,
}
local hd = cfg.dim // cfg.heads

-- the vocabulary and MiniMind's special ids: 0 <|endoftext|> pads, 1 <|im_start|> starts a
-- text, 2 <|im_end|> ends it; MiniMind's config allows texts of 32768 tokens
local m = model { vocab = cfg.vocab, pad_id = cfg.pad_id, bos_id = 1, eos_id = 2, max_positions = 32768 }
-- each batch row of the token file goes to input_ids, the same row one token on to labels
local ids    = input("input_ids", {cfg.batch, cfg.seq}, "i32", { role = "tokens" })
local labels = input("labels", {cfg.batch, cfg.seq}, "i32", { role = "targets" })
-- MiniMind ties embed_tokens.weight = lm_head.weight, so the surviving init is nn.Linear's;
-- its state dict (and so our checkpoints) holds the tensor under both names
local embed = tie("lm_head.weight", param("model.embed_tokens.weight", {cfg.vocab, cfg.dim}, init.fan_in))
local cos, sin = rope_tables(cfg.seq, hd, cfg.rope_theta)

-- RMSNorm.forward: self.weight * self._norm(x.float()).type_as(x)
local function rmsnorm(x, name)
  local w = param(name .. ".weight", {cfg.dim}, init.ones)
  local normed = rms_normalize(cast(x, "f32"), cfg.eps, { name = name .. ".normalize" })
  return mul(w, type_as(normed, x, { name = name .. ".type_as" }), { name = name })
end

-- nn.Linear(in_features, out_features, bias=False), named after its weight
local function proj(x, name, out_features, in_features)
  return linear(x, param(name .. ".weight", {out_features, in_features}, init.fan_in))
end

local x = embedding(embed, ids, { name = "model.embed_tokens" })
for i = 0, cfg.layers - 1 do
  local p = ("model.layers.%d."):format(i)
  -- self-attention: q, k, v projections, RoPE on q and k, causal SDPA, output projection
  local h = rmsnorm(x, p .. "input_layernorm")
  local q = proj(h, p .. "self_attn.q_proj", cfg.heads * hd, cfg.dim)
  local k = proj(h, p .. "self_attn.k_proj", cfg.kv_heads * hd, cfg.dim)
  local v = proj(h, p .. "self_attn.v_proj", cfg.kv_heads * hd, cfg.dim)
  q = rope(q, cos, sin, { heads = cfg.heads, name = p .. "self_attn.rope_q" })
  k = rope(k, cos, sin, { heads = cfg.kv_heads, name = p .. "self_attn.rope_k" })
  local a = attention(q, k, v, { heads = cfg.heads, kv_heads = cfg.kv_heads, causal = true,
                                 name = p .. "self_attn.sdpa" })
  local o = proj(a, p .. "self_attn.o_proj", cfg.dim, cfg.heads * hd)
  -- `hidden_states += residual`: in place into the attention output, so the residual
  -- stream takes its dtype (fp16 under autocast) from here on
  x = add_(o, x, { name = p .. "residual_attn" })
  -- MLP: down_proj(silu(gate_proj(x)) * up_proj(x))
  local n = rmsnorm(x, p .. "post_attention_layernorm")
  local g = proj(n, p .. "mlp.gate_proj", cfg.ffn, cfg.dim)
  local u = proj(n, p .. "mlp.up_proj", cfg.ffn, cfg.dim)
  local m = mul(silu(g, { name = p .. "mlp.act" }), u, { name = p .. "mlp.act_mul" })
  local d = proj(m, p .. "mlp.down_proj", cfg.dim, cfg.ffn)
  x = add(x, d, { name = p .. "residual_mlp" })
end
local logits = linear(rmsnorm(x, "model.norm"), embed, { name = "lm_head" })
-- MiniMind's loss: per-token cross-entropy, the mean over the targets that count. The
-- trainer marks the others with torch's ignore_index, -100: padding (MiniMind's pretraining
-- mask, input_ids != pad), or what a token file's loss mask leaves out (its SFT mask, which
-- counts a pad token where it falls inside a reply)
loss(cross_entropy(logits, labels, { ignore = -100, name = "loss" }))

precision "amp_fp16"
train {
  optimizer = adamw { lr = cfg.lr, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = cfg.weight_decay },
  schedule = "minimind_cosine",
  warmup = cfg.warmup,
  clip = cfg.clip,
  accumulation = cfg.accumulation,
  loss_scale = { init = 65536, growth = 2, backoff = 0.5, interval = cfg.scale_interval },
}

-- a run folder's config.json: MiniMindConfig's fields, so MiniMind's code loads the folder
checkpoint_config {
  model_type = "minimind", hidden_size = cfg.dim, num_hidden_layers = cfg.layers,
  num_attention_heads = cfg.heads, num_key_value_heads = cfg.kv_heads, intermediate_size = cfg.ffn,
  vocab_size = cfg.vocab, rms_norm_eps = cfg.eps, rope_theta = cfg.rope_theta,
  tie_word_embeddings = true, hidden_act = "silu", max_position_embeddings = m.max_positions,
  bos_token_id = m.bos_id, eos_token_id = m.eos_id, dropout = 0.0, flash_attn = true,
}
-- `mmc export --format hf`: MiniMind's architecture is Llama's (RMSNorm, rotate-half RoPE,
-- grouped-query attention, SwiGLU, tied embeddings) under Llama's state-dict names, so
-- transformers loads the folder as LlamaForCausalLM, with no remote code
export_hf {
  architectures = { "LlamaForCausalLM" }, model_type = "llama",
  hidden_size = cfg.dim, intermediate_size = cfg.ffn, num_hidden_layers = cfg.layers,
  num_attention_heads = cfg.heads, num_key_value_heads = cfg.kv_heads, head_dim = hd,
  vocab_size = cfg.vocab, rms_norm_eps = cfg.eps, rope_theta = cfg.rope_theta,
  tie_word_embeddings = true, hidden_act = "silu",
  max_position_embeddings = math.max(cfg.seq, m.max_positions),
  attention_bias = false, mlp_bias = false, attention_dropout = 0.0, rope_scaling = null,
  bos_token_id = m.bos_id, eos_token_id = m.eos_id, pad_token_id = m.pad_id, use_cache = true,
}
