// Causal={{CAUSAL}} attention, the exact kernel (the f32 and f64 policies, and the reference
// the flash kernel is tested against): one block per (batch, head, query row); {{H}} heads share
// {{KV}} kv heads; scale 1/sqrt({{HD}}). Scores and probabilities stay f32 in shared memory
// (as SDPA's fused kernels keep them on chip); the output is rounded to its dtype and the
// row's log-sum-exp is kept for the backward pass.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    extern __shared__ unsigned char smem_raw[];
    {{R}} *sc = ({{R}} *)smem_raw;       // [T] scores, then probabilities
    {{R}} *qs = sc + {{T}};              // [HD] this query
    __shared__ {{R}} red[32];
    const long bh = blockIdx.x / {{T}};
    const int i = (int)(blockIdx.x % {{T}});
    const long bb = bh / {{H}};
    const int h = (int)(bh % {{H}}), kvh = h / ({{H}} / {{KV}});
    const long qrow = (bb * {{T}} + i) * ({{H}} * {{HD}}) + (long)h * {{HD}};
    for (int d = threadIdx.x; d < {{HD}}; d += blockDim.x) qs[d] = ld({{Q}}, qrow + d);
    __syncthreads();
    const int n = {{CAUSAL}} ? i + 1 : {{T}};
    {{R}} m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const long krow = (bb * {{T}} + j) * ({{KV}} * {{HD}}) + (long)kvh * {{HD}};
        {{R}} s = 0;
        for (int d = 0; d < {{HD}}; d++) s += qs[d] * ld({{K}}, krow + d);
        s *= ({{R}}){{SCALE}};
        sc[j] = s;
        m = s > m ? s : m;
    }
    m = block_max(m, red);
    {{R}} l = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const {{R}} p = mmc_exp(sc[j] - m);
        sc[j] = p;
        l += p;
    }
    l = block_sum(l, red);
    __syncthreads();
    for (int d = threadIdx.x; d < {{HD}}; d += blockDim.x) {
        {{R}} acc = 0;
        for (int j = 0; j < n; j++) acc += sc[j] * ld({{V}}, (bb * {{T}} + j) * ({{KV}} * {{HD}}) + (long)kvh * {{HD}} + d);
        st({{O}}, qrow + d, acc / l);
    }
    if (threadIdx.x == 0) {{STORE_LSE}}
}
