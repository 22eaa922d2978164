// The {{ROWS}} rows grouped by id, each id's rows in row order, and where each id's rows
// start: a stable LSD radix sort of the ids ({{PASSES}} passes of 8 bits) in one block of
// 32 warps. In a pass each warp counts and then places a contiguous slab of the rows, so a
// digit's rows keep their order across warps, and within a warp __match_any_sync ranks
// equal digits by lane. embedding_backward sums each id's rows in this order: the same on
// every run, with no float atomics. The workspace (two key/value arrays of the passes)
// lives with the kernel.
__device__ int {{NAME}}_ws[3 * {{ROWS}}];
extern "C" __global__ void __launch_bounds__(1024) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    const int *ids = {{IDS}};
    int *order = {{ORDER}}, *start = {{START}}; // [{{ROWS}}], [{{V}} + 1]
    __shared__ int hist[256 * 32];              // [digit][warp] of a pass
    __shared__ int sums[32];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const unsigned lower = (1u << lane) - 1u;

    // block-wide exclusive scan of a[0, n) in place (n up to 1024 * per), deterministic
    auto scan = [&](int *a, long n, bool global_mem) {
        const long per = (n + 1023) / 1024, lo = tid * per, hi = lo + per < n ? lo + per : n;
        int total = 0;
        for (long e = lo; e < hi; e++) total += a[e];
        int inc = total;
        for (int o = 1; o < 32; o <<= 1) {
            const int x = __shfl_up_sync(0xffffffffu, inc, o);
            if (lane >= o) inc += x;
        }
        __syncthreads();
        if (lane == 31) sums[warp] = inc;
        __syncthreads();
        int before = inc - total;
        for (int w = 0; w < warp; w++) before += sums[w];
        for (long e = lo; e < hi; e++) {
            const int x = a[e];
            a[e] = before;
            before += x;
        }
        if (global_mem) __threadfence_block();
        __syncthreads();
    };

    // where each id's rows start: counts, then their exclusive scan
    for (long v = tid; v <= {{V}}; v += 1024) start[v] = 0;
    __syncthreads();
    for (long r = tid; r < {{ROWS}}; r += 1024) atomicAdd(&start[ids[r]], 1);
    __syncthreads();
    scan(start, {{V}} + 1, true);

    // the sort: pass p reads the previous pass's output and writes A or B, so that the
    // last pass writes B, whose values are `order`
    int *ak = {{NAME}}_ws, *av = {{NAME}}_ws + {{ROWS}}, *bk = {{NAME}}_ws + 2 * {{ROWS}}, *bv = order;
    const int *sk = ids, *sv = 0;
    constexpr long SLAB = ({{ROWS}} + 32 * 32 - 1) / (32 * 32) * 32; // rows per warp, whole groups of 32
    for (int p = 0; p < {{PASSES}}; p++) {
        const int shift = 8 * p;
        int *dk = ({{PASSES}} - 1 - p) % 2 == 0 ? bk : ak, *dv = ({{PASSES}} - 1 - p) % 2 == 0 ? bv : av;
        for (int e = tid; e < 256 * 32; e += 1024) hist[e] = 0;
        __syncthreads();
        const long w0 = warp * SLAB, w1 = w0 + SLAB < {{ROWS}} ? w0 + SLAB : {{ROWS}};
        for (long r0 = w0; r0 < w1; r0 += 32) {
            const long r = r0 + lane;
            const int d = r < w1 ? (sk[r] >> shift) & 255 : 256;
            const unsigned same = __match_any_sync(0xffffffffu, d);
            if (d < 256 && (same & lower) == 0) hist[d * 32 + warp] += __popc(same);
            __syncwarp();
        }
        __syncthreads();
        scan(hist, 256 * 32, false);
        for (long r0 = w0; r0 < w1; r0 += 32) {
            const long r = r0 + lane;
            const int key = r < w1 ? sk[r] : 0, d = r < w1 ? (key >> shift) & 255 : 256;
            const unsigned same = __match_any_sync(0xffffffffu, d);
            if (d < 256) {
                const int at = hist[d * 32 + warp] + __popc(same & lower);
                dk[at] = key;
                dv[at] = sv ? sv[r] : (int)r;
            }
            __syncwarp();
            if (d < 256 && (same & lower) == 0) hist[d * 32 + warp] += __popc(same);
            __syncwarp();
        }
        __threadfence_block();
        __syncthreads();
        sk = dk, sv = dv;
    }
}
