// ---- flash attention on Hopper's warpgroup tensor cores (wgmma, sm_90a), heads of 64.
// Included after flash_attention.cuh, whose kernels these replace where they are compiled
// for sm_90a; they share its helpers and give the same bits: the same tiles of the same
// products in the same order, P and dS rounded where it rounds them, the same softmax code.
//
// What changes is who feeds the tensor cores. A block is still 4 warps, but they act as one
// warpgroup: each product is one wgmma over the block's 64 rows, its B operand (and its A
// operand where that is a tile) read by the tensor cores straight from shared memory through
// a descriptor, where mma.sync had every warp load its own copy of B through ldmatrix. A is
// in registers where it is computed (P and dS), in the fragment layout of mma.sync's A, so
// c_to_a still builds it.
//
// Tiles of 64 columns (a head) are 128-byte rows, stored with the 128-byte swizzle (16-byte
// chunk c of row r at chunk c ^ (r % 8)) that the descriptors name: conflict-free for the
// cp.async that fills them and for the tensor cores. The same bytes serve as a K-major
// operand (k^T in q k^T: the head's 64 values are the k index) and as an MN-major one (v in
// p v: the rows are the k index); an MN-major operand of 64 columns is one swizzle atom wide,
// so its descriptor's two strides are both the 1024 bytes between 8-row atoms.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
namespace flash_sm90 {

using flash::u32;
typedef unsigned long long u64; // a descriptor (NVRTC has no <stdint.h>)

constexpr int ALIGN = 1024; // a swizzle atom: tiles start at multiples of it

// a shared-memory matrix descriptor: start, leading and stride byte offsets, 128B swizzle
__device__ __forceinline__ u64 desc(u32 addr, u32 lbo, u32 sbo) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | ((u64)1 << 62);
}
// K-major: 8-row atoms 1024 bytes apart (the leading offset is unused with a swizzle)
__device__ __forceinline__ u64 desc_k(u32 addr) { return desc(addr, 16, 1024); }
// MN-major, 64 columns: one atom wide, atoms 1024 bytes apart along k
__device__ __forceinline__ u64 desc_mn(u32 addr) { return desc(addr, 1024, 1024); }

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// shared memory written by cp.async, read next by the tensor cores (the async proxy)
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

#define FLASH_SM90_ACC16(d)                                                                                          \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), \
        "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define FLASH_SM90_ACC32(d)                                                                                              \
    FLASH_SM90_ACC16(d), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),      \
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define FLASH_SM90_REGS16 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define FLASH_SM90_REGS32                                                                                            \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30," \
    "%31}"

// d (64 x N, f32) = A B (acc 0) or d += A B (acc 1); A and B from shared memory, K-major
template <typename E, int N> struct MmaSS;
// d (64 x 64, f32) += A B; A from registers, B from shared memory, MN-major
template <typename E> struct MmaRS;

