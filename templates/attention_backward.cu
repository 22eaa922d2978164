// Gradient of attention. Blocks [0, B*H*T) each make one row of dq; blocks after that each
// make one row of dk and dv for a kv head, summing over the {{H}}/{{KV}} query heads that
// share it, so every output element has one writer (deterministic, no atomics).
// With P = exp(S - lse), D_i = dO_i . O_i:  dS = P * (dO V^T - D),  dq = dS K * scale,
// dk = dS^T Q * scale,  dv = P^T dO.
extern "C" __global__ void __launch_bounds__(128) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    extern __shared__ unsigned char smem_raw[];
    {{R}} *ps = ({{R}} *)smem_raw;       // [T]
    {{R}} *ds = ps + {{T}};              // [T]
    {{R}} *va = ds + {{T}};              // [HD]
    {{R}} *vb = va + {{HD}};             // [HD]
    __shared__ {{R}} red[32];
    const long nq = (long){{B}} * {{H}} * {{T}};
    const long qstride = {{H}} * {{HD}}, kstride = {{KV}} * {{HD}};
    if (blockIdx.x < nq) {
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
        return;
    }
    const long blk = blockIdx.x - nq;
    const long bk = blk / {{T}};
    const int j = (int)(blk % {{T}});
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
            {{R}} s = 0, dp = 0, di = 0;
            for (int d = 0; d < {{HD}}; d++) {
                const {{R}} dod = ld({{DO}}, qrow + d);
                s += ld({{Q}}, qrow + d) * va[d];
                dp += dod * vb[d];
                di += dod * ld({{O}}, qrow + d);
            }
            const {{R}} p = mmc_exp(s * ({{R}}){{SCALE}} - ld({{LSE}}, bh * {{T}} + i));
            ps[i] = p;
            ds[i] = p * (dp - di);
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
