/* tensor_map: the TMA descriptors (CUtensorMap) of the sm_90a GEMM kernels, encoded through
 * the driver entry point the CUDA runtime hands out, so mmc still links no libcuda. */
#ifndef MMC_TENSOR_MAP_H
#define MMC_TENSOR_MAP_H
#include <stdint.h>

#include "dtype.h"

/* what a kernel receives: CUtensorMap's 128 opaque bytes, 64-byte aligned */
typedef struct TensorMap {
    _Alignas(64) uint64_t opaque[16];
} TensorMap;

/* A row-major matrix of `rows` rows of `cols` elements of `t`, rows `ld` elements apart from
 * `base`, read in boxes of box_rows x box_cols (box_cols * the element size = 128 bytes)
 * into 128-byte-swizzled shared memory; elements past the edges read as zeros. NULL, or the
 * reason it cannot be made. */
const char *tensor_map_2d(TensorMap *out, DType t, void *base, int64_t rows, int64_t cols, int64_t ld, int box_rows,
                          int box_cols);
#endif