#define FLASH_SM90_MMA(E, TY)                                                                                         \
    template <> struct MmaSS<E, 32> {                                                                                 \
        static __device__ __forceinline__ void run(float (&d)[16], u64 a, u64 b, int acc) {                 \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                                 \
                         "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " " FLASH_SM90_REGS16                \
                         ", %16, %17, p, 1, 1, 0, 0;\n}\n"                                                            \
                         : FLASH_SM90_ACC16(d)                                                                        \
                         : "l"(a), "l"(b), "r"(acc));                                                                 \
        }                                                                                                             \
    };                                                                                                                \
    template <> struct MmaSS<E, 64> {                                                                                 \
        static __device__ __forceinline__ void run(float (&d)[32], u64 a, u64 b, int acc) {                 \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                 \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " FLASH_SM90_REGS32                \
                         ", %32, %33, p, 1, 1, 0, 0;\n}\n"                                                            \
                         : FLASH_SM90_ACC32(d)                                                                        \
                         : "l"(a), "l"(b), "r"(acc));                                                                 \
        }                                                                                                             \
    };                                                                                                                \
    template <> struct MmaRS<E> {                                                                                     \
        static __device__ __forceinline__ void run(float (&d)[32], const u32 (&a)[4], u64 b) {                   \
            asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " FLASH_SM90_REGS32                \
                         ", {%32,%33,%34,%35}, %36, 1, 1, 1, 1;\n"                                                    \
                         : FLASH_SM90_ACC32(d)                                                                        \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                                       \
        }                                                                                                             \
    };
FLASH_SM90_MMA(__half, "f16")
FLASH_SM90_MMA(__nv_bfloat16, "bf16")

// the base of the kernel's shared memory rounded up to a swizzle atom; traps when the launch
// gave less than `need` bytes from there (the launch step sizes it for the mma.sync kernels,
// whose tiles are larger)
__device__ __forceinline__ unsigned char *smem_base(unsigned char *dynamic, u32 need) {
    const u32 at = flash::smem_addr(dynamic), pad = (ALIGN - at % ALIGN) % ALIGN;
    u32 size;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(size));
    if (pad + need > size) __trap();
    return dynamic + pad;
}

// R rows [row0, row0 + R) of a [T, stride] tensor, a head (64 elements) each, into a swizzled
// tile; rows past T are zeros
template <typename E, int T, int R>
__device__ __forceinline__ void load_tile(E *tile, const E *src, int row0, long stride) {
    static_assert(R % 16 == 0, "16 rows a pass of 128 threads");
    const int r0 = threadIdx.x >> 3, c = threadIdx.x & 7;
#pragma unroll
    for (int i = 0; i < R / 16; i++) {
        const int r = r0 + 16 * i;
        const bool ok = row0 + r < T;
        flash::copy16(tile, (u32)(r * 128 + ((c ^ (r & 7)) << 4)), ok ? src + (long)(row0 + r) * stride + c * 8 : src, ok);
    }
}

// the A fragments of P (or dS) for the 16-deep product over columns [16 j, 16 j + 16) of a
// 64 x N accumulator: the C fragments of its 8-column tiles 2 j and 2 j + 1
template <typename E, int NA> __device__ __forceinline__ void to_a(u32 (&a)[4], const float (&c)[NA], int j) {
    const float c0[4] = {c[8 * j], c[8 * j + 1], c[8 * j + 2], c[8 * j + 3]};
    const float c1[4] = {c[8 * j + 4], c[8 * j + 5], c[8 * j + 6], c[8 * j + 7]};
    flash::c_to_a<E>(a, c0, c1);
}

// ---- forward: as flash::forward with MT = 1 and BC = 64. Shared memory (from a 1024-byte
// boundary): q [64][64], k [2][64][64], v [2][64][64]; 40 KB.
constexpr u32 FORWARD_SMEM = 5 * 8192;
template <typename E, int T, int H, int KV, int CAUSAL, long VS>
__device__ __forceinline__ void forward(const E *q, const E *k, const E *v, E *o, float *lse, float scale) {
    constexpr int HD = 64, BR = 64, BC = 64, NQB = (T + BR - 1) / BR, NKB = (T + BC - 1) / BC;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    unsigned char *sm = smem_base(flash_smem, FORWARD_SMEM);
    E *qs = (E *)sm, *ks = (E *)(sm + 8192), *vs = (E *)(sm + 3 * 8192);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int b = blockIdx.x / H, h = blockIdx.x % H, kvh = h / (H / KV);
    const int q0 = (NQB - 1 - (int)blockIdx.y) * BR; // the longest rows first under causal
    const long qstride = (long)H * HD, kstride = (long)KV * HD;
    const E *qg = q + (long)b * T * qstride + (long)h * HD;
    const E *kg = k + (long)b * T * kstride + (long)kvh * HD, *vg = v + (long)b * T * VS + (long)kvh * HD;
    const int last_row = (q0 + BR < T ? q0 + BR : T) - 1;
    const int nkb = CAUSAL ? last_row / BC + 1 : NKB;
    const float sl2 = scale * 1.4426950408889634f; // scores to base 2
    const u32 qa = flash::smem_addr(qs), ka = flash::smem_addr(ks), va = flash::smem_addr(vs);

    load_tile<E, T, BR>(qs, qg, q0, qstride);
    load_tile<E, T, BC>(ks, kg, 0, kstride);
    load_tile<E, T, BC>(vs, vg, 0, VS);
    flash::copy_commit();

    float acc[32], m[2], l[2];
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; i++) acc[i] = 0.0f;
    for (int kb = 0; kb < nkb; kb++) {
        if (kb + 1 < nkb) {
            load_tile<E, T, BC>(ks + ((kb + 1) & 1) * BC * HD, kg, (kb + 1) * BC, kstride);
            load_tile<E, T, BC>(vs + ((kb + 1) & 1) * BC * HD, vg, (kb + 1) * BC, VS);
        }
        flash::copy_commit();
        flash::copy_wait<1>();
        fence_async_smem();
        __syncthreads();
        const u32 kt = ka + (kb & 1) * BC * 128, vt = va + (kb & 1) * BC * 128;
        float s[32];
        fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) MmaSS<E, 64>::run(s, desc_k(qa + kk * 32), desc_k(kt + kk * 32), kk);
        commit();
        wait_all();
        // s[4 n + e] is flash::forward's s[0][n][e]: row g + 8 (e / 2) of this warp's 16
        const bool edge = (T % BC != 0 && kb == NKB - 1) || (CAUSAL && kb * BC + BC - 1 > q0);
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int row = q0 + warp * 16 + g + 8 * hr;
            if (edge) {
#pragma unroll
                for (int n = 0; n < BC / 8; n++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        const int key = kb * BC + n * 8 + 2 * t + c;
                        if (key >= T || (CAUSAL && key > row)) s[4 * n + 2 * hr + c] = -INFINITY;
                    }
            }
            float mx = -INFINITY;
#pragma unroll
            for (int n = 0; n < BC / 8; n++) mx = fmaxf(mx, fmaxf(s[4 * n + 2 * hr], s[4 * n + 2 * hr + 1]));
            const float mnew = fmaxf(m[hr], flash::quad_max(mx) * sl2);
            const float base = mnew == -INFINITY ? 0.0f : mnew;
            const float corr = flash::exp2_ftz(m[hr] - base);
            float sum = 0.0f;
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const float p = flash::exp2_ftz(fmaf(s[4 * n + 2 * hr + c], sl2, -base));
                    s[4 * n + 2 * hr + c] = p;
                    sum += p;
                }
            l[hr] = l[hr] * corr + sum;
            m[hr] = mnew;
