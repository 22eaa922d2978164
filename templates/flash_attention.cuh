// ---- flash attention: softmax(q k^T * scale) v and its gradient, tiled on tensor cores.
// Included in kernels.cu once when a plan has an attention kernel in f16 or bf16; the
// kernels that call it (attention_flash.cu, attention_backward_*_flash.cu) pass every size
// as a template argument, so each instantiation is straight-line code for its shapes.
//
// Layouts: q, o, dq [B, T, H*HD]; k, v, dk, dv [B, T, KV*HD]; lse, dsum [B, H, T] in f32.
// Query head h reads kv head h / (H / KV) in place (grouped-query attention, no copies).
// A warp owns 16 rows of a tile and computes with mma.sync m16n8k16 (f16 or bf16 in, f32
// accumulate); on sm_75 f16 runs as two m16n8k8 and bf16, which Turing's tensor cores
// lack, as an exact emulation with warp shuffles. The scores S and probabilities P stay in
// registers in f32; P (and dS in the backward pass) is rounded to the input dtype right
// before it enters a product, as SDPA's fused kernels do. Rows of a tile past T are
// zero-filled and masked, so T need not be a multiple of any tile size.
//
// Fragment layout of m16n8k16 (lane = 4 g + t): A (16x16) a0 (row g, cols 2t, 2t+1),
// a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..); B (16x8, k x n) b0 (k 2t, 2t+1; n g),
// b1 (k 2t+8..; n g); C (16x8) c0 c1 (row g, cols 2t, 2t+1), c2 c3 (row g+8). So the C
// fragments of two neighbouring 8-column tiles of S are exactly the A fragment of P for a
// 16-deep product: P never leaves registers.
namespace flash {

// the threads of every block: 4 warps, for which the tiles below are laid out (the launch
// step's block size, which each kernel's template checks)
constexpr int THREADS = 128;

typedef unsigned int u32;

__device__ __forceinline__ u32 smem_addr(const void *p) { return (u32)__cvta_generic_to_shared(p); }

template <typename E> __device__ __forceinline__ u32 pack(float lo, float hi);
template <> __device__ __forceinline__ u32 pack<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(u32 *)&h;
}
template <> __device__ __forceinline__ u32 pack<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *(u32 *)&h;
}
template <typename E> __device__ __forceinline__ float2 unpack(u32 v);
template <> __device__ __forceinline__ float2 unpack<__half>(u32 v) { return __half22float2(*(__half2 *)&v); }
template <> __device__ __forceinline__ float2 unpack<__nv_bfloat16>(u32 v) {
    return __bfloat1622float2(*(__nv_bfloat162 *)&v);
}

// d += a b: one m16n8k16 product with f32 accumulators
template <typename E> __device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]);

template <> __device__ __forceinline__ void mma<__half>(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#endif
}

template <> __device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    // Turing has no bf16 tensor cores: the same product from the same fragments, the
    // operands gathered across the quad with shuffles, in f32 (exact products).
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int q = 0; q < 4; q++) {
        const int la = g * 4 + q, lb0 = (2 * t) * 4 + q, lb1 = (2 * t + 1) * 4 + q;
        const float2 ar0 = unpack<__nv_bfloat16>(__shfl_sync(0xffffffffu, a[0], la));  // row g, k 2q, 2q+1
        const float2 ar1 = unpack<__nv_bfloat16>(__shfl_sync(0xffffffffu, a[1], la));  // row g+8
        const float2 ar2 = unpack<__nv_bfloat16>(__shfl_sync(0xffffffffu, a[2], la));  // row g, k 2q+8, 2q+9
        const float2 ar3 = unpack<__nv_bfloat16>(__shfl_sync(0xffffffffu, a[3], la));  // row g+8
        const float2 b00 = unpack<__nv_bfloat16>(__shfl_sync(0xffffffffu, b[0], lb0)); // col 2t, k 2q, 2q+1
        const float2 b01 = unpack<__nv_bfloat16>(__shfl_sync(0xffffffffu, b[1], lb0)); // col 2t, k 2q+8, 2q+9
        const float2 b10 = unpack<__nv_bfloat16>(__shfl_sync(0xffffffffu, b[0], lb1)); // col 2t+1
        const float2 b11 = unpack<__nv_bfloat16>(__shfl_sync(0xffffffffu, b[1], lb1));
        d[0] += ar0.x * b00.x + ar0.y * b00.y + ar2.x * b01.x + ar2.y * b01.y;
        d[1] += ar0.x * b10.x + ar0.y * b10.y + ar2.x * b11.x + ar2.y * b11.y;
        d[2] += ar1.x * b00.x + ar1.y * b00.y + ar3.x * b01.x + ar3.y * b01.y;
        d[3] += ar1.x * b10.x + ar1.y * b10.y + ar3.x * b11.x + ar3.y * b11.y;
    }
