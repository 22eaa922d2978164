// ---- GEMM on Hopper's warpgroup tensor cores (wgmma, sm_90a) whose elementwise readers run
// in its epilogue: the product is rounded to its dtype in registers and handed, 8 columns of
// a row at a time, to the fused ops, so it makes no round trip through memory (SwiGLU's
// backward reads dh from shared memory, and dh is never stored). Included after
// flash_attention_sm90.cuh, whose descriptors, fences and copies it shares.
//
// out[M, N] = A[M, K] B with f32 accumulators. A is K-major: a [M, K] matrix. B is read in
// slabs of 64 output columns, a 64 x 64 tile per 64-deep k step:
//  - K-major (B_MN = 0): the slab is 64 rows of a [N, K] weight (nn.Linear's y = x W^T);
//  - MN-major (B_MN = 1): 64 columns of a [K, N] matrix (dx = dy W).
// A tile is 128 rows x NS slabs. Unpaired, tile n's slabs are the columns from 64 NS n on;
// paired (SwiGLU's forward), slab s of tile n is half s's columns from 64 n on, so the
// epilogue sees gate and up of the same elements.
//
// The kernel is persistent and warp-specialized, as Hopper GEMMs are. A block holds a
// producer warpgroup, of which one thread issues the copies, and C consumer warpgroups.
// The copies are the Tensor Memory Accelerator's (cp.async.bulk.tensor): a stage is one
// 128 x 64 box of A and NS 64 x 64 boxes of B, described by the tensor maps the runtime
// makes (runtime/tensor_map.c), landing already swizzled, rows past M as zeros, with no
// thread of the block spent on addresses. They fill a ring of STAGES stages, each with a
// `full` mbarrier (its bytes landed: the copies count them) and an `empty` one (its reader
// is done). The consumers take the block's tiles in turn (with two: 0, 2, 4, .. and 1, 3,
// 5, ..): while one runs its epilogue (rounding, the fused ops, the stores), another keeps
// the tensor cores busy. They take turns at the main loop too (a `turn` mbarrier each),
// which also keeps a consumer from waiting on a stage two uses ahead, where a parity wait
// could not tell the uses apart. C is 2 or 3 (codegen_gemm.c chooses): three consumers
// have fewer registers (160 against 232), which an epilogue that reads nothing but the
// product affords, and run two epilogues beside each main loop (H200, ncu, MiniMind b64:
// SwiGLU's forward 204 -> 196 us); one that also loads operands (SwiGLU's backward) wants
// the registers for its loads in flight. Tiles are 128-byte rows with the 128-byte swizzle,
// as in flash_attention_sm90.cuh.

// a CUtensorMap as a kernel receives it (NVRTC has no cuda.h): 128 opaque bytes
struct __align__(64) MmcTensorMap {
    unsigned long long opaque[16];
};
// the bytes of 8 consecutive elements as loaded (an epilogue's Regs): ldv converts them
template <typename T> struct MmcRaw {
    uint4 w[sizeof(T) / 2];
};
template <typename T> __device__ __forceinline__ void ldraw(const T *p, long i, MmcRaw<T> &o) {
#pragma unroll
    for (int j = 0; j < (int)(sizeof(T) / 2); j++) o.w[j] = ((const uint4 *)(p + i))[j];
}
template <typename T, long W, long LD> __device__ __forceinline__ void ldraw(const Strided<T, W, LD> &s, long i, MmcRaw<T> &o) {
    ldraw((const T *)s.p, s.at(i), o);
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
namespace gemm_sm90 {

using flash::u32;
using flash_sm90::u64;

constexpr int BM = 128, BK = 64, STAGES = 4;
template <int C> __host__ __device__ constexpr int threads() { return 128 * (C + 1); } // the producer's warpgroup last
// registers a thread: what the producer warpgroup gives up the consumers take (of 65536; a
// consumer's main loop holds 128 accumulators)
template <int C> __host__ __device__ constexpr int producer_regs() { return C == 2 ? 40 : 24; }
template <int C> __host__ __device__ constexpr int consumer_regs() { return C == 2 ? 232 : 160; }
constexpr u32 SLAB = 8192;                    // 64 rows of 128 bytes: a swizzled 64 x 64 tile
// shared memory from a 1024-byte boundary: the ring, each consumer's rounded tile, the
// mbarriers (full and empty by stage, turn by consumer, 8 bytes each)
template <int NS> __host__ __device__ constexpr u32 ring_bytes() { return STAGES * (2 + NS) * SLAB; }
// a consumer's rounded tile: NS slabs of 128 rows of 128 bytes, swizzled as the ring is
// (what the product's tensor map stores from), 16 KB apart
constexpr u32 OUT_SLAB = BM * 128;
template <int NS> __host__ __device__ constexpr u32 out_bytes() { return NS * OUT_SLAB; }
template <int NS, int C> __host__ __device__ constexpr u32 smem_bytes() {
    return ring_bytes<NS>() + C * out_bytes<NS>() + (2 * STAGES + C) * 8;
}

#define GEMM_SM90_ACC64(d)                                                                                           \
    FLASH_SM90_ACC32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]),  \
        "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]),     \
        "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),     \
        "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),     \
        "+f"(d[63])
