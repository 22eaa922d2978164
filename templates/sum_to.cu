// Sums [{{M}}, {{C}}] over its rows: 32 columns a block, {{LANES}} row lanes (a warp each), then a fixed-order
// sum of the lanes (deterministic). The reference for sum_to_split.cu.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} part[{{LANES}}][33];
    const int lane = threadIdx.x & 31, rl = threadIdx.x >> 5;
    const long c = (long)blockIdx.x * 32 + lane;
    {{R}} acc = 0;
    if (c < {{C}}) {
        for (long m = rl; m < {{M}}L; m += {{LANES}}) {
            const long i = m * {{C}} + c;
{{PROLOGUE}}
            acc += {{X}};
        }
    }
    part[rl][lane] = acc;
    __syncthreads();
    if (rl == 0 && c < {{C}}) {
        {{R}} {{VA}} = 0;
        for (int r = 0; r < {{LANES}}; r++) {{VA}} += part[r][lane];
        const long i = c;
{{EPILOGUE}}
    }
}