#endif
}

// Shared-memory addresses are 32-bit offsets in the shared window: a tile's address is
// converted once, and every fragment address is that plus the lane's offset plus a constant
// the compiler folds into the instruction (64-bit generic pointer arithmetic per ldmatrix
// was a third of these kernels' instructions).

// four 8x8 matrices of 16-bit elements from shared memory; lane l gives the address of row
// l % 8 of matrix l / 8 and receives, per matrix, (row l / 4, cols 2 (l % 4), +1) — or,
// transposed, (rows 2 (l % 4), +1; col l / 4)
__device__ __forceinline__ void ldsm4(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm4_t(u32 (&r)[4], u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// 16 bytes global -> shared at byte `off` of `tile`, zeros when !valid (src must still be a
// valid address); asynchronous from sm_80, a plain copy through registers before
__device__ __forceinline__ void copy16(void *tile, u32 off, const void *src, bool valid) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(tile) + off), "l"(src), "r"(valid ? 16 : 0));
#else
    *(uint4 *)((char *)tile + off) = valid ? *(const uint4 *)src : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void copy4(void *tile, u32 off, const void *src, bool valid) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(tile) + off), "l"(src), "r"(valid ? 4 : 0));
#else
    *(float *)((char *)tile + off) = valid ? *(const float *)src : 0.0f;
#endif
}
__device__ __forceinline__ void copy_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// waits until at most N of the committed groups are still in flight
template <int N> __device__ __forceinline__ void copy_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Rows [row0, row0 + R) of a [T, stride] tensor (HD elements from `src`), into shared
// memory with a row pitch of P elements; rows at or past T become zeros. Where a block
// pass covers whole rows, each thread copies the same 16-byte column of every NT / CH-th
// row, so its addresses are one base and constant steps.
template <typename E, int R, int HD, int P, int NT>
__device__ __forceinline__ void load_rows(E *dst, const E *src, int row0, int T, long stride) {
    constexpr int CH = HD / 8; // 16-byte chunks per row
    if constexpr (NT % CH == 0) {
        constexpr int RSTEP = NT / CH; // rows a pass
        const int r0 = threadIdx.x / CH, k = threadIdx.x % CH;
        const E *from = src + (long)(row0 + r0) * stride + k * 8;
        const u32 off = (u32)((r0 * P + k * 8) * sizeof(E));
#pragma unroll
        for (int i = 0; i < (R + RSTEP - 1) / RSTEP; i++) {
            const int r = r0 + i * RSTEP;
            if (R % RSTEP == 0 || r < R) {
                const bool ok = row0 + r < T;
                copy16(dst, off + (u32)(i * RSTEP * P * sizeof(E)), ok ? from + (long)i * RSTEP * stride : src, ok);
            }
        }
    } else {
        for (int c = threadIdx.x; c < R * CH; c += NT) {
            const int r = c / CH, k = c % CH;
            const bool ok = row0 + r < T;
            copy16(dst, (u32)((r * P + k * 8) * sizeof(E)), src + (ok ? (long)(row0 + r) * stride : 0L) + k * 8, ok);
        }
    }
}

// R floats [row0, row0 + R) of a [T] row of f32 statistics; past T: zeros
template <int R, int NT> __device__ __forceinline__ void load_stats(float *dst, const float *src, int row0, int T) {
    for (int r = threadIdx.x; r < R; r += NT) copy4(dst, 4u * r, src + (row0 + r < T ? row0 + r : 0), row0 + r < T);
}

// A fragments of 16 rows x 16 columns at (row, col) of a shared tile with pitch P
template <int P> __device__ __forceinline__ void load_a(u32 (&a)[4], const void *tile, int row, int col) {
    const int lane = threadIdx.x & 31;
    ldsm4(a, smem_addr(tile) + 2u * (u32)((row + (lane & 15)) * P + col + (lane >> 4) * 8));
}

// B fragments for two n-tiles (n, n+8) and one 16-deep k step of a product with a tile whose
// rows are the n index and columns the k index (k^T in q k^T): b0 = {r0, r1}, b1 = {r2, r3}
template <int P> __device__ __forceinline__ void load_b_rows(u32 (&r)[4], const void *tile, int n, int k) {
    const int lane = threadIdx.x & 31;
    ldsm4(r, smem_addr(tile) + 2u * (u32)((n + (lane >> 4) * 8 + (lane & 7)) * P + k + ((lane >> 3) & 1) * 8));
}

