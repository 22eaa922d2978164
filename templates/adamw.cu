// Update phase, kernel 2 of 3: AdamW as torch.optim.AdamW's default (foreach) path, on
// gradients unscaled and clipped on the fly; skipped entirely when an inf/nan was found.
// Zeroes the gradients for the next accumulation either way. Every op is rounded as the
// foreach kernels round it (no FMA contraction).
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
    const MmcStepState *state = (const MmcStepState *)b.state;
    {{M}} *p = ({{M}} *)b.params, *g = ({{M}} *)b.grads, *m = ({{M}} *)b.adam_m, *v = ({{M}} *)b.adam_v;
    const bool skip = state->found_inf != 0.0f;
    const double lr = state->lr;
    const int t = state->adam_step + 1;
    const {{M}} inv_scale = {{SCALING}} ? ({{M}})(1.0 / (double)state->scale) : ({{M}})1;
    const {{M}} coef = state->clip_coef;
    const {{M}} decay = ({{M}})(1.0 - lr * {{WD}});
    const double bc1 = 1.0 - pow({{BETA1}}, (double)t), bc2 = 1.0 - pow({{BETA2}}, (double)t);
    const {{M}} step_size = ({{M}})(-(lr / bc1));
    const {{M}} bc2_sqrt = ({{M}})sqrt(bc2);
    const {{M}} w1 = ({{M}})(1.0 - {{BETA1}}), beta2 = ({{M}}){{BETA2}}, w2 = ({{M}})(1.0 - {{BETA2}});
    const {{M}} eps = ({{M}}){{EPS}};
    // one element's update, the ops in the foreach kernels' order
    const auto update = [&]({{M}} &pi, {{M}} &mi, {{M}} &vi, {{M}} gi) {
        if (inv_scale != ({{M}})1) gi = mmc_mul(gi, inv_scale);
        gi = mmc_mul(gi, coef);
        pi = mmc_mul(pi, decay);
        mi = mmc_add(mi, mmc_mul(w1, mmc_sub(gi, mi)));          // lerp, weight < 0.5
        vi = mmc_mul(vi, beta2);
        vi = mmc_add(vi, mmc_mul(mmc_mul(w2, gi), gi));          // addcmul
        const {{M}} denom = mmc_add(mmc_div(sqrt(vi), bc2_sqrt), eps);
        pi = mmc_add(pi, mmc_mul(step_size, mmc_div(mi, denom))); // addcdiv
    };
    // VEC elements a thread at a time, each of the four buffers read and written 16 bytes at
    // once (they are cudaMalloc'd: 256-byte aligned); a last partial run element by element
    constexpr int VEC = 16 / (int)sizeof({{M}});
    constexpr long RUNS = ({{N}}L + VEC - 1) / VEC;
    for (long u = (long)blockIdx.x * blockDim.x + threadIdx.x; u < RUNS; u += (long)gridDim.x * blockDim.x) {
        const long i0 = u * VEC;
        if (i0 + VEC <= {{N}}L) {
            if (!skip) {
                {{M}} pv[VEC], gv[VEC], mv[VEC], vv[VEC];
                const uint4 pr = *(const uint4 *)(p + i0), gr = *(const uint4 *)(g + i0);
                const uint4 mr = *(const uint4 *)(m + i0), vr = *(const uint4 *)(v + i0);
                memcpy(pv, &pr, 16), memcpy(gv, &gr, 16), memcpy(mv, &mr, 16), memcpy(vv, &vr, 16);
#pragma unroll
                for (int k = 0; k < VEC; k++) update(pv[k], mv[k], vv[k], gv[k]);
                uint4 po, mo, vo;
                memcpy(&po, pv, 16), memcpy(&mo, mv, 16), memcpy(&vo, vv, 16);
                *(uint4 *)(p + i0) = po, *(uint4 *)(m + i0) = mo, *(uint4 *)(v + i0) = vo;
            }
            *(uint4 *)(g + i0) = make_uint4(0, 0, 0, 0);
        } else {
            for (long i = i0; i < {{N}}L; i++) {
                if (!skip) update(p[i], m[i], v[i], g[i]);
                g[i] = 0;
            }
        }
    }
}
