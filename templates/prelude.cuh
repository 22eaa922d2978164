// ---- prelude: loads and stores, rounding, exact arithmetic, math and block reductions
// shared by every generated kernel (codegen writes struct MmcBuffers, the kernels' one
// argument, above it from the plan's buffer table). Registers hold float (double under an f64
// policy); a value is rounded to its storage dtype where the plan says it is stored, and
// also at every op boundary when the policy rounds as PyTorch eager does.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

__device__ __forceinline__ float ld(const float *p, long i) { return p[i]; }
__device__ __forceinline__ double ld(const double *p, long i) { return p[i]; }
__device__ __forceinline__ float ld(const __half *p, long i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ int ld(const int *p, long i) { return p[i]; }

// loads that bypass L1: values another block wrote in this launch (after a fence)
__device__ __forceinline__ float ld_cg(const float *p, long i) { return __ldcg(p + i); }
__device__ __forceinline__ double ld_cg(const double *p, long i) { return __ldcg(p + i); }

// f16 and bf16 are produced from an f32 value, also when registers are double
__device__ __forceinline__ void st(float *p, long i, double v) { p[i] = (float)v; }
__device__ __forceinline__ void st(double *p, long i, double v) { p[i] = v; }
__device__ __forceinline__ void st(__half *p, long i, double v) { p[i] = __float2half_rn((float)v); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, long i, double v) { p[i] = __float2bfloat16_rn((float)v); }

__device__ __forceinline__ float rd_f32(float v) { return v; }
__device__ __forceinline__ double rd_f32(double v) { return (double)(float)v; }
__device__ __forceinline__ double rd_f64(double v) { return v; }
__device__ __forceinline__ float rd_f16(float v) { return __half2float(__float2half_rn(v)); }
__device__ __forceinline__ double rd_f16(double v) { return __half2float(__float2half_rn((float)v)); }
__device__ __forceinline__ float rd_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ double rd_bf16(double v) { return __bfloat162float(__float2bfloat16_rn((float)v)); }

// IEEE operations the compiler may not contract into an FMA, so the result of every op is
// the one PyTorch's eager kernels give (and the ref backend computes).
__device__ __forceinline__ float mmc_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double mmc_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float mmc_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double mmc_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float mmc_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mmc_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float mmc_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double mmc_div(double a, double b) { return __ddiv_rn(a, b); }

// torch: x / (1 + exp(-x)) in opmath (ActivationSiluKernel.cu)
__device__ __forceinline__ float mmc_silu(float x) { return mmc_div(x, mmc_add(1.0f, expf(-x))); }
__device__ __forceinline__ double mmc_silu(double x) { return x / (1.0 + exp(-x)); }
// torch: dy * s * (1 + x * (1 - s)), s = 1 / (1 + exp(-x))
__device__ __forceinline__ float mmc_silu_backward(float dy, float x) {
    float s = mmc_div(1.0f, mmc_add(1.0f, expf(-x)));
    return mmc_mul(mmc_mul(dy, s), mmc_add(1.0f, mmc_mul(x, mmc_sub(1.0f, s))));
}
__device__ __forceinline__ double mmc_silu_backward(double dy, double x) {
    double s = 1.0 / (1.0 + exp(-x));
    return dy * s * (1.0 + x * (1.0 - s));
}
// The same silu and silu_backward with no branch an element, for a GEMM's epilogue, where one
// warp a scheduler works through units of 8 elements: div.rn.f32 compiles to a range check
// (FCHK) and a branch to its slow path around each quotient, which keeps the compiler from
// interleaving the elements' dependent chains (a stall on every instruction). The epilogue
// computes a unit with MmcFast and, where any element set `untame`, all 8 again with
// MmcExact (templates/gemm_epilogue.cu). mmc_div_fast is div.rn's own fast path (rcp.approx,
// one Newton step, a rounded quotient and its correction: the instructions nvcc emits) for
// the operands where div.rn takes it: 2^-60 <= b <= 2^60, |a| <= 2^60, and |a| >= 2^-60 or
// a == 0. Anything else (NaN too) sets `untame`. So the result is div.rn's bit for bit
// either way; tests/gpu/test_silu_fast.c checks it on every f16 and bf16 input.
struct MmcFast {};
struct MmcExact {};
__device__ __forceinline__ float mmc_div_fast(float a, float b, bool &untame) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
    r = __fmaf_rn(r, __fmaf_rn(-b, r, 1.0f), r);
    const float q = __fmaf_rn(a, r, 0.0f);
    const float aa = fabsf(a);
    untame |= !(b >= 0x1p-60f && b <= 0x1p60f && aa <= 0x1p60f && (aa >= 0x1p-60f || a == 0.0f));
    return a == 0.0f ? a : __fmaf_rn(r, __fmaf_rn(-b, q, a), q); // 0 / b keeps a's sign
}
__device__ __forceinline__ float mmc_silu(MmcFast, bool &untame, float x) {
    return mmc_div_fast(x, mmc_add(1.0f, expf(-x)), untame);
}
__device__ __forceinline__ float mmc_silu_backward(MmcFast, bool &untame, float dy, float x) {
    const float s = mmc_div_fast(1.0f, mmc_add(1.0f, expf(-x)), untame);
    return mmc_mul(mmc_mul(dy, s), mmc_add(1.0f, mmc_mul(x, mmc_sub(1.0f, s))));
}
// f64 registers (the reference build) and the exact pass take the functions above
template <class T> __device__ __forceinline__ T mmc_silu(MmcExact, bool &, T x) { return mmc_silu(x); }
__device__ __forceinline__ double mmc_silu(MmcFast, bool &, double x) { return mmc_silu(x); }
template <class T> __device__ __forceinline__ T mmc_silu_backward(MmcExact, bool &, T dy, T x) {
    return mmc_silu_backward(dy, x);
}
__device__ __forceinline__ double mmc_silu_backward(MmcFast, bool &, double dy, double x) {
    return mmc_silu_backward(dy, x);
}
__device__ __forceinline__ float mmc_exp(float x) { return expf(x); }
__device__ __forceinline__ double mmc_exp(double x) { return exp(x); }
// exp(d) for d = x - max <= 0, a term of a softmax's row sum, on the special-function unit:
// ex2.approx is within 2 ulp of 2^y, so a term is within about 1e-6 relative (of |d| up to
// the 17 where a term still counts in f32) where expf's is 1 ulp, and the row sum, its log
// and the f32 loss move by about 1e-7. expf's range reduction made the cross-entropy
// forward, which takes 6400 of these a row, instruction-bound at half the memory's speed.
__device__ __forceinline__ float mmc_exp_sum_term(float d) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(d * 1.4426950408889634f));
    return y;
}
__device__ __forceinline__ double mmc_exp_sum_term(double d) { return exp(d); }
__device__ __forceinline__ float mmc_log(float x) { return logf(x); }
__device__ __forceinline__ double mmc_log(double x) { return log(x); }
__device__ __forceinline__ float mmc_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ double mmc_rsqrt(double x) { return rsqrt(x); }

