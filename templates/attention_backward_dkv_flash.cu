// Flash attention backward, dk and dv (templates/flash_attention.cuh): causal={{CAUSAL}},
// {{H}} heads over {{KV}} kv heads of {{HD}}, T={{T}}; 64 keys a block, query tiles of {{BQ}};
// each query head's share rounded before the sum: {{ROUND_HEADS}}.
{{OUT_DEF}}extern "C" __global__ void __launch_bounds__({{BLOCK}}, flash::dkv_min_blocks({{HD}})) {{NAME}}(const MmcBuffers b) {
    static_assert({{BLOCK}} == flash::THREADS, "the flash kernels run 4 warps a block");
{{POINTERS}}
    flash::attention_backward_dkv<{{E}}, {{T}}, {{H}}, {{KV}}, {{HD}}, {{CAUSAL}}, {{BQ}}, {{ROUND_HEADS}}, {{VS}}, {{DVS}}, {{DKS}}>({{DO}}, {{Q}}, {{K}}, {{V}}, {{LSE}}, {{DSUM}}, {{DK}}, {{DV}}, {{SCALE}}, {{OUT}});
}
