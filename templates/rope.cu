// MiniMind apply_rotary_pos_emb on [B, T={{T}}, heads*{{HD}}]: x*cos + rotate_half(x)*sin,
// rotate_half(x) = cat(-x[half:], x[:half]); each product rounded to the compute dtype.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < {{N}}L; i += (long)gridDim.x * blockDim.x) {
        const int j = (int)(i % {{HD}});
        const long t = (i / {{ROW}}) % {{T}};
        const {{R}} c = ld({{COS}}, t * {{HD}} + j), s = ld({{SIN}}, t * {{HD}} + j);
        const {{R}} xr = j < {{HALF}} ? -ld({{X}}, i + {{HALF}}) : ld({{X}}, i - {{HALF}});
        {{R}} {{VA}} = mmc_add({{RDC}}(mmc_mul(ld({{X}}, i), c)), {{RDC}}(mmc_mul(xr, s)));
{{EPILOGUE}}
    }
}
