extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < {{N}}L; i += (long)gridDim.x * blockDim.x) {
{{BODY}}
    }
}