// B fragments for one 16-deep k step and two n-tiles (n, n+8) of a product with a tile whose
// rows are the k index (v in p v): transposed loads
template <int P> __device__ __forceinline__ void load_b_cols(u32 (&r)[4], const void *tile, int k, int n) {
    const int lane = threadIdx.x & 31;
    ldsm4_t(r, smem_addr(tile) + 2u * (u32)((k + (lane & 15)) * P + n + (lane >> 4) * 8));
}

// the A fragment of a 16-deep product from two neighbouring C tiles (columns j, j+8)
template <typename E> __device__ __forceinline__ void c_to_a(u32 (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
    a[0] = pack<E>(c0[0], c0[1]);
    a[1] = pack<E>(c0[2], c0[3]);
    a[2] = pack<E>(c1[0], c1[1]);
    a[3] = pack<E>(c1[2], c1[3]);
}

// 2^x on the special-function unit, subnormal results flushed to zero: exp2f without
// fast-math wraps the same instruction in a rescale for subnormals, three more instructions
// per score. A probability below 2^-126 is zero once rounded to f16 and adds nothing a
// row sum of at least 1 can hold in f32.
__device__ __forceinline__ float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// How a kernel's output leaves shared memory: get() gives the 8 elements from column j0 of a
// staged row (a whole head's HD values of sequence position t) as they go to memory. Plain
// gives them as they are; the backward kernels may instead be given a generated one that
// applies the rope_backward reading their output (the rotation pairs each column with the
// one half a head away, which the staged row holds), so that gradient needs no pass of its
// own. get() only reads, so the rows' reads (the rope tables' too) are all issued before the
// first store.
struct Plain {
    template <typename E> __device__ __forceinline__ uint4 get(const E *row, int j0, int) const {
        return *(const uint4 *)(row + j0);
    }
};

// Each warp's accumulators of ROWS x HD (C fragments, MT row tiles) rounded to E into the
// warp's own rows of a shared tile, then written out 16 bytes at a time as `out` gives them;
// rows past T dropped.
template <typename E, int MT, int HD, int P, typename Out = Plain>
__device__ __forceinline__ void store_rows(E *tile, const float (&acc)[MT][HD / 8][4], float mul, E *dst, int row0, int T,
                                           long stride, const Out &out = Out()) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    E *mine = tile + warp * 16 * MT * P;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < HD / 8; n++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                *(u32 *)(mine + (mt * 16 + g + 8 * h) * P + n * 8 + 2 * t) =
                    pack<E>(acc[mt][n][2 * h] * mul, acc[mt][n][2 * h + 1] * mul);
    __syncwarp();
    constexpr int CH = HD / 8, RUNS = 16 * MT * CH / 32; // HD is a multiple of 16: CH is even
    const int first = row0 + warp * 16 * MT;
    uint4 v[RUNS];
#pragma unroll
    for (int it = 0; it < RUNS; it++) {
        const int c = lane + 32 * it, r = c / CH, row = first + r;
        v[it] = out.get(mine + r * P, c % CH * 8, row < T ? row : T - 1);
    }
#pragma unroll
    for (int it = 0; it < RUNS; it++) {
        const int c = lane + 32 * it, r = c / CH, row = first + r;
        if (row < T) *(uint4 *)(dst + (long)row * stride + c % CH * 8) = v[it];
    }
}

