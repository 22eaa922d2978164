/* The GEMM epilogues' branch-free silu and silu_backward (MmcFast, templates/prelude.cuh)
 * against the exact ones (div.rn) on the GPU, bit for bit: the epilogue keeps the fast
 * result only where no element of its unit set `untame`, so wherever the fast functions
 * leave `untame` clear they must give the exact functions' bits, and the test allows no
 * difference at all. The inputs are every f16 and every bf16 value (the products and
 * operands the epilogues read are rounded to one of the two), 2^22 random f32 bit patterns
 * (every exponent, NaN and infinity included) and 2^22 normal values of random scale;
 * silu_backward takes dy = 1 and a random dy for each. mmc_div_fast alone is checked on
 * random pairs of the same kinds. The test also counts the inputs that fall back to the
 * exact math: those far out in the tails (|x| > 2^60 or 1 + exp(-x) > 2^60) or next to
 * zero (|x| < 2^-60), never one in between. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "test_util.h"

#include "nvrtc_compile.h"

#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) die("test_silu_fast: %s: %s", #call, cudaGetErrorString(e_));       \
    } while (0)

/* flags by input: which check differs, and which fell back */
static const char *kernel_source =
    "extern \"C\" __global__ void check(const float *xs, const float *dys, long n, unsigned *flags) {\n"
    "    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;\n"
    "    if (i >= n) return;\n"
    "    const float x = xs[i], dy = dys[i];\n"
    "    unsigned f = 0;\n"
    "    bool u = false;\n"
    "    const float s = mmc_silu(MmcFast{}, u, x);\n"
    "    if (u) f |= 8; else if (__float_as_uint(s) != __float_as_uint(mmc_silu(x))) f |= 1;\n"
    "    u = false;\n"
    "    const float g1 = mmc_silu_backward(MmcFast{}, u, 1.0f, x);\n"
    "    const float g = mmc_silu_backward(MmcFast{}, u, dy, x);\n"
    "    if (u) f |= 16;\n"
    "    else if (__float_as_uint(g1) != __float_as_uint(mmc_silu_backward(1.0f, x)) ||\n"
    "             __float_as_uint(g) != __float_as_uint(mmc_silu_backward(dy, x))) f |= 2;\n"
    "    u = false;\n"
    "    const float q = mmc_div_fast(x, dy, u);\n"
    "    if (u) f |= 32; else if (__float_as_uint(q) != __float_as_uint(__fdiv_rn(x, dy))) f |= 4;\n"
    "    flags[i] = f;\n"
    "}\n";

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float f16_value(uint16_t h) { /* IEEE binary16 to f32, exactly */
    int e = h >> 10 & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return h >> 15 ? -v : v;
}
static float normal(void) { /* Box-Muller */
    double u1 = (next_u32() + 1.0) / 4294967297.0, u2 = next_u32() / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static float random_input(int kind) {
    switch (kind) {
    case 0: return f16_value((uint16_t)next_u32());
    case 1: return bits_f32(next_u32() & 0xffff0000u); /* bf16 */
    case 2: return bits_f32(next_u32());
    default: return normal() * ldexpf(1.0f, (int)(next_u32() % 41) - 20);
    }
}

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) die("test_silu_fast: no CUDA device");
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", prop.major, prop.minor);

    StrBuf src = {0};
    sb_append(&src, "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\nstruct MmcBuffers {\n");
    for (int b = 0; b < BUF_COUNT; b++) sb_printf(&src, "    char *%s;\n", buffer_name(b));
    sb_append(&src, "};\n");
    sb_append(&src, template_text("prelude.cuh"));
    sb_append(&src, kernel_source);
    size_t size = 0;
    void *cubin = nvrtc_compile(src.s, "test_silu_fast.cu", arch, &size);
    cudaLibrary_t lib;
    cudaKernel_t kernel;
    CUDA_OK(cudaLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
    CUDA_OK(cudaLibraryGetKernel(&kernel, lib, "check"));

    /* [0, 2^16): every f16 as x; [2^16, 2^17): every bf16; then the random sets, each x with
     * a dy (and divisor) of a random kind */
    const long n_all = 2L << 16, n_random = 4L << 20, n = 2 * n_all + 2 * n_random;
    float *x = xmalloc((size_t)n * sizeof *x), *dy = xmalloc((size_t)n * sizeof *dy);
    unsigned *flags = xmalloc((size_t)n * sizeof *flags);
    for (long i = 0; i < 1L << 16; i++) x[i] = f16_value((uint16_t)i), x[(1L << 16) + i] = bits_f32((uint32_t)i << 16);
    for (long i = n_all; i < 2 * n_all; i++) x[i] = x[i - n_all]; /* the same with other dy */
    for (long i = 2 * n_all; i < n; i++) x[i] = random_input(i < 2 * n_all + n_random ? 2 : 3);
    for (long i = 0; i < n; i++) dy[i] = i < n_all ? normal() : random_input((int)(next_u32() % 4));

    float *d_x, *d_dy;
    unsigned *d_flags;
    CUDA_OK(cudaMalloc((void **)&d_x, (size_t)n * sizeof *x));
    CUDA_OK(cudaMalloc((void **)&d_dy, (size_t)n * sizeof *dy));
    CUDA_OK(cudaMalloc((void **)&d_flags, (size_t)n * sizeof *flags));
    CUDA_OK(cudaMemcpy(d_x, x, (size_t)n * sizeof *x, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_dy, dy, (size_t)n * sizeof *dy, cudaMemcpyHostToDevice));
    void *args[] = {&d_x, &d_dy, (void *)&n, &d_flags};
    dim3 grid = {(unsigned)((n + 255) / 256), 1, 1}, block = {256, 1, 1};
    CUDA_OK(cudaLaunchKernel((const void *)kernel, grid, block, args, 0, 0));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(flags, d_flags, (size_t)n * sizeof *flags, cudaMemcpyDeviceToHost));

    static const char *what[] = {"silu", "silu_backward", "div"};
    long differ[3] = {0}, fallback[3] = {0}, fallback_body = 0;
    for (long i = 0; i < n; i++) {
        for (int c = 0; c < 3; c++) {
            if (flags[i] >> c & 1 && differ[c]++ < 5)
                fprintf(stderr, "%s differs at x = %a (bits %08x), dy = %a\n", what[c], x[i], f32_bits(x[i]), dy[i]);
            fallback[c] += flags[i] >> (c + 3) & 1;
        }
        /* the fast paths cover 2^-60 <= |x| < 40 (and more): 1 + exp(-x) <= 2^60 there */
        if (flags[i] & 24 && fabsf(x[i]) < 40.0f && fabsf(x[i]) >= 0x1p-60f) fallback_body++;
    }
    for (int c = 0; c < 3; c++) {
        CHECK(differ[c] == 0, "%s: %ld of %ld inputs differ from the exact function's bits", what[c], differ[c], n);
        printf("test_silu_fast: %s: %ld of %ld inputs fall back to the exact math\n", what[c], fallback[c], n);
    }
    CHECK(fallback_body == 0, "%ld inputs with 2^-60 <= |x| < 40 fell back to the exact math", fallback_body);
    CUDA_OK(cudaFree(d_x));
    CUDA_OK(cudaFree(d_dy));
    CUDA_OK(cudaFree(d_flags));
    CUDA_OK(cudaLibraryUnload(lib));
    free(x), free(dy), free(flags), free(cubin), sb_free(&src);
    return test_done("test_silu_fast");
}
