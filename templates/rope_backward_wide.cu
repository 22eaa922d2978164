// Gradient of rope: dx[j] = dy[j]*cos[j] + (j < half ? dy[j+half]*sin[j+half]
// : -dy[j-half]*sin[j-half]); each branch is rounded to x's dtype before the sum, as the
// autograd engine casts each branch's gradient to x's dtype. A thread takes 8 columns j0 of
// the first half of the heads at one position t and their partners j0 + {{HALF}}, reads cos
// and sin there once and walks the {{HEADS}} heads: each element of dy is read once and each
// value of the tables once a position. 16-byte accesses.
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
            {{R}} da_lo[8], da_hi[8];
            ldv({{DY}}, lo, da_lo);
            ldv({{DY}}, lo + {{HALF}}, da_hi);
#pragma unroll
            for (int hi = 0; hi < 2; hi++) { // the run at j0, then its partner's
                const long i0 = lo + hi * {{HALF}};
{{EPI_LOADS}}
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const long i = i0 + k;
                    const {{R}} direct = {{RDX}}({{RDC}}(mmc_mul(hi ? da_hi[k] : da_lo[k], hi ? chi[k] : clo[k])));
                    const {{R}} rot = {{RDX}}({{RDC}}(mmc_mul(hi ? da_lo[k] : da_hi[k], hi ? slo[k] : shi[k])));
                    {{R}} {{VA}} = mmc_add(direct, hi ? -rot : rot);
{{EPILOGUE}}
                }
{{EPI_STORES}}
            }
        }
    }
}