#define GEMM_SM90_REGS64                                                                                             \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30," \
    "%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,"   \
    "%59,%60,%61,%62,%63}"

// d (64 x 64 NS, f32) (+)= A B, both from shared memory; B transposed (MN-major) when B_MN
template <typename E, int NS, int B_MN> struct Mma;
#define GEMM_SM90_MMA(E, TY, B_MN)                                                                                    \
    template <> struct Mma<E, 1, B_MN> {                                                                              \
        static __device__ __forceinline__ void run(float *d, u64 a, u64 b, int acc) {                                \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                 \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " FLASH_SM90_REGS32                \
                         ", %32, %33, p, 1, 1, 0, " #B_MN ";\n}\n"                                                    \
                         : FLASH_SM90_ACC32(d)                                                                        \
                         : "l"(a), "l"(b), "r"(acc));                                                                 \
        }                                                                                                             \
    };                                                                                                                \
    template <> struct Mma<E, 2, B_MN> {                                                                              \
        static __device__ __forceinline__ void run(float *d, u64 a, u64 b, int acc) {                                \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                 \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " GEMM_SM90_REGS64                \
                         ", %64, %65, p, 1, 1, 0, " #B_MN ";\n}\n"                                                    \
                         : GEMM_SM90_ACC64(d)                                                                         \
                         : "l"(a), "l"(b), "r"(acc));                                                                 \
        }                                                                                                             \
    };
GEMM_SM90_MMA(__half, "f16", 0)
GEMM_SM90_MMA(__half, "f16", 1)
GEMM_SM90_MMA(__nv_bfloat16, "bf16", 0)
GEMM_SM90_MMA(__nv_bfloat16, "bf16", 1)

