// Element-wise maps of one or two tensors (MapOp): the activations, their backward, add, copy
// and axpy.
#include <cmath>

#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"

namespace ridgeline {
namespace cuda {
namespace {

struct Gelu {
  __device__ float operator()(float x, float) const { return gelu_tanh(x); }
};
struct Swiglu {
  __device__ float operator()(float gate, float up) const { return swiglu_of(gate, up); }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Copy {
  __device__ float operator()(float a, float) const { return a; }
};
// dy * gelu'(x), the derivative of the tanh approximation above.
struct GeluBackward {
  __device__ float operator()(float x, float dy) const {
    constexpr float k = 0.7978845608028654f;
    const float t = tanhf(k * (x + 0.044715f * x * x * x));
    const float dt = (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * dt);
  }
};
struct Axpy {
  float alpha;
  __device__ float operator()(float x, float y) const { return y + alpha * x; }
};

template <typename T, int V, typename F>
__global__ void map_kernel(const T* a, int64_t lda, const T* b, int64_t ldb, T* y, int64_t ldy,
                           int64_t rows, int64_t cols, F f) {
  allow_dependents();
  wait_for_primary();
  for_each_vector<V>(rows, cols, [&](int64_t r, int64_t c) {
    float va[V], vb[V], vy[V];
    load<T, V>(a + r * lda + c, va);
    load<T, V>(b + r * ldb + c, vb);
#pragma unroll
    for (int j = 0; j < V; ++j)
      vy[j] = f(va[j], vb[j]);
    store<T, V>(y + r * ldy + c, vy);
  });
}

template <typename T, typename F>
void launch_map(const Tensor& a, const Tensor& b, const Tensor& y, F f, Launch where) {
  if (y.rows == 0 || y.cols == 0) return;
  const T* pa = static_cast<const T*>(a.data);
  const T* pb = static_cast<const T*>(b.data);
  T* py = static_cast<T*>(y.data);
  if (rows_vectorisable(a) && rows_vectorisable(b) && rows_vectorisable(y))
    launch_kernel(map_kernel<T, 8, F>, grid_for(y.elements() / 8, kThreads), kThreads, 0, where, pa,
                  a.ld, pb, b.ld, py, y.ld, y.rows, y.cols, f);
  else
    launch_kernel(map_kernel<T, 1, F>, grid_for(y.elements(), kThreads), kThreads, 0, where, pa,
                  a.ld, pb, b.ld, py, y.ld, y.rows, y.cols, f);
}

} // namespace

void map(MapOp op, const Tensor& a, const Tensor& b, const Tensor& y, Launch where, float alpha) {
  dispatch(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
    case MapOp::gelu:
      launch_map<T>(a, a, y, Gelu{}, where);
      break;
    case MapOp::swiglu:
      launch_map<T>(a, b, y, Swiglu{}, where);
      break;
    case MapOp::add:
      launch_map<T>(a, b, y, Add{}, where);
      break;
    case MapOp::copy:
      launch_map<T>(a, a, y, Copy{}, where);
      break;
    case MapOp::gelu_backward:
      launch_map<T>(a, b, y, GeluBackward{}, where);
      break;
    case MapOp::axpy:
      launch_map<T>(a, b, y, Axpy{alpha}, where);
      break;
    }
  });
}

} // namespace cuda
} // namespace ridgeline
