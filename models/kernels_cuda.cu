// Element-wise, normalisation, rotary and softmax kernels of the CUDA backend: fp32 math on
// bf16/fp16 storage, 16-byte vector accesses where rows allow, scalar accesses otherwise.
#include <cmath>

#include "core/error.hpp"
#include "models/cuda_common.cuh"
#include "models/generator.hpp"

namespace ridgeline {
namespace cuda {
namespace {

constexpr int kThreads = 256;

template <typename T, int V> __device__ __forceinline__ void load(const T* p, float (&v)[V]) {
  if constexpr (V == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      v[i] = to_float(e[i]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i)
      v[i] = to_float(p[i]);
  }
}

template <typename T, int V> __device__ __forceinline__ void store(T* p, const float (&v)[V]) {
  if constexpr (V == 8) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      e[i] = from_float<T>(v[i]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i)
      p[i] = from_float<T>(v[i]);
  }
}

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
  const int64_t per_row = cols / V;
  const int64_t total = rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row;
    const int64_t c = (i - r * per_row) * V;
    float v[V];
#pragma unroll
    for (int j = 0; j < V; ++j)
      v[j] = f(r, c + j);
    store<T, V>(y + r * ld + c, v);
  }
}

struct Gelu {
  __device__ float operator()(float x, float) const {
    constexpr float k = 0.7978845608028654f; // sqrt(2 / pi), as the host backend
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
  }
};
struct Swiglu {
  __device__ float operator()(float gate, float up) const {
    return gate / (1.0f + expf(-gate)) * up;
  }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <typename T, int V, typename F>
__global__ void map_kernel(const T* a, int64_t lda, const T* b, int64_t ldb, T* y, int64_t ldy,
                           int64_t rows, int64_t cols, F f) {
  const int64_t per_row = cols / V;
  const int64_t total = rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row;
    const int64_t c = (i - r * per_row) * V;
    float va[V], vb[V], vy[V];
    load<T, V>(a + r * lda + c, va);
    load<T, V>(b + r * ldb + c, vb);
#pragma unroll
    for (int j = 0; j < V; ++j)
      vy[j] = f(va[j], vb[j]);
    store<T, V>(y + r * ldy + c, vy);
  }
}

/// Sum over the block; every thread gets the result. `shared` holds 32 floats.
__device__ float block_sum(float v, float* shared) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads(); // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? shared[lane] : 0.0f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float block_max(float v, float* shared) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? shared[lane] : -INFINITY;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One block per row: the row is read up to three times, the later passes from L1/L2.
template <typename T, int V, bool kLayer>
__global__ void norm_kernel(const T* x, int64_t ldx, const T* gamma, const T* beta, T* y,
                            int64_t ldy, int64_t cols, float eps) {
  __shared__ float shared[32];
  const T* in = x + blockIdx.x * ldx;
  T* out = y + blockIdx.x * ldy;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  float mu = 0.0f;
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
  const float inv = rsqrtf(block_sum(sq, shared) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V], g[V], b[V], o[V];
    load<T, V>(in + c, v);
    load<T, V>(gamma + c, g);
    if constexpr (kLayer) load<T, V>(beta + c, b);
#pragma unroll
    for (int j = 0; j < V; ++j)
      o[j] = (v[j] - mu) * inv * g[j] + (kLayer ? b[j] : 0.0f);
    store<T, V>(out + c, o);
  }
}

// One thread per (row, rotation pair); the angle is computed in double like the host reference
// because positions reach tens of thousands of radians.
template <typename T>
__global__ void rotary_kernel(T* x, int64_t ld, int64_t rows, int64_t heads, int64_t head_dim,
                              int64_t seq_len, int64_t pos0, float theta) {
  const int64_t half = head_dim / 2;
  const int64_t total = rows * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / half;
    const int64_t i = idx - r * half;
    const double pos = static_cast<double>(pos0 + r % seq_len);
    const double freq = pow(static_cast<double>(theta),
                            -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    double sd, cd;
    sincos(pos * freq, &sd, &cd);
    const float cs = static_cast<float>(cd), sn = static_cast<float>(sd);
    T* row = x + r * ld;
    for (int64_t h = 0; h < heads; ++h) {
      T* v = row + h * head_dim;
      const float x1 = to_float(v[i]), x2 = to_float(v[i + half]);
      v[i] = from_float<T>(x1 * cs - x2 * sn);
      v[i + half] = from_float<T>(x2 * cs + x1 * sn);
    }
  }
}

