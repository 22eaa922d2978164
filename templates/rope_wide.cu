// MiniMind apply_rotary_pos_emb on [B, T={{T}}, heads*{{HD}}]: x*cos + rotate_half(x)*sin,
// rotate_half(x) = cat(-x[half:], x[:half]); each product rounded to the compute dtype.
// Eight consecutive elements a thread (they lie in one half of a head), 16-byte accesses.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    for (long i0 = ((long)blockIdx.x * blockDim.x + threadIdx.x) * 8; i0 < {{N}}L; i0 += (long)gridDim.x * blockDim.x * 8) {
        const int j0 = (int)(i0 % {{HD}});
        const long t = (i0 / {{ROW}}) % {{T}};
        {{R}} xa[8], xb[8], cs[8], sn[8];
        ldv({{X}}, i0, xa);
        ldv({{X}}, j0 < {{HALF}} ? i0 + {{HALF}} : i0 - {{HALF}}, xb);
        ldv({{COS}}, t * {{HD}} + j0, cs);
        ldv({{SIN}}, t * {{HD}} + j0, sn);
{{EPI_LOADS}}
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const long i = i0 + k;
            const {{R}} xr = j0 < {{HALF}} ? -xb[k] : xb[k];
            {{R}} {{VA}} = mmc_add({{RDC}}(mmc_mul(xa[k], cs[k])), {{RDC}}(mmc_mul(xr, sn[k])));
{{EPILOGUE}}
        }
{{EPI_STORES}}
    }
}
