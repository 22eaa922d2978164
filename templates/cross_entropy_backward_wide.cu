// Gradient of the mean cross-entropy for one row of {{V}} logits per block, 8 consecutive
// logits a thread with 16-byte loads and stores: d = -(dloss / kept) rounded to the
// log-softmax dtype (the gradient of the log-probs), then dx = [j == target] * d -
// exp(log_softmax(x)) * d, as log_softmax_backward computes it.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    const long row = blockIdx.x;
    const long base = row * {{V}};
    const int t = ld({{LABELS}}, row);
    const {{R}} m = ld({{STATS}}, row * MMC_CE_STATS + MMC_CE_MAX), logsum = ld({{STATS}}, row * MMC_CE_STATS + MMC_CE_LOGSUM);
    const {{R}} d = t == {{IGNORE}} ? ({{R}})0 : {{RDC}}(-mmc_div(({{R}})ld({{DLOSS}}, 0), ({{R}})ld({{COUNT}}, 0)));
    for (int j0 = threadIdx.x * 8; j0 < {{V}}; j0 += blockDim.x * 8) {
        const long i0 = base + j0;
        {{R}} xs[8];
        ldv({{X}}, i0, xs);
{{EPI_LOADS}}
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const long i = i0 + k;
            const {{R}} lp = {{RDC}}(mmc_sub(mmc_sub(xs[k], m), logsum));
            {{R}} {{VA}} = mmc_sub(j0 + k == t ? d : ({{R}})0, mmc_mul(mmc_exp(lp), d));
{{EPILOGUE}}
        }
{{EPI_STORES}}
    }
}