template <typename T>
__global__ void causal_softmax_kernel(const float* scores, T* probs, int64_t seq, int64_t context,
                                      float scale) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const float* in = scores + row * context;
  T* out = probs + row * context;
  const int64_t last = context - seq + row % seq; // last visible key of this query
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x)
    mx = fmaxf(mx, in[j] * scale);
  mx = block_max(mx, shared);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x)
    sum += expf(in[j] * scale - mx);
  const float inv = 1.0f / block_sum(sum, shared);
  for (int64_t j = threadIdx.x; j < context; j += blockDim.x)
    out[j] = from_float<T>(j <= last ? expf(in[j] * scale - mx) * inv : 0.0f);
}

template <typename Fn> void dispatch(DType dtype, Fn&& fn) {
  if (dtype == DType::bf16)
    fn(__nv_bfloat16{});
  else if (dtype == DType::f16)
    fn(__half{});
  else
    throw Error("CUDA kernels take bf16 or fp16 tensors, got " + std::string(dtype_name(dtype)));
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

template <typename T, typename F>
void launch_map(const Tensor& a, const Tensor& b, const Tensor& y, F f, cudaStream_t s) {
  if (y.rows == 0 || y.cols == 0) return;
  const T* pa = static_cast<const T*>(a.data);
  const T* pb = static_cast<const T*>(b.data);
  T* py = static_cast<T*>(y.data);
  if (rows_vectorisable(a) && rows_vectorisable(b) && rows_vectorisable(y))
    map_kernel<T, 8><<<grid_for(y.elements() / 8, kThreads), kThreads, 0, s>>>(
        pa, a.ld, pb, b.ld, py, y.ld, y.rows, y.cols, f);
  else
    map_kernel<T, 1><<<grid_for(y.elements(), kThreads), kThreads, 0, s>>>(pa, a.ld, pb, b.ld, py,
                                                                           y.ld, y.rows, y.cols, f);
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

void map(MapOp op, const Tensor& a, const Tensor& b, const Tensor& y, cudaStream_t s) {
  dispatch(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
    case MapOp::gelu:
      launch_map<T>(a, a, y, Gelu{}, s);
      break;
    case MapOp::swiglu:
      launch_map<T>(a, b, y, Swiglu{}, s);
      break;
    case MapOp::add:
      launch_map<T>(a, b, y, Add{}, s);
      break;
    }
  });
}

void norm(const Tensor& x, const Tensor& gamma, const Tensor* beta, const Tensor& y, float eps,
          cudaStream_t s) {
  if (x.rows == 0 || x.cols == 0) return;
  dispatch(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    const bool vec = rows_vectorisable(x) && rows_vectorisable(y) &&
                     reinterpret_cast<uintptr_t>(gamma.data) % 16 == 0 &&
                     (beta == nullptr || reinterpret_cast<uintptr_t>(beta->data) % 16 == 0);
    // Enough threads to cover a row once with vectors, at most 1024.
    const int64_t want = (x.cols / (vec ? 8 : 1) + 31) / 32 * 32;
    const int threads = static_cast<int>(want < 64 ? 64 : (want > 1024 ? 1024 : want));
    const dim3 grid(static_cast<unsigned>(x.rows));
    const T* px = static_cast<const T*>(x.data);
    const T* pg = static_cast<const T*>(gamma.data);
    const T* pb = beta ? static_cast<const T*>(beta->data) : nullptr;
    T* py = static_cast<T*>(y.data);
    if (beta != nullptr && vec)
      norm_kernel<T, 8, true><<<grid, threads, 0, s>>>(px, x.ld, pg, pb, py, y.ld, x.cols, eps);
    else if (beta != nullptr)
      norm_kernel<T, 1, true><<<grid, threads, 0, s>>>(px, x.ld, pg, pb, py, y.ld, x.cols, eps);
    else if (vec)
      norm_kernel<T, 8, false><<<grid, threads, 0, s>>>(px, x.ld, pg, pb, py, y.ld, x.cols, eps);
    else
      norm_kernel<T, 1, false><<<grid, threads, 0, s>>>(px, x.ld, pg, pb, py, y.ld, x.cols, eps);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

void rotary(const Tensor& x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
            float theta, cudaStream_t s) {
  if (x.rows == 0 || heads == 0) return;
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    rotary_kernel<T><<<grid_for(x.rows * head_dim / 2, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(x.data), x.ld, x.rows, heads, head_dim, seq_len, pos0, theta);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

void causal_softmax(const float* scores, void* probs, DType dtype, int64_t rows, int64_t seq,
                    int64_t context, float scale, cudaStream_t s) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    causal_softmax_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
        scores, static_cast<T*>(probs), seq, context, scale);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

} // namespace cuda
} // namespace ridgeline
