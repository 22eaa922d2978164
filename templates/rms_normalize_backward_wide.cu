// One block per row of {{D}} elements, each thread {{CH}} runs of 8 consecutive ones with 16-byte
// loads and stores. With r = rsqrt(mean(x^2) + eps): dx = r * dy - x * r^3 * mean(dy * x).
extern "C" __global__ void __launch_bounds__({{THREADS}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} red[32];
    const long row = blockIdx.x;
    {{R}} dyv[{{CH}} * 8], xv[{{CH}} * 8];
{{ARRAYS}}
    {{R}} ss = 0, sdx = 0;
#pragma unroll
    for (int c = 0; c < {{CH}}; c++) {
        const int col0 = (threadIdx.x + c * {{THREADS}}) * 8;
        if (col0 < {{D}}) {
            const long i0 = row * {{D}} + col0;
{{PRO_LOADS}}
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const long i = i0 + k;
{{PROLOGUE}}
                dyv[c * 8 + k] = {{DY}};
                xv[c * 8 + k] = {{X}};
                ss += xv[c * 8 + k] * xv[c * 8 + k];
                sdx += dyv[c * 8 + k] * xv[c * 8 + k];
            }
{{PRO_STORES}}
        }
    }
    ss = block_sum(ss, red);
    sdx = block_sum(sdx, red);
    const {{R}} r = mmc_rsqrt(ss * ({{R}})(1.0 / {{D}}) + ({{R}}){{EPS}});
    const {{R}} cf = sdx * ({{R}})(1.0 / {{D}}) * r * r * r;
#pragma unroll
    for (int c = 0; c < {{CH}}; c++) {
        const int col0 = (threadIdx.x + c * {{THREADS}}) * 8;
        if (col0 < {{D}}) {
            const long i0 = row * {{D}} + col0;
{{EPI_LOADS}}
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const long i = i0 + k;
                {{R}} {{VA}} = r * dyv[c * 8 + k] - xv[c * 8 + k] * cf;
{{EPILOGUE}}
            }
{{EPI_STORES}}
        }
    }
}
