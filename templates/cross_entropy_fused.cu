// Mean cross-entropy over the rows whose target is not {{IGNORE}}, and its gradient, in one
// pass over the logits: a warp per row of {{V}}, {{BLOCK}} / 32 rows a block. The warp reads
// its row once, 8 consecutive logits a lane with 16-byte loads, and keeps the bytes it
// loaded in registers. From them come, first, the loss and the row's statistics by
// cross_entropy_wide.cu's steps in its order (each lane's running max and sum over its runs
// in turn, the lanes merged in a fixed order), so the same bits; then the gradient by
// cross_entropy_backward_wide.cu's formula: d = -(dloss / kept) rounded to the log-softmax
// dtype, dx = [j == target] * d - exp(log_softmax(x)) * d. `kept` is target_count's, counted
// from the labels before this kernel (its own count is complete only with its last block),
// so a row's gradient needs nothing from other rows. A lane has read every logit of its row
// before it writes any gradient, and the target's logit reaches lane 0 by a shuffle, so the
// gradient may be written over the logits. The losses and kept targets are summed as in
// cross_entropy_wide.cu: a table row a block, added by the last block in a fixed order.
__device__ double {{NAME}}_sums[2 * {{BLOCKS}}]; // by block: its loss sum, its kept targets
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ double wloss[{{BLOCK}} / 32], wkept[{{BLOCK}} / 32];
    MmcStepState *state = (MmcStepState *)b.state;
    const int lane = threadIdx.x & 31;
    const long row = (long)blockIdx.x * ({{BLOCK}} / 32) + (threadIdx.x >> 5);
    // a lane's runs of 8 logits (run c at column lane * 8 + 256 c), and the 16-byte words of a run
    constexpr int RUNS = ({{V}} + 255) / 256, WORDS = (int)sizeof({{E}}) / 2;
    if (row < {{ROWS}}L) {
        const long base = row * {{V}};
        const int t = ld({{LABELS}}, row);
        uint4 bytes[RUNS][WORDS];
#pragma unroll
        for (int c = 0; c < RUNS; c++)
            if (lane * 8 + 256 * c < {{V}})
#pragma unroll
                for (int w = 0; w < WORDS; w++) bytes[c][w] = *(const uint4 *)({{X}} + base + lane * 8 + 256 * c + w * (8 / WORDS));
        {{R}} m = -INFINITY, s = 0, xt = 0; // xt: the target's logit, where this lane holds it
#pragma unroll
        for (int c = 0; c < RUNS; c++) {
            const int j0 = lane * 8 + 256 * c;
            if (j0 >= {{V}}) break;
            {{R}} xs[8];
            ldv((const {{E}} *)bytes[c], 0, xs);
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (j0 + k == t) xt = xs[k];
            {{R}} cm = xs[0];
#pragma unroll
            for (int k = 1; k < 8; k++) cm = xs[k] > cm ? xs[k] : cm;
            if (cm > m) s = s * mmc_exp(m - cm), m = cm;
#pragma unroll
            for (int k = 0; k < 8; k++) s += mmc_exp_sum_term(xs[k] - m); // a NaN logit makes s NaN
        }
        warp_softmax_merge(m, s); // every lane ends with the same m and s
        const {{R}} logsum = mmc_log(s);
        const int owner = t >= 0 && t < {{V}} ? (t >> 3) & 31 : 0;
        xt = __shfl_sync(0xffffffffu, xt, owner);
        if (lane == 0) {
            {{R}} loss = 0;
            if (t != {{IGNORE}}) loss = -{{RDC}}(mmc_sub(mmc_sub(xt, m), logsum));
            {{STORE_STATS}}
            wloss[threadIdx.x >> 5] = (double)loss;
            wkept[threadIdx.x >> 5] = t != {{IGNORE}};
        }
        const {{R}} d = t == {{IGNORE}} ? ({{R}})0 : {{RDG}}(-mmc_div(({{R}})ld({{DLOSS}}, 0), ({{R}})ld({{KEPT}}, 0)));
#pragma unroll
        for (int c = 0; c < RUNS; c++) {
            const int j0 = lane * 8 + 256 * c;
            if (j0 >= {{V}}) break;
            {{R}} xs[8], g[8];
            ldv((const {{E}} *)bytes[c], 0, xs);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const {{R}} lp = {{RDG}}(mmc_sub(mmc_sub(xs[k], m), logsum));
                g[k] = {{RDO}}(mmc_sub(j0 + k == t ? d : ({{R}})0, mmc_mul(mmc_exp(lp), d)));
            }
            stv({{DX}}, base + j0, g);
        }
    } else if (lane == 0) {
        wloss[threadIdx.x >> 5] = 0, wkept[threadIdx.x >> 5] = 0;
    }
    mmc_loss_mean<{{R}}, {{BLOCKS}}>(state, {{NAME}}_sums, wloss, wkept, {{LOSS}}, {{COUNT}});
}