// ---- forward: one block of 4 warps per (batch, head, BR = 64 MT query rows); the key
// tiles of BC rows stream through a double buffer. o = softmax(s) v with the online
// softmax in base 2; lse is the natural log-sum-exp of each row's scaled scores. VS (and
// in the backward kernels DVS, dv's) is the elements from one row of v to the next: KV * HD,
// or more where v is the columns of a merged projection's output.
template <typename E, int T, int H, int KV, int HD, int CAUSAL, int MT, int BC, long VS>
__device__ __forceinline__ void forward(const E *q, const E *k, const E *v, E *o, float *lse, float scale) {
    constexpr int NT = THREADS, BR = 4 * 16 * MT, P = HD + 8, NQB = (T + BR - 1) / BR, NKB = (T + BC - 1) / BC;
    static_assert(HD % 16 == 0 && BC % 16 == 0 && H % KV == 0, "flash attention tile shapes");
    extern __shared__ __align__(16) unsigned char flash_smem[];
    E *qs = (E *)flash_smem, *ks = qs + BR * P, *vs = ks + 2 * BC * P; // [BR][P], [2][BC][P], [2][BC][P]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int b = blockIdx.x / H, h = blockIdx.x % H, kvh = h / (H / KV);
    const int q0 = (NQB - 1 - (int)blockIdx.y) * BR; // the longest rows first under causal
    const long qstride = (long)H * HD, kstride = (long)KV * HD;
    const E *qg = q + (long)b * T * qstride + (long)h * HD;
    const E *kg = k + (long)b * T * kstride + (long)kvh * HD, *vg = v + (long)b * T * VS + (long)kvh * HD;
    const int last_row = (q0 + BR < T ? q0 + BR : T) - 1;
    const int nkb = CAUSAL ? last_row / BC + 1 : NKB;
    const int warp_last = q0 + (warp + 1) * 16 * MT - 1;
    const float sl2 = scale * 1.4426950408889634f; // scores to base 2

    load_rows<E, BR, HD, P, NT>(qs, qg, q0, T, qstride);
    load_rows<E, BC, HD, P, NT>(ks, kg, 0, T, kstride);
    load_rows<E, BC, HD, P, NT>(vs, vg, 0, T, VS);
    copy_commit();

    u32 qf[MT][HD / 16][4];
    float acc[MT][HD / 8][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.0f;
#pragma unroll
        for (int n = 0; n < HD / 8; n++) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.0f;
    }
    for (int kb = 0; kb < nkb; kb++) {
        if (kb + 1 < nkb) {
            load_rows<E, BC, HD, P, NT>(ks + ((kb + 1) & 1) * BC * P, kg, (kb + 1) * BC, T, kstride);
            load_rows<E, BC, HD, P, NT>(vs + ((kb + 1) & 1) * BC * P, vg, (kb + 1) * BC, T, VS);
        }
        copy_commit();
        copy_wait<1>();
        __syncthreads();
        if (kb == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int kk = 0; kk < HD / 16; kk++) load_a<P>(qf[mt][kk], qs, warp * 16 * MT + mt * 16, kk * 16);
        }
        const E *kt = ks + (kb & 1) * BC * P, *vt = vs + (kb & 1) * BC * P;
        if (!CAUSAL || kb * BC <= warp_last) { // else every key of the tile is after this warp's rows
            float s[MT][BC / 8][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < BC / 8; n++) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
                for (int n = 0; n < BC / 8; n += 2) {
                    u32 r[4];
                    load_b_rows<P>(r, kt, n * 8, kk * 16);
                    const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma<E>(s[mt][n], qf[mt][kk], b0);
                        mma<E>(s[mt][n + 1], qf[mt][kk], b1);
                    }
                }
            // only the tiles that cross T or this warp's diagonal need the mask
            const bool edge = (T % BC != 0 && kb == NKB - 1) || (CAUSAL && kb * BC + BC - 1 > q0 + warp * 16 * MT);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int row = q0 + warp * 16 * MT + mt * 16 + g + 8 * hr;
                    if (edge) {
#pragma unroll
                        for (int n = 0; n < BC / 8; n++)
#pragma unroll
                            for (int c = 0; c < 2; c++) {
                                const int key = kb * BC + n * 8 + 2 * t + c;
                                if (key >= T || (CAUSAL && key > row)) s[mt][n][2 * hr + c] = -INFINITY;
                            }
                    }
                    float mx = -INFINITY; // of the raw scores: the scale is positive
#pragma unroll
                    for (int n = 0; n < BC / 8; n++) mx = fmaxf(mx, fmaxf(s[mt][n][2 * hr], s[mt][n][2 * hr + 1]));
                    const float mnew = fmaxf(m[mt][hr], quad_max(mx) * sl2);
                    const float base = mnew == -INFINITY ? 0.0f : mnew; // a row with no key yet
                    const float corr = exp2_ftz(m[mt][hr] - base);
                    float sum = 0.0f;
#pragma unroll
                    for (int n = 0; n < BC / 8; n++)
#pragma unroll
                        for (int c = 0; c < 2; c++) {
                            const float p = exp2_ftz(fmaf(s[mt][n][2 * hr + c], sl2, -base));
                            s[mt][n][2 * hr + c] = p;
                            sum += p;
                        }
                    l[mt][hr] = l[mt][hr] * corr + sum;
                    m[mt][hr] = mnew;
#pragma unroll
                    for (int n = 0; n < HD / 8; n++) acc[mt][n][2 * hr] *= corr, acc[mt][n][2 * hr + 1] *= corr;
                }
#pragma unroll
            for (int ks16 = 0; ks16 < BC / 16; ks16++) {
                u32 a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) c_to_a<E>(a[mt], s[mt][2 * ks16], s[mt][2 * ks16 + 1]);
#pragma unroll
                for (int n = 0; n < HD / 8; n += 2) {
                    u32 r[4];
                    load_b_cols<P>(r, vt, ks16 * 16, n * 8);
                    const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma<E>(acc[mt][n], a[mt], b0);
                        mma<E>(acc[mt][n + 1], a[mt], b1);
                    }
                }
            }
        }
        __syncthreads();
    }
    // this warp's rows of qs were read only by this warp: they stage the output
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const float total = quad_sum(l[mt][hr]);
            const float inv = 1.0f / total;
