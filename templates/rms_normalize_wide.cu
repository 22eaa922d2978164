// One block per row of {{D}} elements, each thread {{CH}} runs of 8 consecutive ones with 16-byte
// loads and stores; the row stays in registers between the reduction and the epilogue.
// torch: x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps).
extern "C" __global__ void __launch_bounds__({{THREADS}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} red[32];
    const long row = blockIdx.x;
    {{R}} x[{{CH}} * 8];
{{ARRAYS}}
    {{R}} ss = 0;
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
                x[c * 8 + k] = {{X}};
                ss += mmc_mul(x[c * 8 + k], x[c * 8 + k]);
            }
{{PRO_STORES}}
        }
    }
    ss = block_sum(ss, red);
    const {{R}} r = mmc_rsqrt(mmc_add(mmc_mul(ss, ({{R}})(1.0 / {{D}})), ({{R}}){{EPS}}));
#pragma unroll
    for (int c = 0; c < {{CH}}; c++) {
        const int col0 = (threadIdx.x + c * {{THREADS}}) * 8;
        if (col0 < {{D}}) {
            const long i0 = row * {{D}} + col0;
{{EPI_LOADS}}
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const long i = i0 + k;
                {{R}} {{VA}} = mmc_mul(x[c * 8 + k], r);
{{EPILOGUE}}
            }
{{EPI_STORES}}
        }
    }
}