// ---- mbarriers (shared memory, 8 bytes each)
__device__ __forceinline__ void bar_init(u32 bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void bar_wait(u32 bar, int phase) {
    asm volatile("{\n.reg .pred done;\nwait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n}\n" ::"r"(bar),
                 "r"(phase)
                 : "memory");
}
__device__ __forceinline__ void bar_arrive(u32 bar) {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
}
// the next arrival on `bar` also waits for `bytes` more bytes of copies to land
__device__ __forceinline__ void bar_arrive_expect(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// a barrier of one consumer warpgroup (ids 1 to C: 0 is __syncthreads)
__device__ __forceinline__ void wg_sync(int consumer) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory"); }

// the box of `map` at (c0: the inner, contiguous dimension; c1: rows) into shared memory at
// dst, counted on mbarrier `bar`; and the other way, shared memory at src into the box
__device__ __forceinline__ void tma_load(u32 dst, const MmcTensorMap *map, u32 bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
                 "l"(map), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_store(const MmcTensorMap *map, u32 src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map), "r"(src), "r"(c0),
                 "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// this thread's stores have read their shared memory (it may be written again)
__device__ __forceinline__ void tma_store_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void tma_store_done() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// the first column of slab j of column block n, in B and in the product (the layouts above)
template <int NS, int W, int PAIRED> __device__ __forceinline__ int slab_col(int n, int j) {
    return PAIRED ? j * W + n * 64 : (n * NS + j) * 64;
}
// byte address of 16-byte chunk `chunk` (8 columns; slab chunk / 8) of row r of a rounded tile
__device__ __forceinline__ u32 out_at(u32 tile, int r, int chunk) {
    return tile + (chunk / 8) * OUT_SLAB + r * 128 + (((chunk % 8) ^ (r % 8)) << 4);
}

// The product, tile by tile: tile i is rows [128 (i / N_TILES), + 128) and column block
// i % N_TILES; map_a is A's tensor map (boxes of 128 rows x 64), map_b B's (64 x 64), and
// where the product is kept (KEEP), map_p the product's (128 x 64): the rounded tile goes out
// from shared memory by the Tensor Memory Accelerator while the epilogue reads it. The
// epilogue walks the elements of its own space, rows of W: it gets the product rounded to E
// a unit of 8 columns at a time, at flat index i0 of that space. Unpaired, a unit is 8 columns of one slab, v[0], the slabs side by side
// (slab s of column block n at column 64 (NS n + s)); paired (NS = 2), 8 columns of slab 0
// and the same 8 of slab 1, v[0] and v[1], at column 64 n. epi.load(i0, r) reads what the
// fused ops need into its Regs, epi.store(i0, r, v) computes and stores; EPI_BATCH units'
// loads are issued before their stores.
template <typename E, int M, int K, int N_TILES, int NS, int B_MN, int W, int PAIRED, int KEEP, int C, class Epi>
__device__ __forceinline__ void gemm(const MmcTensorMap *map_a, const MmcTensorMap *map_b, const MmcTensorMap *map_p,
                                     const Epi &epi) {
    static_assert(K % BK == 0, "K in steps of 64");
    static_assert((C == 2 || C == 3) && (!PAIRED || NS == 2), "two or three consumers; a pair is two slabs");
    static_assert(128 * (producer_regs<C>() + C * consumer_regs<C>()) <= 65536, "the register file");
    constexpr int KT = K / BK, TILES = (M + BM - 1) / BM * N_TILES;
    constexpr u32 STAGE = (2 + NS) * SLAB;
    constexpr int EPI_BATCH = 4;
    extern __shared__ __align__(16) unsigned char gemm_smem[];
    unsigned char *sm = flash_sm90::smem_base(gemm_smem, smem_bytes<NS, C>());
    const u32 base = flash::smem_addr(sm);
    const u32 full = base + ring_bytes<NS>() + C * out_bytes<NS>(), empty = full + 8 * STAGES;
    const u32 turn = empty + 8 * STAGES;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            bar_init(full + 8 * s, 1);  // the producing thread, and then the bytes
            bar_init(empty + 8 * s, 4); // the reading warpgroup's warps
        }
        for (int c = 0; c < C; c++) bar_init(turn + 8 * c, 4); // the previous one's warps
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp >= 4 * C) { // the producer's warpgroup: one thread issues every copy
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(producer_regs<C>()));
        if (threadIdx.x != 128 * C) return;
        int it = 0;
        for (int tile = blockIdx.x; tile < TILES; tile += gridDim.x) {
            const int m0 = tile / N_TILES * BM, n = tile % N_TILES;
            for (int kt = 0; kt < KT; kt++, it++) {
                const int s = it % STAGES;
                bar_wait(empty + 8 * s, ((it / STAGES) & 1) ^ 1);
                const u32 st = base + s * STAGE, bar = full + 8 * s;
                bar_arrive_expect(bar, STAGE);
                tma_load(st, map_a, bar, kt * BK, m0); // rows m0 .. m0 + 127: A's two slabs
#pragma unroll
                for (int j = 0; j < NS; j++) {
                    const int col = slab_col<NS, W, PAIRED>(n, j);
                    if (B_MN) tma_load(st + (2 + j) * SLAB, map_b, bar, col, kt * BK);
                    else tma_load(st + (2 + j) * SLAB, map_b, bar, kt * BK, col);
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(consumer_regs<C>()));
    const int consumer = warp >> 2, w = warp & 3, g = lane >> 2, t = lane & 3;
    const u32 cs = base + ring_bytes<NS>() + consumer * out_bytes<NS>();
    const bool issuer = (threadIdx.x & 127) == 0; // of the product's stores
    for (int j = consumer, tile = blockIdx.x + consumer * gridDim.x; tile < TILES; j += C, tile += C * gridDim.x) {
        const int m0 = tile / N_TILES * BM, n = tile % N_TILES;
        if (j > 0) bar_wait(turn + 8 * consumer, ((j - 1) / C) & 1); // the tile before is in
        float d[2][32 * NS]; // rows 0-63 and 64-127 of the tile (the first product sets them)
#pragma unroll
        for (int i = 0; i < 32 * NS; i++) d[0][i] = d[1][i] = 0.0f;
        for (int kt = 0; kt < KT; kt++) {
            const int it = j * KT + kt, s = it % STAGES;
            bar_wait(full + 8 * s, (it / STAGES) & 1);
            if (kt == KT - 1 && lane == 0) bar_arrive(turn + 8 * ((consumer + 1) % C)); // the next tile's turn
            const u32 st = base + s * STAGE;
            flash_sm90::fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                // K-major B: the NS slabs are 64 NS rows, 8-row atoms 1024 bytes apart;
                // MN-major: a slab is one atom wide (8192 bytes to the next), and k moves on 16
                // rows (2048 bytes) a step
                const u64 db = B_MN ? flash_sm90::desc(st + 2 * SLAB + kk * 2048, SLAB, 1024)
                                    : flash_sm90::desc_k(st + 2 * SLAB + kk * 32);
#pragma unroll
                for (int h = 0; h < 2; h++)
                    Mma<E, NS, B_MN>::run(d[h], flash_sm90::desc_k(st + h * SLAB + kk * 32), db, kt > 0 || kk > 0);
            }
            flash_sm90::commit();
            // the previous stage's products are done: hand it back
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            if (kt > 0 && lane == 0) bar_arrive(empty + 8 * ((it - 1) % STAGES));
        }
        flash_sm90::wait_all();
        if (lane == 0) bar_arrive(empty + 8 * ((j * KT + KT - 1) % STAGES));

        // the product rounded to E into this consumer's tile (out_at: a warp's 8 rows hit 8
        // different chunks)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = h * 64 + w * 16 + g;
#pragma unroll
            for (int q = 0; q < 8 * NS; q++) {
                const u32 at = out_at(cs, r, q) + 4 * t;
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(flash::pack<E>(d[h][4 * q], d[h][4 * q + 1])));
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at + 8 * 128), "r"(flash::pack<E>(d[h][4 * q + 2], d[h][4 * q + 3])));
            }
        }
        if (KEEP) flash_sm90::fence_async_smem(); // written here, read by the tensor copies
        wg_sync(consumer);
        if (KEEP && issuer) { // the product's slabs (rows past M are not stored)
#pragma unroll
            for (int j = 0; j < NS; j++) tma_store(map_p, cs + j * OUT_SLAB, slab_col<NS, W, PAIRED>(n, j), m0);
            tma_store_commit();
        }
        // unit q of the tile: row q / (8 US), chunk q % (8 US) of the row's US units
        constexpr int US = PAIRED ? 1 : NS, UNITS = BM * 8 * US, UPER = PAIRED ? 2 : 1;
        // unit q: its row in the tile, its column there, its index in the epilogue's space
        auto row_of = [&](int q) { return q / (8 * US); };
        auto col_of = [&](int q) { return q % (8 * US) * 8; };
        auto index_of = [&](int q) { return (long)(m0 + row_of(q)) * W + slab_col<NS, W, PAIRED>(n, 0) + col_of(q); };