#pragma unroll
            for (int n = 0; n < HD / 8; n++) acc[4 * n + 2 * hr] *= corr, acc[4 * n + 2 * hr + 1] *= corr;
        }
        u32 a[BC / 16][4];
#pragma unroll
        for (int j = 0; j < BC / 16; j++) to_a<E>(a[j], s, j);
        fence();
#pragma unroll
        for (int j = 0; j < BC / 16; j++) MmaRS<E>::run(acc, a[j], desc_mn(vt + j * 2048));
        commit();
        wait_all();
        __syncthreads();
    }
    float out[1][HD / 8][4];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        const float total = flash::quad_sum(l[hr]);
        const float inv = 1.0f / total;
#pragma unroll
        for (int n = 0; n < HD / 8; n++)
            out[0][n][2 * hr] = acc[4 * n + 2 * hr] * inv, out[0][n][2 * hr + 1] = acc[4 * n + 2 * hr + 1] * inv;
        const int row = q0 + warp * 16 + g + 8 * hr;
        if (lse && t == 0 && row < T) lse[((long)b * H + h) * T + row] = (m[hr] + log2f(total)) * 0.6931471805599453f;
    }
    // the k tiles (16 KB) stage the output with the mma.sync kernels' pitch (64 rows of 72)
    flash::store_rows<E, 1, HD, HD + 8>(ks, out, 1.0f, o + (long)b * T * qstride + (long)h * HD, q0, T, qstride);
}

