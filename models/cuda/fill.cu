// Tensors filled with the counter-based generator's numbers or one value, rounded to the dtype.
#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"
#include "models/generator.hpp"

namespace ridgeline {
namespace cuda {
namespace {

struct FillRandom {
  GenKey key;
  int64_t row0;
  int64_t col0;
  __device__ float operator()(int64_t r, int64_t c) const {
    return generate(key, row0 + r, col0 + c);
  }
};

struct FillValue {
  float value;
  __device__ float operator()(int64_t, int64_t) const { return value; }
};

template <typename T, int V, typename F>
__global__ void fill_kernel(T* y, int64_t ld, int64_t rows, int64_t cols, F f) {
  for_each_vector<V>(rows, cols, [&](int64_t r, int64_t c) {
    float v[V];
#pragma unroll
    for (int j = 0; j < V; ++j)
      v[j] = f(r, c + j);
    store<T, V>(y + r * ld + c, v);
  });
}

template <typename T, typename F> void launch_fill(const Tensor& t, F f, cudaStream_t s) {
  if (t.rows == 0 || t.cols == 0) return;
  T* y = static_cast<T*>(t.data);
  if (rows_vectorisable(t))
    fill_kernel<T, 8>
        <<<grid_for(t.elements() / 8, kThreads), kThreads, 0, s>>>(y, t.ld, t.rows, t.cols, f);
  else
    fill_kernel<T, 1>
        <<<grid_for(t.elements(), kThreads), kThreads, 0, s>>>(y, t.ld, t.rows, t.cols, f);
  RIDGELINE_CHECK(cudaGetLastError());
}

} // namespace

void fill_random(const Tensor& t, const GenKey& key, int64_t row0, int64_t col0, cudaStream_t s) {
  dispatch(t.dtype, [&](auto tag) {
    launch_fill<decltype(tag)>(t, FillRandom{key, row0, col0}, s);
  });
}

void fill_value(const Tensor& t, float value, cudaStream_t s) {
  dispatch(t.dtype, [&](auto tag) { launch_fill<decltype(tag)>(t, FillValue{value}, s); });
}

} // namespace cuda
} // namespace ridgeline
