// Layer norm and RMS norm, one block per row, fp32 sums; optionally the residual add (of one or
// two partial sums) before it, fused.
#include <cstdint>

#include "models/cuda/block_reduce.cuh"
#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"
#include "models/cuda/norm.cuh"

namespace ridgeline {
namespace cuda {
namespace {

// One block per row: the row is read up to three times, the later passes from L1/L2. kAdd: the
// row normalised is first x + r, stored rounded into `sum` (the residual stream) and read back
// from there, so that the result is the unfused add's then norm's, bit for bit. With r2 too,
// x + round(r + r2): the add of two partial sums, then the residual add, in one pass.
template <typename T, int V, bool kLayer, bool kAdd>
__global__ void norm_kernel(const T* x, int64_t ldx, const T* r, int64_t ldr, const T* r2,
                            int64_t ldr2, T* sum, int64_t lds, const T* gamma, const T* beta, T* y,
                            int64_t ldy, int64_t cols, float eps) {
  allow_dependents();
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  // The norm's parameters: a thread's first vector (most rows take one a thread) is loaded
  // before the wait, beside the kernel before. Only a forward step launches this kernel as a
  // programmatic dependent, and a forward step writes no weights.
  const int64_t c0 = threadIdx.x * V;
  float g0[V], b0[V];
  if (c0 < cols) {
    load<T, V>(gamma + c0, g0);
    if constexpr (kLayer) load<T, V>(beta + c0, b0);
  }
  wait_for_primary();
  __shared__ float shared[32];
  const T* in = x + blockIdx.x * ldx;
  T* out = y + blockIdx.x * ldy;
  if constexpr (kAdd) {
    const T* add = r + blockIdx.x * ldr;
    const T* add2 = r2 != nullptr ? r2 + blockIdx.x * ldr2 : nullptr;
    T* stream = sum + blockIdx.x * lds;
    for (int64_t c = threadIdx.x * V; c < cols; c += step) {
      float a[V], b[V];
      load<T, V>(in + c, a);
      load<T, V>(add + c, b);
      if (add2 != nullptr) add_rounded<T, V>(add2 + c, b);
#pragma unroll
      for (int j = 0; j < V; ++j)
        a[j] += b[j];
      store<T, V>(stream + c, a);
    }
    __syncthreads(); // the block's stores are visible to the block's loads below
    in = stream;
  }
  float mu = 0.0f, inv = 0.0f;
  row_statistics<T, V, kLayer>(in, cols, eps, shared, mu, inv);
  for (int64_t c = c0; c < cols; c += step) {
    float v[V], g[V], b[V], o[V];
    load<T, V>(in + c, v);
    if (c == c0) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        g[j] = g0[j];
        b[j] = kLayer ? b0[j] : 0.0f;
      }
    } else {
      load<T, V>(gamma + c, g);
      if constexpr (kLayer) load<T, V>(beta + c, b);
    }
#pragma unroll
    for (int j = 0; j < V; ++j)
      o[j] = (v[j] - mu) * inv * g[j] + (kLayer ? b[j] : 0.0f);
    store<T, V>(out + c, o);
  }
}

} // namespace

void norm(const Tensor& x, const Tensor& gamma, const Tensor* beta, const Tensor& y, float eps,
          Launch where, const Tensor* residual, const Tensor* sum, const Tensor* residual2) {
  if (x.rows == 0 || x.cols == 0) return;
  dispatch(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    const bool vec =
        rows_vectorisable(x) && rows_vectorisable(y) &&
        reinterpret_cast<uintptr_t>(gamma.data) % 16 == 0 &&
        (beta == nullptr || reinterpret_cast<uintptr_t>(beta->data) % 16 == 0) &&
        (residual == nullptr || (rows_vectorisable(*residual) && rows_vectorisable(*sum))) &&
        (residual2 == nullptr || rows_vectorisable(*residual2));
    // Enough threads to cover a row once with vectors, at most 1024.
    const int64_t want = (x.cols / (vec ? 8 : 1) + 31) / 32 * 32;
    const int threads = static_cast<int>(want < 64 ? 64 : (want > 1024 ? 1024 : want));
    const dim3 grid(static_cast<unsigned>(x.rows));
    const T* px = static_cast<const T*>(x.data);
    const T* pg = static_cast<const T*>(gamma.data);
    const T* pb = beta ? static_cast<const T*>(beta->data) : nullptr;
    T* py = static_cast<T*>(y.data);
    const T* pr = residual ? static_cast<const T*>(residual->data) : nullptr;
    T* ps = sum ? static_cast<T*>(sum->data) : nullptr;
    const T* pr2 = residual2 ? static_cast<const T*>(residual2->data) : nullptr;
    const int64_t ldr = residual ? residual->ld : 0, lds = sum ? sum->ld : 0;
    const int64_t ldr2 = residual2 ? residual2->ld : 0;
    auto launch = [&](auto kernel) {
      launch_kernel(kernel, grid, threads, 0, where, px, x.ld, pr, ldr, pr2, ldr2, ps, lds, pg, pb,
                    py, y.ld, x.cols, eps);
    };
    const bool layer = beta != nullptr, add = residual != nullptr;
    if (vec)
      layer ? (add ? launch(norm_kernel<T, 8, true, true>) : launch(norm_kernel<T, 8, true, false>))
            : (add ? launch(norm_kernel<T, 8, false, true>)
                   : launch(norm_kernel<T, 8, false, false>));
    else
      layer ? (add ? launch(norm_kernel<T, 1, true, true>) : launch(norm_kernel<T, 1, true, false>))
            : (add ? launch(norm_kernel<T, 1, false, true>)
                   : launch(norm_kernel<T, 1, false, false>));
  });
}

} // namespace cuda
} // namespace ridgeline
