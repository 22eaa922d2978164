// Mean cross-entropy over the rows whose target is not {{IGNORE}}. One warp per row of
// {{V}} logits, 8 rows a block, 8 consecutive logits a lane with 16-byte loads, one pass:
// each lane keeps a running max and its sum of exp(x - max) (the online softmax, each term
// on the special-function unit: prelude.cuh), and the lanes merge theirs in a fixed order.
// So a row is read once and no block barrier waits on it. log_softmax = (x - max) -
// log(sum(exp(x - max))) in f32, rounded to the log-softmax dtype as F.cross_entropy does
// under autocast; the row's max, log-sum and loss go to the stats part. Each block adds its
// rows' losses and kept targets in row order into its row of a table ({{BLOCKS}} rows), and
// the last block to finish adds the table's rows in a fixed order: when it summed every
// row's loss itself, the other SMs waited for it.
__device__ double {{NAME}}_sums[2 * {{BLOCKS}}]; // by block: its loss sum, its kept targets
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ double wloss[{{BLOCK}} / 32], wkept[{{BLOCK}} / 32];
    MmcStepState *state = (MmcStepState *)b.state;
    const int lane = threadIdx.x & 31;
    const long row = (long)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (row < {{ROWS}}L) {
        const long base = row * {{V}};
        {{R}} m = -INFINITY, s = 0;
#pragma unroll 4
        for (int j0 = lane * 8; j0 < {{V}}; j0 += 256) {
            {{R}} xs[8];
            ldv({{X}}, base + j0, xs);
            {{R}} cm = xs[0];
#pragma unroll
            for (int k = 1; k < 8; k++) cm = xs[k] > cm ? xs[k] : cm;
            if (cm > m) s = s * mmc_exp(m - cm), m = cm;
#pragma unroll
            for (int k = 0; k < 8; k++) s += mmc_exp_sum_term(xs[k] - m); // a NaN logit makes s NaN
        }
        warp_softmax_merge(m, s);
        if (lane == 0) {
            const {{R}} logsum = mmc_log(s);
            const int t = ld({{LABELS}}, row);
            {{R}} loss = 0;
            if (t != {{IGNORE}}) loss = -{{RDC}}(mmc_sub(mmc_sub(ld({{X}}, base + t), m), logsum));
            st({{STATS}}, row * MMC_CE_STATS + MMC_CE_MAX, m);
            st({{STATS}}, row * MMC_CE_STATS + MMC_CE_LOGSUM, logsum);
            st({{STATS}}, row * MMC_CE_STATS + MMC_CE_LOSS, loss);
            wloss[threadIdx.x >> 5] = (double)loss;
            wkept[threadIdx.x >> 5] = t != {{IGNORE}};
        }
    } else if (lane == 0) {
        wloss[threadIdx.x >> 5] = 0, wkept[threadIdx.x >> 5] = 0;
    }
    mmc_loss_mean<{{R}}, {{BLOCKS}}>(state, {{NAME}}_sums, wloss, wkept, {{LOSS}}, {{COUNT}});
}