#pragma unroll
            for (int n = 0; n < HD / 8; n++) acc[mt][n][2 * hr] *= inv, acc[mt][n][2 * hr + 1] *= inv;
            const int row = q0 + warp * 16 * MT + mt * 16 + g + 8 * hr;
            if (lse && t == 0 && row < T) lse[((long)b * H + h) * T + row] = (m[mt][hr] + log2f(total)) * 0.6931471805599453f;
        }
    store_rows<E, MT, HD, P>(qs, acc, 1.0f, o + (long)b * T * qstride + (long)h * HD, q0, T, qstride);
}

// dsum = rowsum(dO * O) of a block's 64 rows from row q0 (of 128 threads, two a row, straight
// from global memory) into dsm[64] and into `rows`, the head's [T] statistics
template <typename E, int HD>
__device__ __forceinline__ void row_dsum(const E *out, const E *dout, long qoff, long qstride, int q0, int T, float *dsm,
                                         float *rows) {
    const int r = threadIdx.x >> 1, half = threadIdx.x & 1, row = q0 + r;
    float d = 0.0f;
    if (row < T) {
        const E *po = out + qoff + (long)row * qstride + half * (HD / 2), *pd = dout + qoff + (long)row * qstride + half * (HD / 2);
#pragma unroll
        for (int c = 0; c < HD / 2; c += 8) {
            const uint4 vo = *(const uint4 *)(po + c), vd = *(const uint4 *)(pd + c);
            const u32 wo[4] = {vo.x, vo.y, vo.z, vo.w}, wd[4] = {vd.x, vd.y, vd.z, vd.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 fo = unpack<E>(wo[j]), fd = unpack<E>(wd[j]);
                d += fo.x * fd.x + fo.y * fd.y;
            }
        }
    }
    d += __shfl_xor_sync(0xffffffffu, d, 1);
    if (!half) {
        dsm[r] = d;
        if (row < T) rows[row] = d;
    }
}

