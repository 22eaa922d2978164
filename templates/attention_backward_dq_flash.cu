// Flash attention backward, dq and dsum (templates/flash_attention.cuh): causal={{CAUSAL}},
// {{H}} heads over {{KV}} kv heads of {{HD}}, T={{T}}; 64 query rows a block, key tiles of {{BC}};
// at least {{MIN_BLOCKS}} blocks an SM.
{{OUT_DEF}}extern "C" __global__ void __launch_bounds__({{BLOCK}}, {{MIN_BLOCKS}}) {{NAME}}(const MmcBuffers b) {
    static_assert({{BLOCK}} == flash::THREADS, "the flash kernels run 4 warps a block");
{{POINTERS}}
    flash::attention_backward_dq<{{E}}, {{T}}, {{H}}, {{KV}}, {{HD}}, {{CAUSAL}}, {{BC}}, {{VS}}, {{DQS}}>({{DO}}, {{Q}}, {{K}}, {{V}}, {{O}}, {{LSE}}, {{DQ}}, {{DSUM}}, {{SCALE}}, {{OUT}});
}
