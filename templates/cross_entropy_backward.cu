// Gradient of the mean cross-entropy for one row of {{V}} logits per block:
// d = -(dloss / kept) rounded to the log-softmax dtype (the gradient of the log-probs), then
// dx = [j == target] * d - exp(log_softmax(x)) * d, as log_softmax_backward computes it.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    const long row = blockIdx.x;
    const long base = row * {{V}};
    const int t = ld({{LABELS}}, row);
    const {{R}} m = ld({{STATS}}, row * MMC_CE_STATS + MMC_CE_MAX), logsum = ld({{STATS}}, row * MMC_CE_STATS + MMC_CE_LOGSUM);
    const {{R}} d = t == {{IGNORE}} ? ({{R}})0 : {{RDC}}(-mmc_div(({{R}})ld({{DLOSS}}, 0), ({{R}})ld({{COUNT}}, 0)));
    for (int j = threadIdx.x; j < {{V}}; j += blockDim.x) {
        const long i = base + j;
        const {{R}} lp = {{RDC}}(mmc_sub(mmc_sub(ld({{X}}, i), m), logsum));
        {{R}} {{VA}} = mmc_sub(j == t ? d : ({{R}})0, mmc_mul(mmc_exp(lp), d));
{{EPILOGUE}}
    }
}
