// The {{ROWS}} rows grouped by id, each id's rows in row order, and where each id's rows
// start: a stable LSD radix sort of the ids ({{PASSES}} passes of 8 bits) in one block of
// {{WARPS}} warps. In a pass each warp counts and then places a contiguous slab of the rows, so a
// digit's rows keep their order across warps, and within a warp __match_any_sync ranks
// equal digits by lane. embedding_backward sums each id's rows in this order: the same on
// every run, with no float atomics. The digit counts (and, for a vocabulary that fits, the
// id counts) are in shared memory; the workspace of the passes lives with the kernel.
__device__ int {{NAME}}_ws[3 * {{ROWS}}];
extern "C" __global__ void __launch_bounds__({{BLOCK}}) {{NAME}}(const MmcBuffers b) {
{{POINTERS}}
    const int *ids = {{IDS}};
    int *order = {{ORDER}}, *start = {{START}}; // [{{ROWS}}], [{{V}} + 1]
    extern __shared__ int smem_int[];
    int *hist = smem_int;                          // [256 digits][{{WARPS}} warps] of a pass
    int *counts = {{COUNTS_SHARED}} ? hist + 256 * {{WARPS}} : start; // [{{V}} + 1]
    __shared__ int sums[{{WARPS}}];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const unsigned lower = (1u << lane) - 1u;

    // block-wide exclusive scan of a[0, n) in place, deterministic
    auto scan = [&](int *a, long n) {
        const long per = (n + {{BLOCK}} - 1) / {{BLOCK}}, lo = tid * per, hi = lo + per < n ? lo + per : n;
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
        __syncthreads();
    };

    // where each id's rows start: counts, then their exclusive scan
    for (long v = tid; v <= {{V}}; v += {{BLOCK}}) counts[v] = 0;
    __syncthreads();
    for (long r = tid; r < {{ROWS}}; r += {{BLOCK}}) atomicAdd(&counts[ids[r]], 1);
    __syncthreads();
    scan(counts, {{V}} + 1);
    if ({{COUNTS_SHARED}})
        for (long v = tid; v <= {{V}}; v += {{BLOCK}}) start[v] = counts[v];

    // the sort: pass p reads the previous pass's output and writes A or B, so that the last
    // pass writes B, whose values are `order`. A warp keeps its slab in registers, GROUPS
    // groups of 32 rows at a time.
    int *ak = {{NAME}}_ws, *av = {{NAME}}_ws + {{ROWS}}, *bk = {{NAME}}_ws + 2 * {{ROWS}}, *bv = order;
    const int *sk = ids, *sv = 0;
    constexpr long SLAB = ({{ROWS}} + {{WARPS}} * 32 - 1) / ({{WARPS}} * 32) * 32; // rows per warp, whole groups of 32
    constexpr int GROUPS = SLAB / 32 < 32 ? (int)(SLAB / 32) : 32, BATCHES = (int)((SLAB / 32 + GROUPS - 1) / GROUPS);
    const long w0 = warp * SLAB, w1 = w0 + SLAB < {{ROWS}} ? w0 + SLAB : {{ROWS}};
    for (int p = 0; p < {{PASSES}}; p++) {
        const int shift = 8 * p;
        int *dk = ({{PASSES}} - 1 - p) % 2 == 0 ? bk : ak, *dv = ({{PASSES}} - 1 - p) % 2 == 0 ? bv : av;
        for (int e = tid; e < 256 * {{WARPS}}; e += {{BLOCK}}) hist[e] = 0;
        __syncthreads();
        int key[GROUPS], val[GROUPS];
        for (int bt = 0; bt < BATCHES; bt++) {
#pragma unroll
            for (int j = 0; j < GROUPS; j++) {
                const long r = w0 + ((long)bt * GROUPS + j) * 32 + lane;
                key[j] = r < w1 ? sk[r] : -1;
                val[j] = r < w1 ? (sv ? sv[r] : (int)r) : 0;
            }
#pragma unroll
            for (int j = 0; j < GROUPS; j++) {
                const int d = key[j] >= 0 ? (key[j] >> shift) & 255 : 256;
                const unsigned same = __match_any_sync(0xffffffffu, d);
                if (d < 256 && (same & lower) == 0) hist[d * {{WARPS}} + warp] += __popc(same);
                __syncwarp();
            }
        }
        __syncthreads();
        scan(hist, 256 * {{WARPS}});
        for (int bt = 0; bt < BATCHES; bt++) {
            if (BATCHES > 1) {
#pragma unroll
                for (int j = 0; j < GROUPS; j++) {
                    const long r = w0 + ((long)bt * GROUPS + j) * 32 + lane;
                    key[j] = r < w1 ? sk[r] : -1;
                    val[j] = r < w1 ? (sv ? sv[r] : (int)r) : 0;
                }
            }
#pragma unroll
            for (int j = 0; j < GROUPS; j++) {
                const int d = key[j] >= 0 ? (key[j] >> shift) & 255 : 256;
                const unsigned same = __match_any_sync(0xffffffffu, d);
                if (d < 256) {
                    const int at = hist[d * {{WARPS}} + warp] + __popc(same & lower);
                    dk[at] = key[j];
                    dv[at] = val[j];
                }
                __syncwarp();
                if (d < 256 && (same & lower) == 0) hist[d * {{WARPS}} + warp] += __popc(same);
                __syncwarp();
            }
        }
        __syncthreads();
        sk = dk, sv = dv;
    }
}
