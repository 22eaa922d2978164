/* dtype: see dtype.h. */
#include "dtype.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t bytes;
    int is_float;
    const char *cuda;
    int rank;
} dtypes[DT_COUNT] = {
    [DT_NONE] = {"?", 0, 0, "void", -1},
#define X(e, name, bytes, is_float, cuda, rank) [DT_##e] = {name, bytes, is_float, cuda, rank},
    MMC_DTYPES(X)
#undef X
};

const char *dtype_name(DType t) { return t < DT_COUNT ? dtypes[t].name : "?"; }
size_t dtype_size(DType t) { return t < DT_COUNT ? dtypes[t].bytes : 0; }
int dtype_is_float(DType t) { return t < DT_COUNT && dtypes[t].is_float; }
const char *dtype_cuda(DType t) { return t < DT_COUNT ? dtypes[t].cuda : "void"; }

DType dtype_parse(const char *name) {
    for (int t = 1; t < DT_COUNT; t++)
        if (strcmp(dtypes[t].name, name) == 0) return (DType)t;
    return DT_NONE;
}

DType dtype_promote(DType a, DType b) {
    if (a == DT_NONE) return b;
    if (b == DT_NONE) return a;
    if (a == b) return a;
    if (!dtype_is_float(a)) return b;
    if (!dtype_is_float(b)) return a;
    if (dtypes[a].rank == dtypes[b].rank) return DT_F32; /* f16 with bf16 */
    return dtypes[a].rank > dtypes[b].rank ? a : b;
}

/* ---- bit conversions (round to nearest even) */

uint16_t f32_to_f16_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: overflow */
    if (absx < 0x38800000u) {                                    /* below 2^-14: subnormal or zero */
        if (absx < 0x33000000u) return (uint16_t)sign;           /* below half the smallest subnormal */
        uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
        /* value = mant * 2^(exp-150) and the subnormal unit is 2^-24: result = mant >> (126-exp) */
        int shift = 126 - (int)(absx >> 23);
        uint32_t r = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((absx >> 13) - (112u << 10)); /* rebias exponent 127 -> 15 */
    uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

float f16_bits_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    } else {
        x = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t f32_to_bf16_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float bf16_bits_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* f16/bf16 values are produced from an f32 value, as on the GPU (float opmath, then the
 * conversion); a double is first rounded to f32. */
double dtype_round(DType t, double v) {
    switch (t) {
    case DT_F32: return (double)(float)v;
    case DT_F16: return f16_bits_to_f32(f32_to_f16_bits((float)v));
    case DT_BF16: return bf16_bits_to_f32(f32_to_bf16_bits((float)v));
    default: return v;
    }
}

double dtype_load(DType t, const void *base, size_t i) {
    switch (t) {
    case DT_F64: return ((const double *)base)[i];
    case DT_F32: return ((const float *)base)[i];
    case DT_F16: return f16_bits_to_f32(((const uint16_t *)base)[i]);
    case DT_BF16: return bf16_bits_to_f32(((const uint16_t *)base)[i]);
    case DT_I32: return ((const int32_t *)base)[i];
    default: return NAN;
    }
}

void dtype_store(DType t, void *base, size_t i, double v) {
    switch (t) {
    case DT_F64: ((double *)base)[i] = v; break;
    case DT_F32: ((float *)base)[i] = (float)v; break;
    case DT_F16: ((uint16_t *)base)[i] = f32_to_f16_bits((float)v); break;
    case DT_BF16: ((uint16_t *)base)[i] = f32_to_bf16_bits((float)v); break;
    case DT_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    default: break;
    }
}
