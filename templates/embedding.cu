// out[r, :] = W[ids[r], :] for {{ROWS}} rows of {{D}}.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < {{N}}L; i += (long)gridDim.x * blockDim.x) {
        const long r = i / {{D}};
        const int col = (int)(i % {{D}});
        const int id = ld({{IDS}}, r);
        {{R}} {{VA}} = ld({{W}}, (long)id * {{D}} + col);
{{EPILOGUE}}
    }
}
