/* tensor_map: cuTensorMapEncodeTiled through cudaGetDriverEntryPointByVersion. */
#include "tensor_map.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

typedef CUresult (*EncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

_Static_assert(sizeof(TensorMap) == sizeof(CUtensorMap), "a TensorMap is a CUtensorMap");

const char *tensor_map_2d(TensorMap *out, DType t, void *base, int64_t rows, int64_t cols, int64_t ld, int box_rows,
                          int box_cols) {
    static EncodeTiled encode;
    if (!encode) {
        enum cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000, cudaEnableDefault,
                                             &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess || !encode)
            return "the driver has no cuTensorMapEncodeTiled";
    }
    CUtensorMapDataType type;
    switch (t) {
    case DT_F16: type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; break;
    case DT_BF16: type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; break;
    default: return "a tensor map is for f16 or bf16 matrices";
    }
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)ld * dtype_size(t)};
    cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows}, step[2] = {1, 1};
    CUresult r = encode((CUtensorMap *)out, type, 2, base, dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? NULL : "cuTensorMapEncodeTiled refused the matrix (its address, row stride or shape)";
}
