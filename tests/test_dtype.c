/* The dtype table's conversions, which the ref backend's bit-level agreement with the GPU
 * rests on: every f16 value survives f16 -> f32 -> f16; f32 -> f16 and f32 -> bf16 give the
 * nearest value with ties to even (checked against the neighbours by brute force, over
 * random floats of every magnitude and the edge cases: overflow threshold, subnormals). */
#include "test_util.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* h is the correctly rounded value of x among all values of the format */
static void check_nearest(const char *fmt, float x, uint16_t h, float (*to_f32)(uint16_t)) {
    if (isnan(x)) {
        CHECK(isnan(to_f32(h)), "%s: nan became %g", fmt, to_f32(h));
        return;
    }
    double v = to_f32(h);
    if (isinf(v)) { /* overflow is right only if x is at least halfway past the largest finite value */
        uint16_t maxh = (uint16_t)((h & 0x8000) | ((h & 0x7fff) - 1));
        double m = to_f32(maxh), next = m + (m - to_f32((uint16_t)(maxh - 1)));
        CHECK(fabs((double)x) >= (fabs(m) + fabs(next)) / 2, "%s: %.9g overflowed", fmt, x);
        return;
    }
    for (int d = -1; d <= 1; d += 2) {
        uint16_t nb = (uint16_t)(h + d);
        if (((h & 0x7fff) == 0 && d < 0)) nb = (uint16_t)((h ^ 0x8000) + 1); /* across zero */
        double w = to_f32(nb);
        if (isnan(w) || isinf(w)) continue;
        double e_h = fabs((double)x - v), e_n = fabs((double)x - w);
        CHECK(e_h < e_n || (e_h == e_n && (h & 1) == 0) || v == w, "%s: %.9g -> %.9g but %.9g is nearer", fmt, x, v, w);
    }
}

int main(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = f16_bits_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        CHECK(f32_to_f16_bits(f) == h, "f16 %04x -> %g -> %04x", h, f, f32_to_f16_bits(f));
        float b = bf16_bits_to_f32((uint16_t)h);
        if (!isnan(b)) CHECK(f32_to_bf16_bits(b) == h, "bf16 %04x -> %g -> %04x", h, b, f32_to_bf16_bits(b));
    }
    const float edges[] = {65504.0f, 65519.99f, 65520.0f, 65536.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1.8p-24f,
                           0x1p-14f, 0x1.ffcp-15f, 1.0f + 0x1p-11f, 1.0f + 0x1.8p-11f, -2049.0f, 3e38f, 1e-40f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        check_nearest("f16", edges[i], f32_to_f16_bits(edges[i]), f16_bits_to_f32);
        check_nearest("bf16", edges[i], f32_to_bf16_bits(edges[i]), bf16_bits_to_f32);
    }
    CHECK(f32_to_f16_bits(0x1p-25f) == 0, "2^-25 ties to even: zero");
    CHECK(f32_to_f16_bits(65520.0f) == 0x7c00, "65520 rounds to inf");
    CHECK(f32_to_f16_bits(65519.99f) == 0x7bff, "65519.99 rounds to 65504");
    for (int i = 0; i < 2000000; i++) {
        float x = from_bits((uint32_t)(test_uniform() * 4294967296.0));
        check_nearest("f16", x, f32_to_f16_bits(x), f16_bits_to_f32);
        check_nearest("bf16", x, f32_to_bf16_bits(x), bf16_bits_to_f32);
        if (test_failures > 20) break;
    }
    CHECK(dtype_round(DT_F16, 0.1) == (double)f16_bits_to_f32(f32_to_f16_bits(0.1f)), "dtype_round f16");
    CHECK(dtype_promote(DT_F16, DT_F32) == DT_F32 && dtype_promote(DT_F16, DT_BF16) == DT_F32 &&
              dtype_promote(DT_BF16, DT_BF16) == DT_BF16 && dtype_promote(DT_F32, DT_F64) == DT_F64 &&
              dtype_promote(DT_I32, DT_F16) == DT_F16,
          "promotion table");
    return test_done("test_dtype");
}
