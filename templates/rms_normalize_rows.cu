// RMSNorm over rows of {{D}} elements, forward or backward: {{TPR}} threads a row and
// {{TEAMS}} rows at a time in a block, each thread {{CH}} runs of {{W}} consecutive elements (a
// run of 8 is one 16-byte access), so the row stays in registers between its reduction and
// the epilogue. Block b takes rows (it * gridDim.x + b) * {{TEAMS}} + team.
//   forward, torch: x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
//   backward, with r = rsqrt(mean(x^2) + eps): dx = r * dy - x * r^3 * mean(dy * x)
// With a row sum (a sum_to of the same rows: the norm weight's gradient) the same pass also
// sums that value over the rows, in a fixed order: each thread keeps its columns' sums, the
// block adds its teams in order into its row of a partial table, and the last block to
// finish adds the table's rows in order and runs the sum's epilogue. Whichever block
// finishes last the order is the same, so the result repeats bit for bit. The table and the
// finish counter live with the kernel (the last block resets the counter to zero).
#if {{ROW_SUM}}
__device__ {{R}} {{NAME}}_partial[{{GRID}} * {{D}}];
__device__ unsigned int {{NAME}}_done;
#endif
extern "C" __global__ void __launch_bounds__({{THREADS}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} red[2 * {{THREADS}} / 32];
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
    for (int it = 0; it < {{ITERS}}; it++) {
        const long row = ((long)it * gridDim.x + blockIdx.x) * {{TEAMS}} + team;
        const bool live = row < {{ROWS}}L;
        {{R}} s[1 + {{BACKWARD}}]; // sum of x^2 (and of dy x)
#pragma unroll
        for (int j = 0; j < 1 + {{BACKWARD}}; j++) s[j] = 0;
#pragma unroll
        for (int c = 0; c < {{CH}}; c++) {
            const int col0 = (t + c * {{TPR}}) * {{W}};
            if (live && col0 < {{D}}) {
                const long i0 = row * {{D}} + col0;
{{PRO_LOADS}}
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
#endif
#pragma unroll
        for (int c = 0; c < {{CH}}; c++) {
            const int col0 = (t + c * {{TPR}}) * {{W}};
            if (live && col0 < {{D}}) {
                const long i0 = row * {{D}} + col0;
{{EPI_LOADS}}
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
    for (int col = threadIdx.x; col < {{D}}; col += {{THREADS}}) {
        {{R}} v = 0;
        for (int tm = 0; tm < {{TEAMS}}; tm++) v += part[tm * {{D}} + col];
        {{NAME}}_partial[(long)blockIdx.x * {{D}} + col] = v;
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&{{NAME}}_done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    // the last block: the table's rows in order, in {{SUM_LANES}} lanes of rows (block y goes to
    // lane y % lanes), then the lanes in order; {{W}} consecutive columns a thread
    const int per = {{THREADS}} / {{SUM_LANES}}, lane = threadIdx.x / per;
    for (int u0 = 0; u0 < {{D}} / {{W}}; u0 += per) {
        const int u = u0 + threadIdx.x % per;
        const bool mine = u < {{D}} / {{W}} && lane < {{SUM_LANES}};
        {{R}} acc[{{W}}];
#pragma unroll
        for (int k = 0; k < {{W}}; k++) acc[k] = 0;
        if (mine)
            for (int y = lane; y < (int)gridDim.x; y += {{SUM_LANES}}) {
                {{R}} v[{{W}}];
#pragma unroll
                for (int k = 0; k < {{W}}; k++) v[k] = __ldcg(&{{NAME}}_partial[(long)y * {{D}} + u * {{W}} + k]);
#pragma unroll
                for (int k = 0; k < {{W}}; k++) acc[k] += v[k];
            }
#if {{SUM_LANES}} > 1
        // one pass (per covers every column): the lanes meet in shared memory
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
    if (threadIdx.x == 0) {{NAME}}_done = 0;
#endif
}
