// Gradient of rope: dx[j] = dy[j]*cos[j] + (j < half ? dy[j+half]*sin[j+half]
// : -dy[j-half]*sin[j-half]); each branch is rounded to x's dtype before the sum, as the
// autograd engine casts each branch's gradient to x's dtype.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < {{N}}L; i += (long)gridDim.x * blockDim.x) {
        const int j = (int)(i % {{HD}});
        const long t = (i / {{ROW}}) % {{T}};
        const {{R}} direct = {{RDX}}({{RDC}}(mmc_mul(ld({{DY}}, i), ld({{COS}}, t * {{HD}} + j))));
        const long ip = j < {{HALF}} ? i + {{HALF}} : i - {{HALF}};
        const int jp = j < {{HALF}} ? j + {{HALF}} : j - {{HALF}};
        const {{R}} rot = {{RDX}}({{RDC}}(mmc_mul(ld({{DY}}, ip), ld({{SIN}}, t * {{HD}} + jp))));
        {{R}} {{VA}} = mmc_add(direct, j < {{HALF}} ? rot : -rot);
{{EPILOGUE}}
    }
}
