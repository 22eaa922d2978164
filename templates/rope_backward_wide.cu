// Gradient of rope: dx[j] = dy[j]*cos[j] + (j < half ? dy[j+half]*sin[j+half]
// : -dy[j-half]*sin[j-half]); each branch is rounded to x's dtype before the sum, as the
// autograd engine casts each branch's gradient to x's dtype. Eight consecutive elements a
// thread (they lie in one half of a head), 16-byte accesses.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    for (long i0 = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8; i0 < {{N}}L; i0 += (long)gridDim.x * blockDim.x * 8) {
        const int j0 = (int)(i0 % {{HD}});
        const long t = (i0 / {{ROW}}) % {{T}};
        const int jp0 = j0 < {{HALF}} ? j0 + {{HALF}} : j0 - {{HALF}};
        {{R}} da[8], db[8], cs[8], sn[8];
        ldv({{DY}}, i0, da);
        ldv({{DY}}, j0 < {{HALF}} ? i0 + {{HALF}} : i0 - {{HALF}}, db);
        ldv({{COS}}, t * {{HD}} + j0, cs);
        ldv({{SIN}}, t * {{HD}} + jp0, sn);
{{EPI_LOADS}}
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const long i = i0 + k;
            const {{R}} direct = {{RDX}}({{RDC}}(mmc_mul(da[k], cs[k])));
            const {{R}} rot = {{RDX}}({{RDC}}(mmc_mul(db[k], sn[k])));
            {{R}} {{VA}} = mmc_add(direct, j0 < {{HALF}} ? rot : -rot);
{{EPILOGUE}}
        }
{{EPI_STORES}}
    }
}
