// RMSNorm over rows of {{D}} elements, forward or backward: {{TPR}} threads a row and
// {{TEAMS}} rows at a time in a block, each thread {{CH}} runs of {{W}} consecutive elements (a
// run of 8 is one 16-byte access), so the row stays in registers between its reduction and
// the epilogue. Block b takes rows (it * gridDim.x + b) * {{TEAMS}} + team.
//   forward, torch: x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
//   backward, with r = rsqrt(mean(x^2) + eps): dx = r * dy - x * r^3 * mean(dy * x)
// With a row sum (a sum_to of the same rows: the norm weight's gradient) the same pass also
// sums that value over the rows, in a fixed order: each thread keeps its columns' sums, the
// block adds its teams in order into its row of a partial table; the last block of each
// group of {{GROUP}} blocks to finish adds the group's rows in order into a row of a second
// table, and the last group to finish adds that table's rows in order and runs the sum's
// epilogue. Whichever blocks finish last the order is the same, so the result repeats bit
// for bit. The tables and the finish counters live with the kernel (each counter is reset
// to zero by the block that saw it complete).
#if {{ROW_SUM}}
__device__ __align__(32) {{R}} {{NAME}}_partial[{{GRID}} * {{D}}];
__device__ __align__(32) {{R}} {{NAME}}_partial2[{{GROUPS}} * {{D}}];
__device__ unsigned int {{NAME}}_done[{{GROUPS}} + 1]; // by group, then the groups
// The sum of rows [r0, r1) of `table`, in order, over the thread's run u of {{W}} columns: the
// rows go to {{SUM_LANES}} lanes of threads in turn and the lanes meet in `part` in order;
// the thread of lane 0 gets the sum. Every thread of the block calls it.
__device__ __forceinline__ void {{NAME}}_sum_rows(const {{R}} *table, int r0, int r1, int u, int lane, bool mine,
                                                  {{R}} (&acc)[{{W}}], {{R}} *part) {
#pragma unroll
    for (int k = 0; k < {{W}}; k++) acc[k] = 0;
    if (mine)
        for (int y = r0 + lane; y < r1; y += {{SUM_LANES}}) {
            {{R}} v[8];
#if {{W}} == 8
            ldv_cg(table, (long)y * {{D}} + u * 8, v);
#else
            v[0] = __ldcg(&table[(long)y * {{D}} + u]);
#endif
#pragma unroll
            for (int k = 0; k < {{W}}; k++) acc[k] += v[k];
        }
#if {{SUM_LANES}} > 1
    __syncthreads();
    if (mine)
#pragma unroll
        for (int k = 0; k < {{W}}; k++) part[lane * {{D}} + u * {{W}} + k] = acc[k];
    __syncthreads();
    if (mine && lane == 0)
#pragma unroll
        for (int k = 0; k < {{W}}; k++) {
            acc[k] = 0;
            for (int l = 0; l < {{SUM_LANES}}; l++) acc[k] += part[l * {{D}} + u * {{W}} + k];
        }
#endif
}
#endif
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} red[2 * {{BLOCK}} / 32];
    const int team = threadIdx.x / {{TPR}}, t = threadIdx.x % {{TPR}};
    {{R}} xv[{{CH}} * {{W}}];
#if {{BACKWARD}}
    {{R}} dyv[{{CH}} * {{W}}];
#endif
#if {{ROW_SUM}}
    {{R}} rs[{{CH}} * {{W}}];
#pragma unroll
    for (int j = 0; j < {{CH}} * {{W}}; j++) rs[j] = 0;
