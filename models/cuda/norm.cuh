// The row statistics the layer and RMS norm kernels (norm.cu) and their backward
// (norm_backward.cu) both compute. In an unnamed namespace, as elementwise.cuh.
#pragma once

#include "models/cuda/block_reduce.cuh"
#include "models/cuda/elementwise.cuh"

namespace ridgeline {
namespace cuda {
namespace {

// The block's row statistics, every thread getting them: the mean (layer norm; 0 for RMS norm)
// and 1 / sqrt(mean of squares about it + eps). Two passes over the row.
template <typename T, int V, bool kLayer>
__device__ void row_statistics(const T* in, int64_t cols, float eps, float* shared, float& mu,
                               float& inv) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  mu = 0.0f;
  if constexpr (kLayer) {
    float sum = 0.0f;
    for (int64_t c = threadIdx.x * V; c < cols; c += step) {
      float v[V];
      load<T, V>(in + c, v);
#pragma unroll
      for (int j = 0; j < V; ++j)
        sum += v[j];
    }
    mu = block_sum(sum, shared) / static_cast<float>(cols);
  }
  float sq = 0.0f;
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V];
    load<T, V>(in + c, v);
#pragma unroll
    for (int j = 0; j < V; ++j)
      sq += (v[j] - mu) * (v[j] - mu);
  }
  inv = rsqrtf(block_sum(sq, shared) / static_cast<float>(cols) + eps);
}

} // namespace
} // namespace cuda
} // namespace ridgeline