// ---- backward, kernel 1 of 2: dq, and dsum = rowsum(dO * O) for kernel 2. One block of
// 4 warps per (batch, head, 64 query rows), streaming the key tiles as the forward does:
// p = exp(s - lse), dp = dO v^T, ds = p (dp - dsum), dq = scale ds k.
template <typename E, int T, int H, int KV, int HD, int CAUSAL, int BC, long VS, long DQS, typename Out>
__device__ __forceinline__ void backward_dq(const E *dout, const E *q, const E *k, const E *v, const E *out,
                                            const float *lse, E *dq, float *dsum, float scale, const Out &writer) {
    constexpr int NT = THREADS, BR = 64, P = HD + 8, NQB = (T + BR - 1) / BR, NKB = (T + BC - 1) / BC;
    static_assert(HD % 16 == 0 && BC % 16 == 0 && H % KV == 0, "flash attention tile shapes");
    extern __shared__ __align__(16) unsigned char flash_smem[];
    E *qs = (E *)flash_smem, *dos = qs + BR * P, *ks = dos + BR * P, *vs = ks + 2 * BC * P;
    float *dsm = (float *)(vs + 2 * BC * P); // [BR]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int b = blockIdx.x / H, h = blockIdx.x % H, kvh = h / (H / KV);
    const int q0 = (NQB - 1 - (int)blockIdx.y) * BR;
    const long qstride = (long)H * HD, kstride = (long)KV * HD;
    const long qoff = (long)b * T * qstride + (long)h * HD, stats = ((long)b * H + h) * T;
    const E *kg = k + (long)b * T * kstride + (long)kvh * HD, *vg = v + (long)b * T * VS + (long)kvh * HD;
    const int last_row = (q0 + BR < T ? q0 + BR : T) - 1;
    const int nkb = CAUSAL ? last_row / BC + 1 : NKB;
    const int warp_last = q0 + warp * 16 + 15;
    const float sl2 = scale * 1.4426950408889634f;

    load_rows<E, BR, HD, P, NT>(qs, q + qoff, q0, T, qstride);
    load_rows<E, BR, HD, P, NT>(dos, dout + qoff, q0, T, qstride);
    load_rows<E, BC, HD, P, NT>(ks, kg, 0, T, kstride);
    load_rows<E, BC, HD, P, NT>(vs, vg, 0, T, VS);
    copy_commit();
    row_dsum<E, HD>(out, dout, qoff, qstride, q0, T, dsm, dsum + stats);
    u32 qf[HD / 16][4], df[HD / 16][4];
    float acc[1][HD / 8][4], lse2[2], dsr[2];
#pragma unroll
    for (int n = 0; n < HD / 8; n++) acc[0][n][0] = acc[0][n][1] = acc[0][n][2] = acc[0][n][3] = 0.0f;
    for (int kb = 0; kb < nkb; kb++) {
        if (kb + 1 < nkb) {
            load_rows<E, BC, HD, P, NT>(ks + ((kb + 1) & 1) * BC * P, kg, (kb + 1) * BC, T, kstride);
            load_rows<E, BC, HD, P, NT>(vs + ((kb + 1) & 1) * BC * P, vg, (kb + 1) * BC, T, VS);
        }
        copy_commit();
        copy_wait<1>();
        __syncthreads();
        if (kb == 0) {
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                load_a<P>(qf[kk], qs, warp * 16, kk * 16);
                load_a<P>(df[kk], dos, warp * 16, kk * 16);
            }
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int row = q0 + warp * 16 + g + 8 * hr;
                lse2[hr] = row < T ? lse[stats + row] * 1.4426950408889634f : 0.0f;
                dsr[hr] = dsm[warp * 16 + g + 8 * hr];
            }
        }
        const E *kt = ks + (kb & 1) * BC * P, *vt = vs + (kb & 1) * BC * P;
        if (!CAUSAL || kb * BC <= warp_last) {
            float s[BC / 8][4], dp[BC / 8][4];
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
                for (int n = 0; n < BC / 8; n += 2) {
                    u32 r[4];
                    load_b_rows<P>(r, kt, n * 8, kk * 16);
                    const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                    mma<E>(s[n], qf[kk], b0);
                    mma<E>(s[n + 1], qf[kk], b1);
                    load_b_rows<P>(r, vt, n * 8, kk * 16);
                    const u32 c0[2] = {r[0], r[1]}, c1[2] = {r[2], r[3]};
                    mma<E>(dp[n], df[kk], c0);
                    mma<E>(dp[n + 1], df[kk], c1);
                }
            // Only the tiles that cross T or this warp's diagonal are masked. Rows past T
            // need no mask: their q and dO are zeros, so their ds is zero.
            const bool edge = (T % BC != 0 && kb == NKB - 1) || (CAUSAL && kb * BC + BC - 1 > q0 + warp * 16);
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] = exp2_ftz(fmaf(s[n][e], sl2, -lse2[e >> 1])); // p
            if (edge) {
#pragma unroll
                for (int n = 0; n < BC / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int row = q0 + warp * 16 + g + 8 * (e >> 1), key = kb * BC + n * 8 + 2 * t + (e & 1);
                        if (key >= T || (CAUSAL && key > row)) s[n][e] = 0.0f;
                    }
            }
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] *= dp[n][e] - dsr[e >> 1]; // ds
#pragma unroll
            for (int ks16 = 0; ks16 < BC / 16; ks16++) {
                u32 a[4];
                c_to_a<E>(a, s[2 * ks16], s[2 * ks16 + 1]);
#pragma unroll
                for (int n = 0; n < HD / 8; n += 2) {
                    u32 r[4];
                    load_b_cols<P>(r, kt, ks16 * 16, n * 8);
                    const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                    mma<E>(acc[0][n], a, b0);
                    mma<E>(acc[0][n + 1], a, b1);
                }
            }
        }
        __syncthreads();
    }
    store_rows<E, 1, HD, P>(qs, acc, scale, dq + (long)b * T * DQS + (long)h * HD, q0, T, DQS, writer);
}