#endif
{{ARRAYS}}
{{DECLS}}
    for (int it = 0; it < {{ITERS}}; it++) {
        const long row = ((long)it * gridDim.x + blockIdx.x) * {{TEAMS}} + team;
        const bool live = row < {{ROWS}}L;
        // every tensor the row reads, for all runs at once, before any arithmetic, so that a
        // warp keeps its whole row in flight (the guards fold away when every run exists)
#pragma unroll
        for (int c = 0; c < {{CH}}; c++) {
            const int col0 = (t + c * {{TPR}}) * {{W}};
            if ({{FULL}} || (live && col0 < {{D}})) {
                const long i0 = row * {{D}} + col0;
{{LOADS}}
            }
        }
        {{R}} s[1 + {{BACKWARD}}]; // sum of x^2 (and of dy x)
#pragma unroll
        for (int j = 0; j < 1 + {{BACKWARD}}; j++) s[j] = 0;
#pragma unroll
        for (int c = 0; c < {{CH}}; c++) {
            const int col0 = (t + c * {{TPR}}) * {{W}};
            if ({{FULL}} || (live && col0 < {{D}})) {
                const long i0 = row * {{D}} + col0;
#pragma unroll
                for (int k = 0; k < {{W}}; k++) {
                    const long i = i0 + k;
{{PROLOGUE}}
                    xv[c * {{W}} + k] = {{X}};
#if {{BACKWARD}}
                    dyv[c * {{W}} + k] = {{DY}};
                    s[0] += xv[c * {{W}} + k] * xv[c * {{W}} + k];
                    s[1] += dyv[c * {{W}} + k] * xv[c * {{W}} + k];
#else
                    s[0] += mmc_mul(xv[c * {{W}} + k], xv[c * {{W}} + k]);
#endif
#if {{ROW_SUM}}
                    rs[c * {{W}} + k] += {{ROW_SUM_X}};
#endif
                }
{{PRO_STORES}}
            }
        }
        team_sum<{{TPR}}>(s, red);
#if {{BACKWARD}}
        const {{R}} r = mmc_rsqrt(s[0] * ({{R}})(1.0 / {{D}}) + ({{R}}){{EPS}});
        const {{R}} cf = s[1] * ({{R}})(1.0 / {{D}}) * r * r * r;
#else
        const {{R}} r = mmc_rsqrt(mmc_add(mmc_mul(s[0], ({{R}})(1.0 / {{D}})), ({{R}}){{EPS}}));
        {{STORE_FACTOR}} // the row's factor, when the backward pass remakes the output from it
#endif
#pragma unroll
        for (int c = 0; c < {{CH}}; c++) {
            const int col0 = (t + c * {{TPR}}) * {{W}};
            if ({{FULL}} || (live && col0 < {{D}})) {
                const long i0 = row * {{D}} + col0;
#pragma unroll
                for (int k = 0; k < {{W}}; k++) {
                    const long i = i0 + k;
#if {{BACKWARD}}
                    {{R}} {{VA}} = r * dyv[c * {{W}} + k] - xv[c * {{W}} + k] * cf;
#else
                    {{R}} {{VA}} = mmc_mul(xv[c * {{W}} + k], r);
#endif
{{EPILOGUE}}
                }
{{EPI_STORES}}
            }
        }
    }
#if {{ROW_SUM}}
    // this block's sums: its teams in order
    __shared__ {{R}} part[{{SUM_PART}}];
    __shared__ int last;
#pragma unroll
    for (int c = 0; c < {{CH}}; c++) {
        const int col0 = (t + c * {{TPR}}) * {{W}};
        if (col0 < {{D}})
#pragma unroll
            for (int k = 0; k < {{W}}; k++) part[team * {{D}} + col0 + k] = rs[c * {{W}} + k];
    }
    __syncthreads();
    for (int col = threadIdx.x; col < {{D}}; col += {{BLOCK}}) {
        {{R}} v = 0;
        for (int tm = 0; tm < {{TEAMS}}; tm++) v += part[tm * {{D}} + col];
        {{NAME}}_partial[(long)blockIdx.x * {{D}} + col] = v;
    }
    __threadfence();
    __syncthreads();
    // the last block of the group adds the group's rows into its row of the second table
    const int g = blockIdx.x / {{GROUP}}, g0 = g * {{GROUP}}, g1 = g0 + {{GROUP}} < {{GRID}} ? g0 + {{GROUP}} : {{GRID}};
    if (threadIdx.x == 0) last = atomicAdd(&{{NAME}}_done[g], 1u) == (unsigned)(g1 - g0 - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    // runs of {{W}} columns, {{SUM_LANES}} lanes of threads
    const int per = {{BLOCK}} / {{SUM_LANES}}, lane = threadIdx.x / per;
    for (int u0 = 0; u0 < {{D}} / {{W}}; u0 += per) {
        const int u = u0 + threadIdx.x % per;
        const bool mine = u < {{D}} / {{W}} && lane < {{SUM_LANES}};
        {{R}} acc[{{W}}];
        {{NAME}}_sum_rows({{NAME}}_partial, g0, g1, u, lane, mine, acc, part);
        if (mine && lane == 0)
#pragma unroll
            for (int k = 0; k < {{W}}; k++) {{NAME}}_partial2[(long)g * {{D}} + u * {{W}} + k] = acc[k];
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        {{NAME}}_done[g] = 0;
        last = atomicAdd(&{{NAME}}_done[{{GROUPS}}], 1u) == {{GROUPS}} - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    // the last group: the groups' rows in order, then the sum's epilogue
    for (int u0 = 0; u0 < {{D}} / {{W}}; u0 += per) {
        const int u = u0 + threadIdx.x % per;
        const bool mine = u < {{D}} / {{W}} && lane < {{SUM_LANES}};
        {{R}} acc[{{W}}];
        {{NAME}}_sum_rows({{NAME}}_partial2, 0, {{GROUPS}}, u, lane, mine, acc, part);
        if (mine && lane == 0) {
            const long i0 = (long)u * {{W}};
{{SUM_EPI_LOADS}}
#pragma unroll
            for (int k = 0; k < {{W}}; k++) {
                const long i = i0 + k;
                {{R}} {{SUM_VA}} = acc[k];
{{SUM_EPILOGUE}}
            }
{{SUM_EPI_STORES}}
        }
    }
    if (threadIdx.x == 0) {{NAME}}_done[{{GROUPS}}] = 0;
#endif
}
