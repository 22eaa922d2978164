// Update phase, kernel 1 of 3: GradScaler.unscale_ + clip_grad_norm_ without writing the
// gradients. One block per chunk of one parameter: the chunk's sum of squares of the
// unscaled gradients and whether any gradient is inf/nan. The last block sums the chunks of
// each parameter (a warp a parameter, in a fixed order: torch._foreach_norm), takes the L2
// norm of those norms, the clip coefficient and this update's learning rate. It also counts
// each parameter's gradient elements that are exactly zero (underflow, step_state.h).
{{TABLES}}
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
    __shared__ double red[32];
    __shared__ int last, bad_shared;
    MmcStepState *state = (MmcStepState *)b.state;
    const {{M}} *grads = (const {{M}} *)b.grads;
    double *partial = (double *)(b.scratch + MMC_GRAD_NORM_PARTIAL({{NCHUNKS}}, {{NPARAMS}})); // [chunks] sums of squares
    double *norms = (double *)(b.scratch + MMC_GRAD_NORM_NORMS({{NCHUNKS}}, {{NPARAMS}}));     // [params] their norms
    int *bad = (int *)(b.scratch + MMC_GRAD_NORM_BAD({{NCHUNKS}}, {{NPARAMS}}));              // [chunks] non-finite seen
    unsigned int *zeros = (unsigned int *)(b.scratch + MMC_GRAD_NORM_ZEROS({{NCHUNKS}}, {{NPARAMS}})); // [chunks] exact zeros
    __shared__ unsigned int zeros_shared;
    const float inv_scale = {{SCALING}} ? (float)(1.0 / (double)state->scale) : 1.0f;
    const int c = blockIdx.x;
    int param = 0;
    while ({{P}}_chunk0[param + 1] <= c) param++;
    const long start = (long)(c - {{P}}_chunk0[param]) * {{CHUNK}};
    const long end = start + {{CHUNK}} < {{P}}_len[param] ? start + {{CHUNK}} : {{P}}_len[param];
    double ss = 0;
    int nonfinite = 0;
    unsigned int zero = 0;
    // a thread's PER elements, BLOCK apart, are all loaded before the first is summed: with one
    // load at a time in flight the kernel ran at a third of the memory's speed. They are then
    // summed in the same order as one at a time.
    constexpr int PER = ({{CHUNK}} + {{BLOCK}} - 1) / {{BLOCK}};
    {{M}} gv[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const long k = start + threadIdx.x + (long)i * {{BLOCK}};
        gv[i] = k < end ? grads[{{P}}_start[param] + k] : ({{M}})0;
    }
#pragma unroll
    for (int i = 0; i < PER; i++) {
        if (start + threadIdx.x + (long)i * {{BLOCK}} >= end) break;
        const {{M}} g = gv[i];
        nonfinite |= !isfinite(g);
        zero += g == ({{M}})0;
        const {{M}} u = inv_scale == 1.0f ? g : g * inv_scale;
        ss += (double)u * (double)u;
    }
    ss = block_sum(ss, red);
    if (threadIdx.x == 0) bad_shared = 0, zeros_shared = 0;
    __syncthreads();
    if (nonfinite) bad_shared = 1;
    if (zero) atomicAdd(&zeros_shared, zero); // an integer sum: the same in any order
    __syncthreads();
    if (threadIdx.x == 0) {
        partial[c] = ss;
        bad[c] = bad_shared;
        zeros[c] = zeros_shared;
        __threadfence();
        last = mmc_ticket_last(state);
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    // each warp takes every 8th parameter: its lanes sum the chunks, then a fixed butterfly
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    constexpr bool STAGE = {{NPARAMS}} <= 4096; // the norms in shared memory, when they fit
    __shared__ float staged[STAGE ? {{NPARAMS}} : 1];
    int found_w = 0;
    unsigned int *param_zeros = (unsigned int *)(b.state + MMC_STATE_ZEROS);
    for (int p = warp; p < {{NPARAMS}}; p += blockDim.x >> 5) {
        double sum = 0;
        unsigned int z = 0;
        for (int k = {{P}}_chunk0[p] + lane; k < {{P}}_chunk0[p + 1]; k += 32) {
            sum += __ldcg(partial + k);
            found_w |= __ldcg(bad + k);
            z += __ldcg(zeros + k);
        }
        for (int o = 16; o > 0; o >>= 1) {
            sum += __shfl_xor_sync(0xffffffffu, sum, o);
            z += __shfl_xor_sync(0xffffffffu, z, o);
        }
        if (lane == 0) {
            const float n = (float)sqrt(sum); // each warp its parameters' norms, at once
            norms[p] = n;
            if (STAGE) staged[p] = n;
            param_zeros[p] = z;
        }
    }
    found_w = __any_sync(0xffffffffu, found_w);
    if (lane == 0 && found_w) bad_shared = 1; // this block's own flag, now or-ed with every chunk's
    __syncthreads();
    if (threadIdx.x != 0) return;
    int found = bad_shared;
    // one thread sums the norms' squares in parameter order, from shared memory (a chain of
    // global reads and double square roots here was a quarter of the kernel's time)
    float total_sq = 0;
    for (int p = 0; p < {{NPARAMS}}; p++) {
        const float n = STAGE ? staged[p] : (float)__ldcg(norms + p);
        total_sq = mmc_add(total_sq, mmc_mul(n, n));
    }
    const float total = sqrtf(total_sq);
    state->grad_norm = found ? __int_as_float(0x7fc00000) : total;
    state->found_inf = {{SCALING}} ? (float)found : 0.0f;
    // torch: max_norm / (total + 1e-6), f32 tensor arithmetic, then clamp(max=1)
    const float coef = {{CLIP}} > 0 ? mmc_div((float){{CLIP}}, mmc_add(total, 1e-6f)) : 1.0f;
    state->clip_coef = coef < 1.0f ? coef : 1.0f;
    // MiniMind's schedule: lr/10 + lr/2 (1 + cos(pi s / S)), s = the update's last micro-step
    const double s = (double)state->update * {{ACCUM}} + ({{ACCUM}} - 1);
    state->lr = ({{COSINE}} ? {{LR}} / 10.0 + 0.5 * {{LR}} * (1.0 + cos(3.14159265358979323846 * s / state->total_micro)) : {{LR}}) *
                (state->update < {{WARMUP}} ? (state->update + 1.0) / {{WARMUP}} : 1.0); // linear warm-up
    mmc_ticket_reset(state);
}
