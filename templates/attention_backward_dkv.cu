// Gradient of attention for k and v, the exact kernel: one block per (batch, kv head, key
// row) makes one row of dk and dv, summing over the {{H}}/{{KV}} query heads that share it,
// so every element has one writer (deterministic, no atomics). With P = exp(S - lse) and
// D = rowsum(dO * O) from the dq kernel: dk = (P * (dO V^T - D))^T Q * scale, dv = P^T dO.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    extern __shared__ unsigned char smem_raw[];
    {{R}} *ps = ({{R}} *)smem_raw;       // [T]
    {{R}} *ds = ps + {{T}};              // [T]
    {{R}} *va = ds + {{T}};              // [HD]
    {{R}} *vb = va + {{HD}};             // [HD]
    const long qstride = {{H}} * {{HD}}, kstride = {{KV}} * {{HD}};
    const long bk = blockIdx.x / {{T}};
    const int j = (int)(blockIdx.x % {{T}});
    const long bb = bk / {{KV}};
    const int kvh = (int)(bk % {{KV}});
    const long krow = (bb * {{T}} + j) * kstride + (long)kvh * {{HD}};
    for (int d = threadIdx.x; d < {{HD}}; d += blockDim.x) {
        va[d] = ld({{K}}, krow + d);
        vb[d] = ld({{V}}, krow + d);
    }
    {{R}} dk[({{HD}} + 127) / 128], dv[({{HD}} + 127) / 128];
    for (int k = 0; k < ({{HD}} + 127) / 128; k++) dk[k] = dv[k] = 0;
    const int i0 = {{CAUSAL}} ? j : 0;
    for (int r = 0; r < {{H}} / {{KV}}; r++) {
        const int h = kvh * ({{H}} / {{KV}}) + r;
        const long bh = bb * {{H}} + h;
        __syncthreads();
        for (int i = i0 + threadIdx.x; i < {{T}}; i += blockDim.x) {
            const long qrow = (bb * {{T}} + i) * qstride + (long)h * {{HD}};
            {{R}} s = 0, dp = 0;
            for (int d = 0; d < {{HD}}; d++) {
                s += ld({{Q}}, qrow + d) * va[d];
                dp += ld({{DO}}, qrow + d) * vb[d];
            }
            const {{R}} p = mmc_exp(s * ({{R}}){{SCALE}} - ld({{LSE}}, bh * {{T}} + i));
            ps[i] = p;
            ds[i] = p * (dp - ld({{DSUM}}, bh * {{T}} + i));
        }
        __syncthreads();
        for (int k = 0; k < ({{HD}} + 127) / 128; k++) {
            const int d = threadIdx.x + k * 128;
            if (d >= {{HD}}) continue;
            for (int i = i0; i < {{T}}; i++) {
                const long qrow = (bb * {{T}} + i) * qstride + (long)h * {{HD}};
                dv[k] += ps[i] * ld({{DO}}, qrow + d);
                dk[k] += ds[i] * ld({{Q}}, qrow + d);
            }
        }
    }
    for (int k = 0; k < ({{HD}} + 127) / 128; k++) {
        const int d = threadIdx.x + k * 128;
        if (d >= {{HD}}) continue;
        st({{DK}}, krow + d, dk[k] * ({{R}}){{SCALE}});
        st({{DV}}, krow + d, dv[k]);
    }
}