// ---- backward, kernel 1 of 2: as flash::backward_dq, with key tiles of 64 (BC). The 16-key
// steps of dq += ds k come in the same order as with the mma.sync kernel's 32, so the sums
// are the same; a tile of 64 makes each of s = q k^T and dp = dO v^T one 64-wide wgmma
// (two 32-wide ones read q and dO from shared memory twice) and halves the block's barriers
// (H200, ncu, MiniMind b64: 0.107 -> 0.102 ms a layer). Shared memory: q and dO [64][64]
// each, k and v [2][64][64] each, dsum [64]; 48.25 KB.
constexpr u32 DQ_SMEM = 6 * 8192 + 256;
template <typename E, int T, int H, int KV, int CAUSAL, long VS, long DQS, typename Out>
__device__ __forceinline__ void backward_dq(const E *dout, const E *q, const E *k, const E *v, const E *out,
                                            const float *lse, E *dq, float *dsum, float scale, const Out &writer) {
    constexpr int HD = 64, BR = 64, BC = 64, NQB = (T + BR - 1) / BR, NKB = (T + BC - 1) / BC;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    unsigned char *sm = smem_base(flash_smem, DQ_SMEM);
    E *qs = (E *)sm, *dos = (E *)(sm + 8192), *ks = (E *)(sm + 2 * 8192), *vs = (E *)(sm + 4 * 8192);
    float *dsm = (float *)(sm + 6 * 8192);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int b = blockIdx.x / H, h = blockIdx.x % H, kvh = h / (H / KV);
    const int q0 = (NQB - 1 - (int)blockIdx.y) * BR;
    const long qstride = (long)H * HD, kstride = (long)KV * HD;
    const long qoff = (long)b * T * qstride + (long)h * HD, stats = ((long)b * H + h) * T;
    const E *kg = k + (long)b * T * kstride + (long)kvh * HD, *vg = v + (long)b * T * VS + (long)kvh * HD;
    const int last_row = (q0 + BR < T ? q0 + BR : T) - 1;
    const int nkb = CAUSAL ? last_row / BC + 1 : NKB;
    const float sl2 = scale * 1.4426950408889634f;
    const u32 qa = flash::smem_addr(qs), da = flash::smem_addr(dos), ka = flash::smem_addr(ks), va = flash::smem_addr(vs);

    load_tile<E, T, BR>(qs, q + qoff, q0, qstride);
    load_tile<E, T, BR>(dos, dout + qoff, q0, qstride);
    load_tile<E, T, BC>(ks, kg, 0, kstride);
    load_tile<E, T, BC>(vs, vg, 0, VS);
    flash::copy_commit();
    flash::row_dsum<E, HD>(out, dout, qoff, qstride, q0, T, dsm, dsum + stats);
    float acc[32], lse2[2], dsr[2];
#pragma unroll
    for (int i = 0; i < 32; i++) acc[i] = 0.0f;
    for (int kb = 0; kb < nkb; kb++) {
        if (kb + 1 < nkb) {
            load_tile<E, T, BC>(ks + ((kb + 1) & 1) * BC * HD, kg, (kb + 1) * BC, kstride);
            load_tile<E, T, BC>(vs + ((kb + 1) & 1) * BC * HD, vg, (kb + 1) * BC, VS);
        }
        flash::copy_commit();
        flash::copy_wait<1>();
        fence_async_smem();
        __syncthreads();
        if (kb == 0) {
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int row = q0 + warp * 16 + g + 8 * hr;
                lse2[hr] = row < T ? lse[stats + row] * 1.4426950408889634f : 0.0f;
                dsr[hr] = dsm[warp * 16 + g + 8 * hr];
            }
        }
        const u32 kt = ka + (kb & 1) * BC * 128, vt = va + (kb & 1) * BC * 128;
        float s[32], dp[32];
        fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) MmaSS<E, 64>::run(s, desc_k(qa + kk * 32), desc_k(kt + kk * 32), kk);
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) MmaSS<E, 64>::run(dp, desc_k(da + kk * 32), desc_k(vt + kk * 32), kk);
        commit();
        wait_all();
        // s[4 n + e]: row g + 8 (e / 2) of this warp's 16, key 8 n + 2 t + e % 2 of the tile
        const bool edge = (T % BC != 0 && kb == NKB - 1) || (CAUSAL && kb * BC + BC - 1 > q0);