// Sum over the block, in a fixed order (deterministic). Every thread gets the result.
// `shared` needs 32 elements; blockDim.x is a multiple of 32.
template <typename T> __device__ T block_sum(T v, T *shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    T total = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) total += shared[w];
    return total;
}

// Sums each of v[0..N) over every team of TPR consecutive threads (TPR a power of two), in a
// fixed order; every thread of the team gets the sums. Teams wider than a warp meet in
// `shared` (N * blockDim.x / 32 elements), and then every thread of the block must call it.
template <int TPR, int N, typename T> __device__ __forceinline__ void team_sum(T (&v)[N], T *shared) {
#pragma unroll
    for (int o = (TPR < 32 ? TPR : 32) / 2; o > 0; o >>= 1)
#pragma unroll
        for (int j = 0; j < N; j++) v[j] += __shfl_xor_sync(0xffffffffu, v[j], o);
    if (TPR > 32) {
        constexpr int warps = TPR > 32 ? TPR / 32 : 1;
        const int warp = threadIdx.x >> 5, first = warp / warps * warps;
        __syncthreads();
        if ((threadIdx.x & 31) == 0)
            for (int j = 0; j < N; j++) shared[warp * N + j] = v[j];
        __syncthreads();
        for (int j = 0; j < N; j++) {
            v[j] = 0;
            for (int w = 0; w < warps; w++) v[j] += shared[(first + w) * N + j];
        }
    }
}

// The online softmax's running max m and sum s of exp(x - m) of the 32 lanes of a warp, merged
// in a fixed order: a lane without values (s = 0) adds nothing, whatever the maxima are, and
// every lane ends with the same m and s (each pair adds the same two terms).
template <typename T> __device__ __forceinline__ void warp_softmax_merge(T &m, T &s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const T om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
        const T mm = om > m ? om : m;
        s = (s == 0 ? (T)0 : s * mmc_exp(m - mm)) + (os == 0 ? (T)0 : os * mmc_exp(om - mm));
        m = mm;
    }
}

