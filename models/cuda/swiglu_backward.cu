// The backward of swiglu: the gate's and the up projection's gradients from the output's.
#include <cmath>

#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"

namespace ridgeline {
namespace cuda {
namespace {

// d_gate = dy * up * sig * (1 + gate * (1 - sig)), d_up = dy * silu(gate).
template <typename T, int V>
__global__ void swiglu_backward_kernel(const T* gate, const T* up, int64_t ld_in, const T* dy,
                                       int64_t ld_dy, T* d_gate, T* d_up, int64_t ld_out,
                                       int64_t rows, int64_t cols) {
  for_each_vector<V>(rows, cols, [&](int64_t r, int64_t c) {
    float g[V], u[V], d[V], dg[V], du[V];
    load<T, V>(gate + r * ld_in + c, g);
    load<T, V>(up + r * ld_in + c, u);
    load<T, V>(dy + r * ld_dy + c, d);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float sig = 1.0f / (1.0f + expf(-g[j]));
      dg[j] = d[j] * u[j] * sig * (1.0f + g[j] * (1.0f - sig));
      du[j] = d[j] * g[j] * sig;
    }
    store<T, V>(d_gate + r * ld_out + c, dg);
    store<T, V>(d_up + r * ld_out + c, du);
  });
}

} // namespace

void swiglu_backward(const Tensor& gate_up, const Tensor& dy, const Tensor& d_gate_up,
                     cudaStream_t s) {
  const int64_t f = dy.cols;
  if (dy.rows == 0 || f == 0) return;
  dispatch(dy.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* gate = static_cast<const T*>(gate_up.data);
    const T* pdy = static_cast<const T*>(dy.data);
    T* dgate = static_cast<T*>(d_gate_up.data);
    const bool vec = rows_vectorisable(gate_up.cols_slice(0, f)) &&
                     rows_vectorisable(gate_up.cols_slice(f, f)) && rows_vectorisable(dy) &&
                     rows_vectorisable(d_gate_up.cols_slice(0, f)) &&
                     rows_vectorisable(d_gate_up.cols_slice(f, f));
    if (vec)
      swiglu_backward_kernel<T, 8><<<grid_for(dy.rows * f / 8, kThreads), kThreads, 0, s>>>(
          gate, gate + f, gate_up.ld, pdy, dy.ld, dgate, dgate + f, d_gate_up.ld, dy.rows, f);
    else
      swiglu_backward_kernel<T, 1><<<grid_for(dy.rows * f, kThreads), kThreads, 0, s>>>(
          gate, gate + f, gate_up.ld, pdy, dy.ld, dgate, dgate + f, d_gate_up.ld, dy.rows, f);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

} // namespace cuda
} // namespace ridgeline