// ---- backward, kernel 2 of 2: dk and dv. One block of 4 warps per (batch, kv head, 64
// keys); each warp owns 16 keys and keeps k and v in registers (HD <= 64; larger heads
// re-read them from shared memory). The block walks every query head of its kv head and
// every query tile of BQ rows that can see its keys, so dk and dv are summed over the group
// with one writer per element: with s^T = k q^T, p^T = exp(s^T - lse), dp^T = v dO^T,
// ds^T = p^T (dp^T - dsum): dv = p^T dO, dk = scale ds^T q. With ROUND_HEADS each query
// head's share is rounded to E before the sum (in f32, in shared memory), as PyTorch gives
// it for MiniMind, whose repeat_kv makes SDPA return each head's dk and dv in f16 and sums
// those; without, the group is summed in f32 and rounded once.
template <typename E> __device__ __forceinline__ float round_to(float x);
template <> __device__ __forceinline__ float round_to<__half>(float x) { return __half2float(__float2half_rn(x)); }
template <> __device__ __forceinline__ float round_to<__nv_bfloat16>(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

template <typename E, int T, int H, int KV, int HD, int CAUSAL, int BQ, int ROUND_HEADS, long VS, long DVS, long DKS,
          typename Out>
__device__ __forceinline__ void backward_dkv(const E *dout, const E *q, const E *k, const E *v, const float *lse,
                                             const float *dsum, E *dk, E *dv, float scale, const Out &writer) {
    constexpr int NT = THREADS, BK = 64, P = HD + 8, NQB = (T + BQ - 1) / BQ, REP = H / KV;
    constexpr bool KV_REGS = HD <= 64;
    static_assert(HD % 16 == 0 && BQ % 16 == 0 && H % KV == 0, "flash attention tile shapes");
    // Shared memory: the k and v tiles [BK][P] (or, once k and v sit in registers, each
    // thread's rounded shares [2][HD / 8 * 4][128] in the same bytes), then the q and dO
    // tiles [2][BQ][P] each and the stats [2][BQ] each. The codegen's smem size is this sum.
    constexpr int KV_BYTES = 2 * BK * P * (int)sizeof(E), SUM_BYTES = ROUND_HEADS ? 2 * (HD / 8 * 4) * 128 * 4 : 0;
    constexpr bool ALIAS = ROUND_HEADS && KV_REGS;
    constexpr int HEAD_BYTES = ALIAS ? (KV_BYTES > SUM_BYTES ? KV_BYTES : SUM_BYTES) : KV_BYTES + SUM_BYTES;
    extern __shared__ __align__(16) unsigned char flash_smem[];
    E *ks = (E *)flash_smem, *vs = ks + BK * P, *qs = (E *)(flash_smem + HEAD_BYTES), *dos = qs + 2 * BQ * P;
    float *ls = (float *)(dos + 2 * BQ * P), *dss = ls + 2 * BQ; // [2][BQ] each
    float *sums = (float *)(flash_smem + (ALIAS ? 0 : KV_BYTES)); // ROUND_HEADS
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int b = blockIdx.x / KV, kvh = blockIdx.x % KV;
    const int k0 = blockIdx.y * BK; // the keys seen by the most queries first under causal
    const long qstride = (long)H * HD, kstride = (long)KV * HD;
    const long koff = (long)b * T * kstride + (long)kvh * HD;
    const int first_qb = CAUSAL ? k0 / BQ : 0, per_head = NQB - first_qb, steps = REP * per_head;
    const int warp_first = k0 + warp * 16;
    const float sl2 = scale * 1.4426950408889634f;

    load_rows<E, BK, HD, P, NT>(ks, k + koff, k0, T, kstride);
    load_rows<E, BK, HD, P, NT>(vs, v + (long)b * T * VS + (long)kvh * HD, k0, T, VS);
    // the tile of step i: query head kvh * REP + i / per_head, query block first_qb + i % per_head
    auto issue = [&](int i) {
        const int hq = kvh * REP + i / per_head, qb0 = (first_qb + i % per_head) * BQ, buf = i & 1;
        const long qoff = (long)b * T * qstride + (long)hq * HD, stats = ((long)b * H + hq) * T;
        load_rows<E, BQ, HD, P, NT>(qs + buf * BQ * P, q + qoff, qb0, T, qstride);
        load_rows<E, BQ, HD, P, NT>(dos + buf * BQ * P, dout + qoff, qb0, T, qstride);
        load_stats<BQ, NT>(ls + buf * BQ, lse + stats, qb0, T);
        load_stats<BQ, NT>(dss + buf * BQ, dsum + stats, qb0, T);
    };
    issue(0);
    copy_commit();

    u32 kf[KV_REGS ? HD / 16 : 1][4], vf[KV_REGS ? HD / 16 : 1][4];
    float dka[1][HD / 8][4], dva[1][HD / 8][4];
#pragma unroll
    for (int n = 0; n < HD / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dka[0][n][e] = dva[0][n][e] = 0.0f;
    for (int i = 0; i < steps; i++) {
        // a new query head: keep the last one's share, rounded (the first share starts the
        // sums; before it, under ALIAS, the bytes still hold the k and v tiles)
        if (ROUND_HEADS && i && i % per_head == 0) {
#pragma unroll
            for (int n = 0; n < HD / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float *sk = sums + (n * 4 + e) * 128 + threadIdx.x, *sv = sk + HD / 8 * 4 * 128;
                    *sk = (i > per_head ? *sk : 0.0f) + round_to<E>(dka[0][n][e] * scale);
                    *sv = (i > per_head ? *sv : 0.0f) + round_to<E>(dva[0][n][e]);
                    dka[0][n][e] = dva[0][n][e] = 0.0f;
                }
        }
        if (i + 1 < steps) issue(i + 1);
        copy_commit();
        copy_wait<1>();
        __syncthreads();
        if (KV_REGS && i == 0) {
#pragma unroll
            for (int kk = 0; kk < (KV_REGS ? HD / 16 : 1); kk++) {
                load_a<P>(kf[kk], ks, warp * 16, kk * 16);
                load_a<P>(vf[kk], vs, warp * 16, kk * 16);
            }
        }
        const int qb0 = (first_qb + i % per_head) * BQ, buf = i & 1;
        const E *qt = qs + buf * BQ * P, *dt = dos + buf * BQ * P;
        const float *lt = ls + buf * BQ, *dst = dss + buf * BQ;
        if (!CAUSAL || qb0 + BQ - 1 >= warp_first) { // else every query of the tile is before this warp's keys
            float s[BQ / 8][4], dp[BQ / 8][4];
#pragma unroll
            for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                u32 ka[4], va[4];
                if (KV_REGS) {
#pragma unroll
                    for (int e = 0; e < 4; e++) ka[e] = kf[KV_REGS ? kk : 0][e], va[e] = vf[KV_REGS ? kk : 0][e];
                } else {
                    load_a<P>(ka, ks, warp * 16, kk * 16);
                    load_a<P>(va, vs, warp * 16, kk * 16);
                }
#pragma unroll
                for (int n = 0; n < BQ / 8; n += 2) {
                    u32 r[4];
                    load_b_rows<P>(r, qt, n * 8, kk * 16);
                    const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                    mma<E>(s[n], ka, b0);
                    mma<E>(s[n + 1], ka, b1);
                    load_b_rows<P>(r, dt, n * 8, kk * 16);
                    const u32 c0[2] = {r[0], r[1]}, c1[2] = {r[2], r[3]};
                    mma<E>(dp[n], va, c0);
                    mma<E>(dp[n + 1], va, c1);
                }
            }
            // Only the tiles that cross T or this warp's diagonal are masked. Queries past T
            // need no mask: their q, dO, lse and dsum are zeros, so p = 1 meets dO = 0 and
            // ds = 0: they add nothing to dk or dv.
            const bool edge = (T % BQ != 0 && qb0 + BQ > T) || (CAUSAL && qb0 < warp_first + 15);
#pragma unroll
            for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const float l2 = lt[n * 8 + 2 * t + c] * 1.4426950408889634f;
#pragma unroll
                    for (int hr = 0; hr < 2; hr++) s[n][2 * hr + c] = exp2_ftz(fmaf(s[n][2 * hr + c], sl2, -l2)); // p^T
                }
            if (edge) {
#pragma unroll
                for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int key = warp_first + g + 8 * (e >> 1), query = qb0 + n * 8 + 2 * t + (e & 1);
                        if (query >= T || (CAUSAL && key > query)) s[n][e] = 0.0f;
                    }
            }
#pragma unroll
            for (int n = 0; n < BQ / 8; n++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const float d = dst[n * 8 + 2 * t + c];
#pragma unroll
                    for (int hr = 0; hr < 2; hr++) dp[n][2 * hr + c] = s[n][2 * hr + c] * (dp[n][2 * hr + c] - d); // ds^T
                }
#pragma unroll
            for (int ks16 = 0; ks16 < BQ / 16; ks16++) {
                u32 ap[4], ad[4];
                c_to_a<E>(ap, s[2 * ks16], s[2 * ks16 + 1]);
                c_to_a<E>(ad, dp[2 * ks16], dp[2 * ks16 + 1]);
#pragma unroll
                for (int n = 0; n < HD / 8; n += 2) {
                    u32 r[4];
                    load_b_cols<P>(r, dt, ks16 * 16, n * 8);
                    const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                    mma<E>(dva[0][n], ap, b0);
                    mma<E>(dva[0][n + 1], ap, b1);
                    load_b_cols<P>(r, qt, ks16 * 16, n * 8);
                    const u32 c0[2] = {r[0], r[1]}, c1[2] = {r[2], r[3]};
                    mma<E>(dka[0][n], ad, c0);
                    mma<E>(dka[0][n + 1], ad, c1);
                }
            }
        }
        __syncthreads();
    }
    float kscale = scale;
    if (ROUND_HEADS) { // the last head's share, then the sum of the rounded shares
        kscale = 1.0f;
#pragma unroll
        for (int n = 0; n < HD / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float *sk = sums + (n * 4 + e) * 128 + threadIdx.x, *sv = sk + HD / 8 * 4 * 128;
                dka[0][n][e] = (REP > 1 ? *sk : 0.0f) + round_to<E>(dka[0][n][e] * scale);
                dva[0][n][e] = (REP > 1 ? *sv : 0.0f) + round_to<E>(dva[0][n][e]);
            }
        if (ALIAS) __syncthreads(); // every thread has its sums before the k and v tiles stage the output
    }
    // each warp's own 16 rows of ks and vs stage dk and dv
    store_rows<E, 1, HD, P>(ks, dka, kscale, dk + (long)b * T * DKS + (long)kvh * HD, k0, T, DKS, writer);
    store_rows<E, 1, HD, P>(vs, dva, 1.0f, dv + (long)b * T * DVS + (long)kvh * HD, k0, T, DVS);
}

} // namespace flash