template <typename T> __device__ T block_max(T v, T *shared) {
    for (int o = 16; o > 0; o >>= 1) {
        T other = __shfl_xor_sync(0xffffffffu, v, o);
        v = other > v ? other : v;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    T m = shared[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) m = shared[w] > m ? shared[w] : m;
    return m;
}

// ---- 8 consecutive elements at p + i (i a multiple of 8, so 16 or 32 bytes aligned) in one
// or two wide accesses: the kernels that stream tensors load and store through these. The
// values and their rounding are those of ld and st, element by element.
template <typename R> __device__ __forceinline__ void ldv(const __half *p, long i, R (&o)[8]) {
    const uint4 u = *(const uint4 *)(p + i);
    const __half2 *h = (const __half2 *)&u;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float2 f = __half22float2(h[j]);
        o[2 * j] = f.x, o[2 * j + 1] = f.y;
    }
}
template <typename R> __device__ __forceinline__ void ldv(const __nv_bfloat16 *p, long i, R (&o)[8]) {
    const uint4 u = *(const uint4 *)(p + i);
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float2 f = __bfloat1622float2(h[j]);
        o[2 * j] = f.x, o[2 * j + 1] = f.y;
    }
}
template <typename R> __device__ __forceinline__ void ldv(const float *p, long i, R (&o)[8]) {
    const float4 a = *(const float4 *)(p + i), c = *(const float4 *)(p + i + 4);
    o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = c.x, o[5] = c.y, o[6] = c.z, o[7] = c.w;
}
template <typename R> __device__ __forceinline__ void ldv(const double *p, long i, R (&o)[8]) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const double2 d = *(const double2 *)(p + i + 2 * j);
        o[2 * j] = d.x, o[2 * j + 1] = d.y;
    }
}
// the same through L2 only (__ldcg): for values other blocks of the same launch wrote
template <typename R> __device__ __forceinline__ void ldv_cg(const float *p, long i, R (&o)[8]) {
    const float4 a = __ldcg((const float4 *)(p + i)), c = __ldcg((const float4 *)(p + i + 4));
    o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = c.x, o[5] = c.y, o[6] = c.z, o[7] = c.w;
}
template <typename R> __device__ __forceinline__ void ldv_cg(const double *p, long i, R (&o)[8]) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const double2 d = __ldcg((const double2 *)(p + i + 2 * j));
        o[2 * j] = d.x, o[2 * j + 1] = d.y;
    }
}
// one value for all eight (a scalar operand)
template <typename T, typename R> __device__ __forceinline__ void ldv1(const T *p, R (&o)[8]) {
    const R v = ld(p, 0);
#pragma unroll
    for (int j = 0; j < 8; j++) o[j] = v;
}
template <typename R> __device__ __forceinline__ void stv(__half *p, long i, const R (&v)[8]) {
    uint4 u;
    __half2 *h = (__half2 *)&u;
#pragma unroll
    for (int j = 0; j < 4; j++) h[j] = __floats2half2_rn((float)v[2 * j], (float)v[2 * j + 1]);
    *(uint4 *)(p + i) = u;
}
template <typename R> __device__ __forceinline__ void stv(__nv_bfloat16 *p, long i, const R (&v)[8]) {
    uint4 u;
    __nv_bfloat162 *h = (__nv_bfloat162 *)&u;
#pragma unroll
    for (int j = 0; j < 4; j++) h[j] = __floats2bfloat162_rn((float)v[2 * j], (float)v[2 * j + 1]);
    *(uint4 *)(p + i) = u;
}
template <typename R> __device__ __forceinline__ void stv(float *p, long i, const R (&v)[8]) {
    *(float4 *)(p + i) = make_float4((float)v[0], (float)v[1], (float)v[2], (float)v[3]);
    *(float4 *)(p + i + 4) = make_float4((float)v[4], (float)v[5], (float)v[6], (float)v[7]);
}
template <typename R> __device__ __forceinline__ void stv(double *p, long i, const R (&v)[8]) {
#pragma unroll
    for (int j = 0; j < 4; j++) *(double2 *)(p + i + 2 * j) = make_double2((double)v[2 * j], (double)v[2 * j + 1]);
}

// ---- a view whose rows lie LD elements apart, W elements each: the columns of a wider
// tensor (one projection of a merged GEMM's output), or one input written into its columns
// of a concat. Element i of the view is p[i / W * LD + i % W]; the same loads and stores
// take it, so a kernel's code does not change with the layout. Eight elements of a wide
// access stay in one row (W and LD are multiples of 8 then).
template <typename T, long W, long LD> struct Strided {
    T *p;
    __device__ __forceinline__ long at(long i) const { return i / W * LD + i % W; }
};
template <typename T, long W, long LD> __device__ __forceinline__ auto ld(const Strided<T, W, LD> &s, long i) {
    return ld(s.p, s.at(i));
}
template <typename T, long W, long LD> __device__ __forceinline__ void st(const Strided<T, W, LD> &s, long i, double v) {
    st(s.p, s.at(i), v);
}
template <typename T, long W, long LD, typename R>
__device__ __forceinline__ void ldv(const Strided<T, W, LD> &s, long i, R (&o)[8]) {
    ldv(s.p, s.at(i), o);
}
template <typename T, long W, long LD, typename R>
__device__ __forceinline__ void stv(const Strided<T, W, LD> &s, long i, const R (&v)[8]) {
    stv(s.p, s.at(i), v);
}
