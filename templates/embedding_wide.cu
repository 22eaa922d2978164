// out[r, :] = W[ids[r], :] for {{ROWS}} rows of {{D}}: eight consecutive elements of a row a
// thread, 16-byte accesses.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    for (long i0 = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8; i0 < {{N}}L; i0 += (long)gridDim.x * blockDim.x * 8) {
        const long r = i0 / {{D}};
        const int col = (int)(i0 % {{D}});
        const int id = ld({{IDS}}, r);
        {{R}} w[8];
        ldv({{W}}, (long)id * {{D}} + col, w);
{{EPI_LOADS}}
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const long i = i0 + k;
            {{R}} {{VA}} = w[k];
{{EPILOGUE}}
        }
{{EPI_STORES}}
    }
}
