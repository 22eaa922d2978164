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
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < {{N}}L; i += (long)gridDim.x * blockDim.x) {
        if (!skip) {
            {{M}} gi = g[i];
            if (inv_scale != ({{M}})1) gi = mmc_mul(gi, inv_scale);
            gi = mmc_mul(gi, coef);
            {{M}} pi = mmc_mul(p[i], decay);
            {{M}} mi = m[i];
            mi = mmc_add(mi, mmc_mul(w1, mmc_sub(gi, mi)));          // lerp, weight < 0.5
            {{M}} vi = mmc_mul(v[i], beta2);
            vi = mmc_add(vi, mmc_mul(mmc_mul(w2, gi), gi));          // addcmul
            const {{M}} denom = mmc_add(mmc_div(sqrt(vi), bc2_sqrt), eps);
            pi = mmc_add(pi, mmc_mul(step_size, mmc_div(mi, denom))); // addcdiv
            p[i] = pi;
            m[i] = mi;
            v[i] = vi;
        }
        g[i] = 0;
    }
}
