// One block per row of {{D}} elements; the row stays in registers between the reduction and
// the epilogue. torch: x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps).
extern "C" __global__ void __launch_bounds__({{THREADS}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} red[32];
    const long row = blockIdx.x;
    {{R}} x[{{PER}}];
{{ARRAYS}}
    {{R}} ss = 0;
#pragma unroll
    for (int k = 0; k < {{PER}}; k++) {
        const int col = threadIdx.x + k * {{THREADS}};
        if (col < {{D}}) {
            const long i = row * {{D}} + col;
{{PROLOGUE}}
            x[k] = {{X}};
            ss += mmc_mul(x[k], x[k]);
        }
    }
    ss = block_sum(ss, red);
    const {{R}} r = mmc_rsqrt(mmc_add(mmc_mul(ss, ({{R}})(1.0 / {{D}})), ({{R}}){{EPS}}));
#pragma unroll
    for (int k = 0; k < {{PER}}; k++) {
        const int col = threadIdx.x + k * {{THREADS}};
        if (col < {{D}}) {
            const long i = row * {{D}} + col;
            {{R}} {{VA}} = mmc_mul(x[k], r);
{{EPILOGUE}}
        }
    }
}
