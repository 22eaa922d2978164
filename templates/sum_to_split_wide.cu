// Sums [{{M}}, {{C}}] over its rows with the whole GPU, in a fixed order, 8 consecutive columns a
// thread with 16-byte loads: block (x, y) sums rows [y {{ROWS}}, (y + 1) {{ROWS}}) of columns
// [256 x, 256 x + 256) in {{LANES}} row lanes (a warp each), adds the lanes in order and leaves the partial sum in
// its chunk's row of a partial table; the last block of each strip of columns to finish adds
// the {{CHUNKS}} partials in chunk order and runs the epilogue. Whichever block finishes last,
// every sum has the same order, so the result repeats bit for bit. The partials and the
// finish counters live with the kernel (a counter is zero between launches: the last block
// resets it).
__device__ __align__(16) {{R}} {{NAME}}_partial[{{CHUNKS}} * {{C}}];
__device__ unsigned int {{NAME}}_done[{{STRIPS}}];
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} part[{{LANES}}][257];
    __shared__ int last;
    const int lane = threadIdx.x & 31, rl = threadIdx.x >> 5;
    const long c0 = (long)blockIdx.x * 256 + lane * 8;
    const long m0 = (long)blockIdx.y * {{ROWS}}, m1 = m0 + {{ROWS}} < {{M}}L ? m0 + {{ROWS}} : {{M}}L;
    {{R}} acc[8];
#pragma unroll
    for (int k = 0; k < 8; k++) acc[k] = 0;
    if (c0 < {{C}}) {
        for (long m = m0 + rl; m < m1; m += {{LANES}}) {
            const long i0 = m * {{C}} + c0;
{{PRO_LOADS}}
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const long i = i0 + k;
{{PROLOGUE}}
                acc[k] += {{X}};
            }
{{PRO_STORES}}
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++) part[rl][lane * 8 + k] = acc[k];
    __syncthreads();
    if (rl == 0 && c0 < {{C}}) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            {{R}} s = 0;
            for (int r = 0; r < {{LANES}}; r++) s += part[r][lane * 8 + k];
            {{NAME}}_partial[blockIdx.y * {{C}} + c0 + k] = s;
        }
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&{{NAME}}_done[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
#pragma unroll
    for (int k = 0; k < 8; k++) acc[k] = 0;
    if (c0 < {{C}}) {
#pragma unroll 4
        for (int y = rl; y < {{CHUNKS}}; y += {{LANES}}) {
            const {{R}} *row = &{{NAME}}_partial[y * {{C}} + c0];
            {{R}} v[8];
            ldv_cg(row, 0, v);
#pragma unroll
            for (int k = 0; k < 8; k++) acc[k] += v[k];
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++) part[rl][lane * 8 + k] = acc[k];
    __syncthreads();
    if (rl == 0 && c0 < {{C}}) {
        const long i0 = c0;
{{EPI_LOADS}}
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const long i = i0 + k;
            {{R}} {{VA}} = 0;
            for (int r = 0; r < {{LANES}}; r++) {{VA}} += part[r][lane * 8 + k];
{{EPILOGUE}}
        }
{{EPI_STORES}}
    }
    if (threadIdx.x == 0) {{NAME}}_done[blockIdx.x] = 0;
}