#pragma unroll
        for (int i = 0; i < 32; i++) s[i] = flash::exp2_ftz(fmaf(s[i], sl2, -lse2[(i >> 1) & 1])); // p
        if (edge) {
#pragma unroll
            for (int i = 0; i < 32; i++) {
                const int row = q0 + warp * 16 + g + 8 * ((i >> 1) & 1), key = kb * BC + (i >> 2) * 8 + 2 * t + (i & 1);
                if (key >= T || (CAUSAL && key > row)) s[i] = 0.0f;
            }
        }
#pragma unroll
        for (int i = 0; i < 32; i++) s[i] *= dp[i] - dsr[(i >> 1) & 1]; // ds
        u32 a[BC / 16][4];
#pragma unroll
        for (int j = 0; j < BC / 16; j++) to_a<E>(a[j], s, j);
        fence();
#pragma unroll
        for (int j = 0; j < BC / 16; j++) MmaRS<E>::run(acc, a[j], desc_mn(kt + j * 2048));
        commit();
        wait_all();
        __syncthreads();
    }
    float res[1][HD / 8][4];
#pragma unroll
    for (int i = 0; i < 32; i++) res[0][i >> 2][i & 3] = acc[i];
    flash::store_rows<E, 1, HD, HD + 8>(qs, res, scale, dq + (long)b * T * DQS + (long)h * HD, q0, T, DQS, writer); // q and dO stage it
}

// ---- backward, kernel 2 of 2: as flash::backward_dkv with BQ = 64. Shared memory: q and dO
// [2][64][64] each, the stats [2][2][64], k and v [64][64] each, and with ROUND_HEADS each
// thread's rounded dk shares [32][128] (its dv shares stay in registers); 64 or 48 KB.
template <int ROUND_HEADS> struct DkvSmem { static constexpr u32 bytes = 4 * 8192 + 1024 + 2 * 8192 + (ROUND_HEADS ? 32 * 128 * 4 : 0); };
template <typename E, int T, int H, int KV, int CAUSAL, int ROUND_HEADS, long VS, long DVS, long DKS, typename Out>
__device__ __forceinline__ void backward_dkv(const E *dout, const E *q, const E *k, const E *v, const float *lse,
                                             const float *dsum, E *dk, E *dv, float scale, const Out &writer) {
    constexpr int HD = 64, BQ = 64, BK = 64, NQB = (T + BQ - 1) / BQ, REP = H / KV;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    unsigned char *sm = smem_base(flash_smem, DkvSmem<ROUND_HEADS>::bytes);
    E *qs = (E *)sm, *dos = (E *)(sm + 2 * 8192);
    float *ls = (float *)(sm + 4 * 8192), *dss = ls + 2 * BQ;
    E *ks = (E *)(sm + 4 * 8192 + 1024), *vs = (E *)(sm + 5 * 8192 + 1024);
    float *sums = (float *)(sm + 6 * 8192 + 1024);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int b = blockIdx.x / KV, kvh = blockIdx.x % KV;
    const int k0 = blockIdx.y * BK; // the keys seen by the most queries first under causal
    const long qstride = (long)H * HD, kstride = (long)KV * HD;
    const long koff = (long)b * T * kstride + (long)kvh * HD;
    const int first_qb = CAUSAL ? k0 / BQ : 0, per_head = NQB - first_qb, steps = REP * per_head;
    const int warp_first = k0 + warp * 16;
    const float sl2 = scale * 1.4426950408889634f;
    const u32 qa = flash::smem_addr(qs), da = flash::smem_addr(dos), ka = flash::smem_addr(ks), va = flash::smem_addr(vs);

    load_tile<E, T, BK>(ks, k + koff, k0, kstride);
    load_tile<E, T, BK>(vs, v + (long)b * T * VS + (long)kvh * HD, k0, VS);
    // the tile of step i: query head kvh * REP + i / per_head, query block first_qb + i % per_head
    auto issue = [&](int i) {
        const int hq = kvh * REP + i / per_head, qb0 = (first_qb + i % per_head) * BQ, buf = i & 1;
        const long qoff = (long)b * T * qstride + (long)hq * HD, stats = ((long)b * H + hq) * T;
        load_tile<E, T, BQ>(qs + buf * BQ * HD, q + qoff, qb0, qstride);
        load_tile<E, T, BQ>(dos + buf * BQ * HD, dout + qoff, qb0, qstride);
        flash::load_stats<BQ, flash::THREADS>(ls + buf * BQ, lse + stats, qb0, T);
        flash::load_stats<BQ, flash::THREADS>(dss + buf * BQ, dsum + stats, qb0, T);
    };
    issue(0);
    flash::copy_commit();

    float dka[32], dva[32], dv_shares[ROUND_HEADS ? 32 : 1];
#pragma unroll
    for (int i = 0; i < 32; i++) dka[i] = dva[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < (ROUND_HEADS ? 32 : 1); i++) dv_shares[i] = 0.0f;
    for (int i = 0; i < steps; i++) {
        if (ROUND_HEADS && i && i % per_head == 0) { // a new query head: keep the last one's share, rounded
#pragma unroll
            for (int j = 0; j < 32; j++) {
                float *sk = sums + j * flash::THREADS + threadIdx.x;
                *sk = (i > per_head ? *sk : 0.0f) + flash::round_to<E>(dka[j] * scale);
                dv_shares[ROUND_HEADS ? j : 0] += flash::round_to<E>(dva[j]);
                dka[j] = dva[j] = 0.0f;
            }
        }
        if (i + 1 < steps) issue(i + 1);
        flash::copy_commit();
        flash::copy_wait<1>();
        fence_async_smem();
        __syncthreads();
        const int qb0 = (first_qb + i % per_head) * BQ, buf = i & 1;
        const u32 qt = qa + buf * 8192, dt = da + buf * 8192;
        const float *lt = ls + buf * BQ, *dst = dss + buf * BQ;
        // s^T = k q^T and dp^T = v dO^T: s[4 n + e] is key g + 8 (e / 2) of this warp's 16,
        // query 8 n + 2 t + e % 2 of the tile
        float s[32], dp[32];
        fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) MmaSS<E, 64>::run(s, desc_k(ka + kk * 32), desc_k(qt + kk * 32), kk);
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) MmaSS<E, 64>::run(dp, desc_k(va + kk * 32), desc_k(dt + kk * 32), kk);
        commit();
        wait_all();
        const bool edge = (T % BQ != 0 && qb0 + BQ > T) || (CAUSAL && qb0 < warp_first + 15);
