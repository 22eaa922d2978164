// dW[v, :] = the sum of dy[r, :] over the rows r whose id is v, in row order, with the whole
// GPU: block c takes the sorted rows [{{K}} c, {{K}} c + {{K}}) and sums them run by run (a run
// is one id). An id whose rows all lie in the block is finished at once; an id whose rows
// span several blocks leaves one partial sum per block, and the last of those blocks to
// finish adds the partials in block order. The {{EMPTY}} blocks after the {{CHUNKS}} chunks
// write the ids no row has. Every sum has a fixed order, so runs repeat bit for bit; the
// partials and counters live with the kernel (a counter is reset by the block that reads it).
__device__ {{R}} {{NAME}}_carry[2 * {{CHUNKS}} * {{D}}];
__device__ unsigned int {{NAME}}_done[{{V}}];
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    const int *ids = {{IDS}}, *order = {{ORDER}}, *start = {{START}};
    __shared__ int rows[{{K}}], rid[{{K}}];
    __shared__ int last;
    const long c = blockIdx.x;
    if (c >= {{CHUNKS}}) {
        for (long v = (c - {{CHUNKS}}) * 8; v < (c - {{CHUNKS}}) * 8 + 8 && v < {{V}}; v++) {
            if (start[v] != start[v + 1]) continue;
            for (long col = threadIdx.x; col < {{D}}; col += {{BLOCK}}) {
                const long i = v * {{D}} + col;
                {{R}} {{VA}} = 0;
{{EPILOGUE}}
            }
        }
        return;
    }
    const long lo = c * {{K}}, hi = lo + {{K}} < {{ROWS}}L ? lo + {{K}} : {{ROWS}}L;
    const int n = (int)(hi - lo);
    for (int j = threadIdx.x; j < n; j += {{BLOCK}}) {
        const int r = order[lo + j];
        rows[j] = r;
        rid[j] = ids[r];
    }
    __syncthreads();
    for (int j = 0; j < n;) {
        const int v = rid[j];
        int j1 = j + 1;
        while (j1 < n && rid[j1] == v) j1++;
        {{R}} acc[{{PER}}];
#pragma unroll
        for (int k = 0; k < {{PER}}; k++) acc[k] = 0;
        for (int jj = j; jj < j1; jj++) {
            const long r = rows[jj];
#pragma unroll
            for (int k = 0; k < {{PER}}; k++) {
                const long col = threadIdx.x + k * {{BLOCK}};
                if (col < {{D}}) acc[k] += ld({{DY}}, r * {{D}} + col);
            }
        }
        const long vs = start[v], ve = start[v + 1];
        if (vs >= lo && ve <= hi) {
#pragma unroll
            for (int k = 0; k < {{PER}}; k++) {
                const long col = threadIdx.x + k * {{BLOCK}};
                if (col < {{D}}) {
                    const long i = (long)v * {{D}} + col;
                    {{R}} {{VA}} = acc[k];
{{EPILOGUE}}
                }
            }
        } else {
            // slot 2c: the id's rows began before this block; 2c + 1: they begin here
            const long slot = vs < lo ? 2 * c : 2 * c + 1;
#pragma unroll
            for (int k = 0; k < {{PER}}; k++) {
                const long col = threadIdx.x + k * {{BLOCK}};
                if (col < {{D}}) {{NAME}}_carry[slot * {{D}} + col] = acc[k];
            }
            __threadfence();
            __syncthreads();
            const long first = vs / {{K}}, lastc = (ve - 1) / {{K}};
            if (threadIdx.x == 0) last = atomicAdd(&{{NAME}}_done[v], 1u) == (unsigned)(lastc - first);
            __syncthreads();
            if (last) {
                __threadfence();
#pragma unroll
                for (int k = 0; k < {{PER}}; k++) {
                    const long col = threadIdx.x + k * {{BLOCK}};
                    if (col < {{D}}) {
                        {{R}} s = 0;
                        for (long cc = first; cc <= lastc; cc++)
                            s += __ldcg(&{{NAME}}_carry[(cc == first ? 2 * cc + 1 : 2 * cc) * {{D}} + col]);
                        const long i = (long)v * {{D}} + col;
                        {{R}} {{VA}} = s;
{{EPILOGUE}}
                    }
                }
                if (threadIdx.x == 0) {{NAME}}_done[v] = 0;
            }
        }
        j = j1;
    }
}
