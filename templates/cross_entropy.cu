// Mean cross-entropy over the rows whose target is not {{IGNORE}}. One block per row of
// {{V}} logits: log_softmax = (x - max) - log(sum(exp(x - max))) in f32, rounded to the
// log-softmax dtype as F.cross_entropy does under autocast; the row's max, log-sum and loss
// go to the stats part. The last block to finish sums the row losses in row order.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} red[32];
    __shared__ double dred[32];
    __shared__ int last;
    MmcStepState *state = (MmcStepState *)b.state;
    const long row = blockIdx.x;
    const long base = row * {{V}};
    {{R}} m = -INFINITY;
    for (int j = threadIdx.x; j < {{V}}; j += blockDim.x) {
        const {{R}} x = ld({{X}}, base + j);
        m = x > m ? x : m;
    }
    m = block_max(m, red);
    {{R}} s = 0;
    for (int j = threadIdx.x; j < {{V}}; j += blockDim.x) s += mmc_exp(ld({{X}}, base + j) - m);
    s = block_sum(s, red);
    if (threadIdx.x == 0) {
        const {{R}} logsum = mmc_log(s);
        const int t = ld({{LABELS}}, row);
        {{R}} loss = 0;
        if (t != {{IGNORE}}) loss = -{{RDC}}(mmc_sub(mmc_sub(ld({{X}}, base + t), m), logsum));
        st({{STATS}}, row * MMC_CE_STATS + MMC_CE_MAX, m);
        st({{STATS}}, row * MMC_CE_STATS + MMC_CE_LOGSUM, logsum);
        st({{STATS}}, row * MMC_CE_STATS + MMC_CE_LOSS, loss);
        __threadfence();
        last = mmc_ticket_last(state);
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    double total = 0, kept = 0;
#pragma unroll 8
    for (long r = threadIdx.x; r < {{ROWS}}L; r += blockDim.x) {
        total += ld_cg({{STATS}}, r * MMC_CE_STATS + MMC_CE_LOSS);
        kept += ld({{LABELS}}, r) != {{IGNORE}};
    }
    total = block_sum(total, dred);
    kept = block_sum(kept, dred);
    if (threadIdx.x == 0) {
        // a batch whose every target is left out (a loss mask can do it) has the loss 0,
        // not a mean over nothing, and its gradients are 0 too
        st({{LOSS}}, 0, kept > 0 ? mmc_div(({{R}})total, ({{R}})kept) : ({{R}})0);
        st({{COUNT}}, 0, kept);
        mmc_ticket_reset(state);
    }
}