#pragma unroll
        for (int n = 0; n < BQ / 8; n++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const float l2 = lt[n * 8 + 2 * t + c] * 1.4426950408889634f;
#pragma unroll
                for (int hr = 0; hr < 2; hr++) s[4 * n + 2 * hr + c] = flash::exp2_ftz(fmaf(s[4 * n + 2 * hr + c], sl2, -l2)); // p^T
            }
        if (edge) {
#pragma unroll
            for (int j = 0; j < 32; j++) {
                const int key = warp_first + g + 8 * ((j >> 1) & 1), query = qb0 + (j >> 2) * 8 + 2 * t + (j & 1);
                if (query >= T || (CAUSAL && key > query)) s[j] = 0.0f;
            }
        }
#pragma unroll
        for (int n = 0; n < BQ / 8; n++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const float d = dst[n * 8 + 2 * t + c];
#pragma unroll
                for (int hr = 0; hr < 2; hr++) dp[4 * n + 2 * hr + c] = s[4 * n + 2 * hr + c] * (dp[4 * n + 2 * hr + c] - d); // ds^T
            }
        u32 ap[BQ / 16][4], ad[BQ / 16][4];
#pragma unroll
        for (int j = 0; j < BQ / 16; j++) to_a<E>(ap[j], s, j), to_a<E>(ad[j], dp, j);
        fence();