#pragma unroll 1
        for (int q0 = threadIdx.x & 127; q0 < UNITS; q0 += 128 * EPI_BATCH) {
            typename Epi::Regs regs[EPI_BATCH];
#pragma unroll
            for (int b = 0; b < EPI_BATCH; b++) {
                const int q = q0 + 128 * b;
                if (q < UNITS && m0 + row_of(q) < M) epi.load(index_of(q), regs[b]);
            }
#pragma unroll
            for (int b = 0; b < EPI_BATCH; b++) {
                const int q = q0 + 128 * b, r = row_of(q);
                if (q >= UNITS || m0 + r >= M) continue;
                float v[UPER][8];
#pragma unroll
                for (int s = 0; s < UPER; s++) {
                    uint4 raw;
                    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
                                 : "r"(out_at(cs, r, (col_of(q) + s * 64) / 8)));
                    const u32 w4[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        const float2 f = flash::unpack<E>(w4[k]);
                        v[s][2 * k] = f.x;
                        v[s][2 * k + 1] = f.y;
                    }
                }
                epi.store(index_of(q), regs[b], v);
            }
        }
        if (KEEP && issuer) tma_store_read();
        wg_sync(consumer); // the tile is read: the next one may be written
    }
    if (KEEP && issuer) tma_store_done();
}

} // namespace gemm_sm90
#endif

// The same epilogue where there is no sm_90a kernel: cuBLASLt wrote the product (rows ldp
// apart) and this pass reads it back, a unit a thread (as gemm_sm90::gemm's epilogue).
namespace gemm_epilogue {
template <typename E, int M, int W, int PAIRED, class Epi>
__device__ __forceinline__ void from_memory(const E *prod, long ldp, const Epi &epi) {
    constexpr long UNITS = (long)M * (W / 8);
    for (long q = (long)blockIdx.x * blockDim.x + threadIdx.x; q < UNITS; q += (long)gridDim.x * blockDim.x) {
        const long row = q / (W / 8), col = q % (W / 8) * 8, i0 = row * W + col;
        typename Epi::Regs regs;
        epi.load(i0, regs);
        float v[PAIRED ? 2 : 1][8];
        ldv(prod, row * ldp + col, v[0]);
        if (PAIRED) ldv(prod, row * ldp + W + col, v[PAIRED]);
        epi.store(i0, regs, v);
    }
}
} // namespace gemm_epilogue
