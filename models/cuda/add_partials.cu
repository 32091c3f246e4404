// y = a + round(b + c): two partial sums added as an add of the two would store them, then added
// to a, in one pass.
#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"

namespace ridgeline {
namespace cuda {
namespace {

// y = a + round(b + c): two partial sums added, then added to a, in one pass.
template <typename T, int V>
__global__ void add_partials_kernel(const T* a, int64_t lda, const T* b, int64_t ldb, const T* c,
                                    int64_t ldc, T* y, int64_t ldy, int64_t rows, int64_t cols) {
  allow_dependents();
  wait_for_primary();
  for_each_vector<V>(rows, cols, [&](int64_t r, int64_t col) {
    float va[V], vb[V];
    load<T, V>(a + r * lda + col, va);
    load<T, V>(b + r * ldb + col, vb);
    add_rounded<T, V>(c + r * ldc + col, vb);
#pragma unroll
    for (int j = 0; j < V; ++j)
      va[j] += vb[j];
    store<T, V>(y + r * ldy + col, va);
  });
}

} // namespace

void add_partials(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& y,
                  Launch where) {
  if (y.rows == 0 || y.cols == 0) return;
  dispatch(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a.data);
    const T* pb = static_cast<const T*>(b.data);
    const T* pc = static_cast<const T*>(c.data);
    T* py = static_cast<T*>(y.data);
    if (rows_vectorisable(a) && rows_vectorisable(b) && rows_vectorisable(c) &&
        rows_vectorisable(y))
      launch_kernel(add_partials_kernel<T, 8>, grid_for(y.elements() / 8, kThreads), kThreads, 0,
                    where, pa, a.ld, pb, b.ld, pc, c.ld, py, y.ld, y.rows, y.cols);
    else
      launch_kernel(add_partials_kernel<T, 1>, grid_for(y.elements(), kThreads), kThreads, 0, where,
                    pa, a.ld, pb, b.ld, pc, c.ld, py, y.ld, y.rows, y.cols);
  });
}

} // namespace cuda
} // namespace ridgeline
