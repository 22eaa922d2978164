// Gradient of attention for q, the exact kernel (the f32 and f64 policies, and the
// reference the flash kernels are tested against): one block per (batch, head, query
// row) makes one row of dq, and keeps D_i = dO_i . O_i for the dk/dv kernel. With
// P = exp(S - lse): dS = P * (dO V^T - D), dq = dS K * scale.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    extern __shared__ unsigned char smem_raw[];
    {{R}} *ds = ({{R}} *)smem_raw;       // [T]
    {{R}} *va = ds + {{T}};              // [HD]
    {{R}} *vb = va + {{HD}};             // [HD]
    __shared__ {{R}} red[32];
    const long qstride = {{H}} * {{HD}}, kstride = {{KV}} * {{HD}};
    const long bh = blockIdx.x / {{T}};
    const int i = (int)(blockIdx.x % {{T}});
    const long bb = bh / {{H}};
    const int h = (int)(bh % {{H}}), kvh = h / ({{H}} / {{KV}});
    const long qrow = (bb * {{T}} + i) * qstride + (long)h * {{HD}};
    {{R}} di = 0;
    for (int d = threadIdx.x; d < {{HD}}; d += blockDim.x) {
        va[d] = ld({{Q}}, qrow + d);
        vb[d] = ld({{DO}}, qrow + d);
        di += vb[d] * ld({{O}}, qrow + d);
    }
    di = block_sum(di, red);
    if (threadIdx.x == 0) st({{DSUM}}, bh * {{T}} + i, di);
    const {{R}} lse = ld({{LSE}}, bh * {{T}} + i);
    const int n = {{CAUSAL}} ? i + 1 : {{T}};
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const long krow = (bb * {{T}} + j) * kstride + (long)kvh * {{HD}};
        {{R}} s = 0, dp = 0;
        for (int d = 0; d < {{HD}}; d++) {
            s += va[d] * ld({{K}}, krow + d);
            dp += vb[d] * ld({{V}}, krow + d);
        }
        const {{R}} p = mmc_exp(s * ({{R}}){{SCALE}} - lse);
        ds[j] = p * (dp - di);
    }
    __syncthreads();
    for (int d = threadIdx.x; d < {{HD}}; d += blockDim.x) {
        {{R}} acc = 0;
        for (int j = 0; j < n; j++) acc += ds[j] * ld({{K}}, (bb * {{T}} + j) * kstride + (long)kvh * {{HD}} + d);
        st({{DQ}}, qrow + d, acc * ({{R}}){{SCALE}});
    }
}
