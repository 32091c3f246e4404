// The row gather and weighted row scatter-add of an MoE layer's dispatch and combine, and the
// row scatter of a mixed step's cache appends: one CTA per row moved, its threads across the row's
// columns, 16-byte vectors where rows allow.
#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"

namespace ridgeline {
namespace cuda {
namespace {

// One CTA per row moved: row r of x to row r of out, where index[r] names the source row of a
// gather (Scatter false) or the destination row of a scatter (Scatter true).
template <typename T, int V, bool Scatter>
__global__ void move_rows_kernel(const T* x, int64_t ldx, const int64_t* index, T* out, int64_t ldo,
                                 int64_t cols) {
  const int64_t r = blockIdx.x;
  const T* src = x + (Scatter ? r : index[r]) * ldx;
  T* dst = out + (Scatter ? index[r] : r) * ldo;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < cols;
       c += static_cast<int64_t>(blockDim.x) * V) {
    float v[V];
    load<T, V>(src + c, v);
    store<T, V>(dst + c, v);
  }
}

// `rows` rows of x to out through move_rows_kernel, 16-byte vectors where both allow.
template <bool Scatter>
void move_rows(const Tensor& x, const int64_t* index, const Tensor& out, int64_t rows, int64_t cols,
               cudaStream_t s) {
  if (rows == 0 || cols == 0) return;
  dispatch(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.data);
    T* po = static_cast<T*>(out.data);
    const dim3 grid(static_cast<unsigned>(rows));
    if (rows_vectorisable(x) && rows_vectorisable(out))
      launch_kernel(move_rows_kernel<T, 8, Scatter>, grid, kThreads, 0, s, px, x.ld, index, po,
                    out.ld, cols);
    else
      launch_kernel(move_rows_kernel<T, 1, Scatter>, grid, kThreads, 0, s, px, x.ld, index, po,
                    out.ld, cols);
  });
}

// Destination d = dest[g] of CTA g: y[d] + sum of weight[j] * rows[src[j]] over j in
// [offsets[g], offsets[g + 1]), in j's order, summed in fp32 and rounded once.
template <typename T, int V>
__global__ void scatter_add_rows_kernel(const T* rows, int64_t ldr, const int64_t* src,
                                        const int64_t* dest, const int64_t* offsets,
                                        const float* weight, T* y, int64_t ldy, int64_t cols) {
  const int64_t g = blockIdx.x;
  T* out = y + dest[g] * ldy;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * V; c < cols;
       c += static_cast<int64_t>(blockDim.x) * V) {
    float acc[V], v[V];
    load<T, V>(out + c, acc);
    for (int64_t j = offsets[g]; j < offsets[g + 1]; ++j) {
      load<T, V>(rows + src[j] * ldr + c, v);
#pragma unroll
      for (int i = 0; i < V; ++i)
        acc[i] += weight[j] * v[i];
    }
    store<T, V>(out + c, acc);
  }
}

} // namespace

void gather_rows(const Tensor& x, const int64_t* index, const Tensor& out, cudaStream_t s) {
  move_rows<false>(x, index, out, out.rows, out.cols, s);
}

void scatter_rows(const Tensor& rows, const int64_t* index, const Tensor& out, cudaStream_t s) {
  move_rows<true>(rows, index, out, rows.rows, rows.cols, s);
}

void scatter_add_rows(const Tensor& rows, const int64_t* src, const int64_t* dest,
                      const int64_t* offsets, const float* weight, int64_t groups, const Tensor& y,
                      cudaStream_t s) {
  if (groups == 0 || y.cols == 0) return;
  dispatch(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pr = static_cast<const T*>(rows.data);
    T* py = static_cast<T*>(y.data);
    const dim3 grid(static_cast<unsigned>(groups));
    if (rows_vectorisable(rows) && rows_vectorisable(y))
      launch_kernel(scatter_add_rows_kernel<T, 8>, grid, kThreads, 0, s, pr, rows.ld, src, dest,
                    offsets, weight, py, y.ld, y.cols);
    else
      launch_kernel(scatter_add_rows_kernel<T, 1>, grid, kThreads, 0, s, pr, rows.ld, src, dest,
                    offsets, weight, py, y.ld, y.cols);
  });
}

} // namespace cuda
} // namespace ridgeline
