// dW[v, :] = sum of dy[r, :] over the rows r whose id is v, in row order: one block per
// vocabulary row scans the ids (deterministic, no atomics). The reference for
// embedding_backward_sorted.cu.
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    __shared__ int ids[{{BLOCK}}];
    const int v = blockIdx.x;
    {{R}} acc[{{PER}}];
#pragma unroll
    for (int k = 0; k < {{PER}}; k++) acc[k] = 0;
    for (long r0 = 0; r0 < {{ROWS}}L; r0 += {{BLOCK}}) {
        __syncthreads();
        if (r0 + threadIdx.x < {{ROWS}}L) ids[threadIdx.x] = ld({{IDS}}, r0 + threadIdx.x);
        __syncthreads();
        const int n = {{ROWS}}L - r0 < {{BLOCK}} ? (int)({{ROWS}}L - r0) : {{BLOCK}};
        for (int r = 0; r < n; r++) {
            if (ids[r] != v) continue;
#pragma unroll
            for (int k = 0; k < {{PER}}; k++) {
                const int col = threadIdx.x + k * {{BLOCK}};
                if (col < {{D}}) acc[k] += ld({{DY}}, (r0 + r) * {{D}} + col);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < {{PER}}; k++) {
        const int col = threadIdx.x + k * {{BLOCK}};
        if (col < {{D}}) {
            const long i = (long)v * {{D}} + col;
            {{R}} {{VA}} = acc[k];
{{EPILOGUE}}
        }
    }
}
