/* dtype: the one table of element types, with their sizes, names, CUDA spellings and the
 * rounding each storage type applies. The ref backend computes in double and rounds to
 * these types exactly where the plan says a value is stored or rounded. */
#ifndef MMC_DTYPE_H
#define MMC_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/*        enum   name    bytes float  CUDA storage type   precision rank (promotion) */
#define MMC_DTYPES(X)                                   \
    X(F64,  "f64",  8, 1, "double",        4)           \
    X(F32,  "f32",  4, 1, "float",         3)           \
    X(F16,  "f16",  2, 1, "__half",        2)           \
    X(BF16, "bf16", 2, 1, "__nv_bfloat16", 2)           \
    X(I32,  "i32",  4, 0, "int",           0)

typedef enum DType {
    DT_NONE = 0, /* not yet assigned by the precision pass */
#define X(e, name, bytes, is_float, cuda, rank) DT_##e,
    MMC_DTYPES(X)
#undef X
    DT_COUNT
} DType;

const char *dtype_name(DType t);
size_t dtype_size(DType t);
int dtype_is_float(DType t);
const char *dtype_cuda(DType t);
DType dtype_parse(const char *name); /* DT_NONE if unknown */
/* Native type promotion of two float types (torch.result_type for tensors of equal
 * standing): the wider wins; f16 with bf16 gives f32. */
DType dtype_promote(DType a, DType b);

/* Round a value to a storage type: IEEE round-to-nearest-even, with overflow to inf,
 * gradual underflow, and NaN kept. F64 and I32 return the value unchanged. */
double dtype_round(DType t, double v);
double dtype_load(DType t, const void *base, size_t index);
void dtype_store(DType t, void *base, size_t index, double v);

uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
float bf16_bits_to_f32(uint16_t h);

#endif
