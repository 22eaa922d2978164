// Flash attention (templates/flash_attention.cuh): causal={{CAUSAL}}, {{H}} heads over {{KV}} kv
// heads of {{HD}}, T={{T}}; blocks of 4 warps x {{BR}} query rows, key tiles of {{BC}}; at least
// {{MIN_BLOCKS}} blocks an SM.
extern "C" __global__ void __launch_bounds__({{BLOCK}}, {{MIN_BLOCKS}}) {{NAME}}(const MmcBuffers b) {
    static_assert({{BLOCK}} == flash::THREADS, "the flash kernels run 4 warps a block");
{{POINTERS}}
    flash::attention_forward<{{E}}, {{T}}, {{H}}, {{KV}}, {{HD}}, {{CAUSAL}}, {{MT}}, {{BC}}, {{VS}}>({{Q}}, {{K}}, {{V}}, {{O}}, {{LSE}}, {{SCALE}});
}
