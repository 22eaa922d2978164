// MiniMind apply_rotary_pos_emb on [B, T={{T}}, {{HEADS}} heads of {{HD}}]: x*cos + rotate_half(x)*sin,
// rotate_half(x) = cat(-x[half:], x[:half]); each product rounded to the compute dtype.
// A thread takes 8 columns j0 of the first half of the heads at one position t and their
// partners j0 + {{HALF}}, reads cos and sin there once and walks the heads, so each element of
// x is read once (an element and its partner make each other's rotate_half) and each value
// of the tables once a position instead of once an element. 16-byte accesses.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    constexpr int RUNS = {{HALF}} / 8; // runs of 8 columns in half a head
    for (long u = (long)blockIdx.x * blockDim.x + threadIdx.x; u < {{ROWS}}L * RUNS; u += (long)gridDim.x * blockDim.x) {
        const long row = u / RUNS, t = row % {{T}};
        const int j0 = (int)(u % RUNS) * 8;
        {{R}} clo[8], chi[8], slo[8], shi[8];
        ldv({{COS}}, t * {{HD}} + j0, clo);
        ldv({{COS}}, t * {{HD}} + j0 + {{HALF}}, chi);
        ldv({{SIN}}, t * {{HD}} + j0, slo);
        ldv({{SIN}}, t * {{HD}} + j0 + {{HALF}}, shi);
#pragma unroll
        for (int h = 0; h < {{HEADS}}; h++) {
            const long lo = row * {{ROW}} + h * {{HD}} + j0;
            {{R}} xa[8], xb[8];
            ldv({{X}}, lo, xa);
            ldv({{X}}, lo + {{HALF}}, xb);
#pragma unroll
            for (int hi = 0; hi < 2; hi++) { // the run at j0, then its partner's
                const long i0 = lo + hi * {{HALF}};
{{EPI_LOADS}}
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const long i = i0 + k;
                    const {{R}} x = hi ? xb[k] : xa[k], xr = hi ? xa[k] : -xb[k];
                    {{R}} {{VA}} = mmc_add({{RDC}}(mmc_mul(x, hi ? chi[k] : clo[k])), {{RDC}}(mmc_mul(xr, hi ? shi[k] : slo[k])));
{{EPILOGUE}}
                }
{{EPI_STORES}}
            }
        }
    }
}
