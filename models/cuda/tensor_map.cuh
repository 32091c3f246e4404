// TMA descriptors of the attention operands that the sm90 kernels load (a build with sm_90a
// code).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "models/cuda/common.cuh"

namespace ridgeline {
namespace cuda {

#if defined(RIDGELINE_SM90A)
/// The driver's cuTensorMapEncodeTiled, looked up once per process.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder();

/// A TMA map of one attention operand as [batch][rows][cols] with `batch_rows` rows between
/// sequences: 64-column x `box_rows`-row boxes, 128-byte swizzle, rows from `rows` on read as
/// zeros.
template <typename T>
CUtensorMap operand_map(const Tensor& t, int64_t rows, int64_t batch, int64_t batch_rows,
                        uint32_t box_rows) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(t.cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(t.ld) * sizeof(T),
                                 static_cast<cuuint64_t>(batch_rows * t.ld) * sizeof(T)};
  const cuuint32_t box[3] = {64, box_rows, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r =
      tensor_map_encoder()(&map,
                           std::is_same_v<T, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                           3, t.data, dims, strides, box, element_strides,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("fused attention: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) +
                ")");
  return map;
}
#endif

} // namespace cuda
} // namespace ridgeline
