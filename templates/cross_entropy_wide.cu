// Mean cross-entropy over the rows whose target is not {{IGNORE}}. One block per row of
// {{V}} logits, 8 consecutive logits a thread with 16-byte loads: log_softmax = (x - max) -
// log(sum(exp(x - max))) in f32, rounded to the log-softmax dtype as F.cross_entropy does
// under autocast; the row's max, log-sum and loss go to the stats part. The last block to
// finish sums the row losses in row order.
extern "C" __global__ void __launch_bounds__(256) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} red[32];
    __shared__ double dred[32];
    __shared__ int last;
    MmcStepState *state = (MmcStepState *)b.state;
    const long row = blockIdx.x;
    const long base = row * {{V}};
    {{R}} m = -INFINITY;
    for (int j0 = threadIdx.x * 8; j0 < {{V}}; j0 += blockDim.x * 8) {
        {{R}} xs[8];
        ldv({{X}}, base + j0, xs);
#pragma unroll
        for (int k = 0; k < 8; k++) m = xs[k] > m ? xs[k] : m;
    }
    m = block_max(m, red);
    {{R}} s = 0;
    for (int j0 = threadIdx.x * 8; j0 < {{V}}; j0 += blockDim.x * 8) {
        {{R}} xs[8];
        ldv({{X}}, base + j0, xs);
#pragma unroll
        for (int k = 0; k < 8; k++) s += mmc_exp(xs[k] - m);
    }
    s = block_sum(s, red);
    if (threadIdx.x == 0) {
        const {{R}} logsum = mmc_log(s);
        const int t = ld({{LABELS}}, row);
        {{R}} loss = 0;
        if (t != {{IGNORE}}) loss = -{{RDC}}(mmc_sub(mmc_sub(ld({{X}}, base + t), m), logsum));
        st({{STATS}}, row * 3 + 0, m);
        st({{STATS}}, row * 3 + 1, logsum);
        st({{STATS}}, row * 3 + 2, loss);
        __threadfence();
        last = atomicAdd(&state->ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    double total = 0, kept = 0;
#pragma unroll 8
    for (long r = threadIdx.x; r < {{ROWS}}L; r += blockDim.x) {
        total += ld_cg({{STATS}}, r * 3 + 2);
        kept += ld({{LABELS}}, r) != {{IGNORE}};
    }
    total = block_sum(total, dred);
    kept = block_sum(kept, dred);
    if (threadIdx.x == 0) {
        st({{LOSS}}, 0, mmc_div(({{R}})total, ({{R}})kept));
        st({{COUNT}}, 0, kept);
        state->ticket = 0;
    }
}
