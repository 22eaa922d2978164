// A GEMM and the elementwise ops that read its product, in one kernel: on sm_90a the
// persistent wgmma GEMM of gemm_sm90.cuh, whose epilogue is {{NAME}}_epi; elsewhere the
// epilogue alone, reading the product cuBLASLt wrote. The epilogue walks its space 8
// elements (a unit) at a time: load() reads its operands' bytes into Regs (16 or 32 bytes
// each, as loaded: fewer registers than their values, so more loads are in flight),
// store() converts them, computes and stores, with the product's units in v. Each method
// declares every pointer of the kernel and uses some, as each branch of the kernel does: no
// warning for the others.
#pragma nv_diagnostic push
#pragma nv_diag_suppress 177
struct {{NAME}}_epi {
    MmcBuffers b;
    struct Regs {
{{REGS}}        char none;
    };
    __device__ __forceinline__ void load(long i0, Regs &r) const {
{{EPI_POINTERS}}
{{LOADS}}
    }
    __device__ __forceinline__ void store(long i0, const Regs &r, const float (&v)[{{UNITS}}][8]) const {
{{EPI_POINTERS}}
{{STORE_DECLS}}
        // the unit with branch-free math (MmcFast); where an element's operands are off its
        // range (`untame`), all 8 again with the exact math: the same bits either way
        bool untame = false;
        const auto unit = [&](auto math) {
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const long i = i0 + k;
{{HEAD}}
{{BODY}}
            }
        };
        unit(MmcFast{});
        if (untame) unit(MmcExact{});
{{STORES}}
    }
};
// ta, tb and tp: the tensor maps of A, B and the product (runtime/tensor_map.c), by which
// the sm_90a kernel copies its tiles in and the product out (where it is kept); the epilogue
// alone does not read them: cuBLASLt stored the product
extern "C" __global__ void __launch_bounds__({{BLOCK}}, 1)
    {{NAME}}(const MmcBuffers b, const __grid_constant__ MmcTensorMap ta, const __grid_constant__ MmcTensorMap tb,
             const __grid_constant__ MmcTensorMap tp) {
{{POINTERS}}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(gemm_sm90::threads<{{CONSUMERS}}>() == {{BLOCK}}, "the block is the GEMM's warpgroups");
    gemm_sm90::gemm<{{E}}, {{M}}, {{K}}, {{N_TILES}}, 2, {{B_MN}}, {{W}}, {{PAIRED}}, {{KEEP}}, {{CONSUMERS}}>(&ta, &tb, &tp, {{NAME}}_epi{b});
#else
    gemm_epilogue::from_memory<{{E}}, {{M}}, {{W}}, {{PAIRED}}>({{PROD}}, {{LDP}}L, {{NAME}}_epi{b});
#endif
}
#pragma nv_diagnostic pop
