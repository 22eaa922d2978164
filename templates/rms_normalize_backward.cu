// One block per row of {{D}} elements. With r = rsqrt(mean(x^2) + eps):
// dx = r * dy - x * r^3 * mean(dy * x).
extern "C" __global__ void __launch_bounds__({{THREADS}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} red[32];
    const long row = blockIdx.x;
    {{R}} dyv[{{PER}}], xv[{{PER}}];
{{ARRAYS}}
    {{R}} ss = 0, sdx = 0;
#pragma unroll
    for (int k = 0; k < {{PER}}; k++) {
        const int col = threadIdx.x + k * {{THREADS}};
        if (col < {{D}}) {
            const long i = row * {{D}} + col;
{{PROLOGUE}}
            dyv[k] = {{DY}};
            xv[k] = {{X}};
            ss += xv[k] * xv[k];
            sdx += dyv[k] * xv[k];
        }
    }
    ss = block_sum(ss, red);
    sdx = block_sum(sdx, red);
    const {{R}} r = mmc_rsqrt(ss * ({{R}})(1.0 / {{D}}) + ({{R}}){{EPS}});
    const {{R}} c = sdx * ({{R}})(1.0 / {{D}}) * r * r * r;
#pragma unroll
    for (int k = 0; k < {{PER}}; k++) {
        const int col = threadIdx.x + k * {{THREADS}};
        if (col < {{D}}) {
            const long i = row * {{D}} + col;
            {{R}} {{VA}} = r * dyv[k] - xv[k] * c;
{{EPILOGUE}}
        }
    }
}
