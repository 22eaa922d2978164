// Eight consecutive elements a thread: one 16-byte load of each operand, the elements one by
// one in registers, one 16-byte store of each result.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    for (long i0 = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8; i0 < {{N}}L; i0 += (long)gridDim.x * blockDim.x * 8) {
{{LOADS}}
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const long i = i0 + k;
{{BODY}}
        }
{{STORES}}
    }
}
