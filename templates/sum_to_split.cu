// Sums [{{M}}, {{C}}] over its rows with the whole GPU, in a fixed order: block (x, y) sums
// rows [y {{ROWS}}, (y + 1) {{ROWS}}) of columns [32 x, 32 x + 32) in {{LANES}} row lanes (a warp each), adds the
// lanes in order and leaves the partial sum in its chunk's row of a partial table; the
// last block of each strip of columns to finish adds the {{CHUNKS}} partials in chunk order
// and runs the epilogue. Whichever block finishes last, every sum has the same order, so
// the result repeats bit for bit. The partials and the finish counters live with the
// kernel (a counter is zero between launches: the last block resets it).
__device__ {{R}} {{NAME}}_partial[{{CHUNKS}} * {{C}}];
__device__ unsigned int {{NAME}}_done[{{STRIPS}}];
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ {{R}} part[{{LANES}}][33];
    __shared__ int last;
    const int lane = threadIdx.x & 31, rl = threadIdx.x >> 5;
    const long c = (long)blockIdx.x * 32 + lane;
    const long m0 = (long)blockIdx.y * {{ROWS}}, m1 = m0 + {{ROWS}} < {{M}}L ? m0 + {{ROWS}} : {{M}}L;
    {{R}} acc = 0;
    if (c < {{C}}) {
        for (long m = m0 + rl; m < m1; m += {{LANES}}) {
            const long i = m * {{C}} + c;
{{PROLOGUE}}
            acc += {{X}};
        }
    }
    part[rl][lane] = acc;
    __syncthreads();
    if (rl == 0) {
        {{R}} s = 0;
        for (int r = 0; r < {{LANES}}; r++) s += part[r][lane];
        if (c < {{C}}) {{NAME}}_partial[blockIdx.y * {{C}} + c] = s;
        __threadfence();
    }
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&{{NAME}}_done[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    acc = 0;
    if (c < {{C}})
        for (int y = rl; y < {{CHUNKS}}; y += {{LANES}}) acc += __ldcg(&{{NAME}}_partial[y * {{C}} + c]);
    part[rl][lane] = acc;
    __syncthreads();
    if (rl == 0 && c < {{C}}) {
        {{R}} {{VA}} = 0;
        for (int r = 0; r < {{LANES}}; r++) {{VA}} += part[r][lane];
        const long i = c;
{{EPILOGUE}}
    }
    if (threadIdx.x == 0) {{NAME}}_done[blockIdx.x] = 0;
}