#pragma unroll
        for (int j = 0; j < BQ / 16; j++) {
            MmaRS<E>::run(dva, ap[j], desc_mn(dt + j * 2048)); // dv += p^T dO
            MmaRS<E>::run(dka, ad[j], desc_mn(qt + j * 2048)); // dk += ds^T q
        }
        commit();
        wait_all();
        __syncthreads();
    }
    float rk[1][HD / 8][4], rv[1][HD / 8][4];
    float kscale = scale;
#pragma unroll
    for (int j = 0; j < 32; j++) rk[0][j >> 2][j & 3] = dka[j], rv[0][j >> 2][j & 3] = dva[j];
    if (ROUND_HEADS) { // the last head's share, then the sum of the rounded shares
        kscale = 1.0f;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            rk[0][j >> 2][j & 3] = (REP > 1 ? sums[j * flash::THREADS + threadIdx.x] : 0.0f) + flash::round_to<E>(dka[j] * scale);
            rv[0][j >> 2][j & 3] = dv_shares[ROUND_HEADS ? j : 0] + flash::round_to<E>(dva[j]);
        }
    }
    // the q tiles (16 KB) stage dk, the dO tiles dv
    flash::store_rows<E, 1, HD, HD + 8>(qs, rk, kscale, dk + (long)b * T * DKS + (long)kvh * HD, k0, T, DKS, writer);
    flash::store_rows<E, 1, HD, HD + 8>(dos, rv, 1.0f, dv + (long)b * T * DVS + (long)kvh * HD, k0, T, DVS);
}

} // namespace flash_sm90
#endif

// ---- the kernels' entry points: the wgmma kernels where they apply, else flash_attention.cuh's
namespace flash {
// the blocks an SM the dk/dv kernel is compiled for: the wgmma kernel fits 3 in 168
// registers without spilling (the tile loop waits on its products, and a third block hides
// more of that), where the mma.sync one takes 218 and runs 2
constexpr int dkv_min_blocks(int hd) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    return hd == 64 ? 3 : 1;
#else
    return 1;
#endif
}
template <typename E, int T, int H, int KV, int HD, int CAUSAL, int MT, int BC, long VS>
__device__ __forceinline__ void attention_forward(const E *q, const E *k, const E *v, E *o, float *lse, float scale) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (HD == 64) {
        flash_sm90::forward<E, T, H, KV, CAUSAL, VS>(q, k, v, o, lse, scale);
        return;
    }
#endif
    forward<E, T, H, KV, HD, CAUSAL, MT, BC, VS>(q, k, v, o, lse, scale);
}
// DQS and DKS: the elements from one row of dq (dk) to the next; `writer` gives its rows (Plain,
// or a rope_backward applied on the way out)
template <typename E, int T, int H, int KV, int HD, int CAUSAL, int BC, long VS, long DQS, typename Out>
__device__ __forceinline__ void attention_backward_dq(const E *dout, const E *q, const E *k, const E *v, const E *out,
                                                      const float *lse, E *dq, float *dsum, float scale, const Out &writer) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (HD == 64) {
        flash_sm90::backward_dq<E, T, H, KV, CAUSAL, VS, DQS>(dout, q, k, v, out, lse, dq, dsum, scale, writer);
        return;
    }
#endif
    backward_dq<E, T, H, KV, HD, CAUSAL, BC, VS, DQS>(dout, q, k, v, out, lse, dq, dsum, scale, writer);
}
template <typename E, int T, int H, int KV, int HD, int CAUSAL, int BQ, int ROUND_HEADS, long VS, long DVS, long DKS,
          typename Out>
__device__ __forceinline__ void attention_backward_dkv(const E *dout, const E *q, const E *k, const E *v, const float *lse,
                                                       const float *dsum, E *dk, E *dv, float scale, const Out &writer) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (HD == 64) {
        flash_sm90::backward_dkv<E, T, H, KV, CAUSAL, ROUND_HEADS, VS, DVS, DKS>(dout, q, k, v, lse, dsum, dk, dv, scale, writer);
        return;
    }
#endif
    backward_dkv<E, T, H, KV, HD, CAUSAL, BQ, ROUND_HEADS, VS, DVS, DKS>(dout, q, k, v, lse, dsum, dk, dv, scale, writer);
}
} // namespace flash
