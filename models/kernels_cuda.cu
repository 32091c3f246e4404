// Element-wise, normalisation, rotary and softmax kernels of the CUDA backend: fp32 math on
// bf16/fp16 storage, 16-byte vector accesses where rows allow, scalar accesses otherwise.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "models/cuda/common.cuh"
#include "models/generator.hpp"

namespace ridgeline {
namespace cuda {
namespace {

constexpr int kThreads = 256;

template <typename T, int V> __device__ __forceinline__ void load(const T* p, float (&v)[V]) {
  if constexpr (V == 8) {
    unpack8<T>(*reinterpret_cast<const uint4*>(p), v);
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

/// body(r, c) for every V-element vector of a rows x cols tensor (row r, first column c; cols a
/// multiple of V), spread over the grid with a grid-stride loop. The row of a vector is found
/// with 32-bit division where the tensor allows it: a 64-bit one is a long software sequence.
template <int V, typename Body>
__device__ __forceinline__ void for_each_vector(int64_t rows, int64_t cols, Body&& body) {
  const int64_t per_row = cols / V;
  const int64_t total = rows * per_row;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (total + stride <= INT32_MAX) {
    const uint32_t n = static_cast<uint32_t>(per_row);
    for (uint32_t i = static_cast<uint32_t>(first); i < static_cast<uint32_t>(total);
         i += static_cast<uint32_t>(stride)) {
      const uint32_t r = i / n;
      body(static_cast<int64_t>(r), static_cast<int64_t>(i - r * n) * V);
    }
    return;
  }
  for (int64_t i = first; i < total; i += stride) {
    const int64_t r = i / per_row;
    body(r, (i - r * per_row) * V);
  }
}

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

// v = round(v + p): the sum of two partial results as an add of the two would store it.
template <typename T, int V>
__device__ __forceinline__ void add_rounded(const T* p, float (&v)[V]) {
  float w[V];
  load<T, V>(p, w);
#pragma unroll
  for (int j = 0; j < V; ++j)
    v[j] = to_float(from_float<T>(v[j] + w[j]));
}

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

// Backward of norm_kernel, one block per row: dx from the row's recomputed statistics, which
// it also stores (mean, 1 / rms) for the parameter-gradient kernels below.
template <typename T, int V, bool kLayer>
__global__ void norm_backward_kernel(const T* x, int64_t ldx, const T* gamma, const T* dy,
                                     int64_t lddy, T* dx, int64_t lddx, int64_t cols, float eps,
                                     float* row_stats) {
  __shared__ float shared[32];
  const T* in = x + blockIdx.x * ldx;
  const T* gin = dy + blockIdx.x * lddy;
  T* out = dx + blockIdx.x * lddx;
  const int64_t step = static_cast<int64_t>(blockDim.x) * V;
  const float n = static_cast<float>(cols);
  float mu = 0.0f, inv = 0.0f;
  row_statistics<T, V, kLayer>(in, cols, eps, shared, mu, inv);
  // Sums over the row of dxhat = dy * gamma and of dxhat * xhat.
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V], g[V], d[V];
    load<T, V>(in + c, v);
    load<T, V>(gamma + c, g);
    load<T, V>(gin + c, d);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float dxhat = d[j] * g[j];
      sum_g += dxhat;
      sum_gx += dxhat * (v[j] - mu) * inv;
    }
  }
  sum_g = block_sum(sum_g, shared);
  sum_gx = block_sum(sum_gx, shared);
  const float centre = kLayer ? sum_g / n : 0.0f;
  for (int64_t c = threadIdx.x * V; c < cols; c += step) {
    float v[V], g[V], d[V], o[V];
    load<T, V>(in + c, v);
    load<T, V>(gamma + c, g);
    load<T, V>(gin + c, d);
#pragma unroll
    for (int j = 0; j < V; ++j)
      o[j] = inv * (d[j] * g[j] - centre - (v[j] - mu) * inv * sum_gx / n);
    store<T, V>(out + c, o);
  }
  if (threadIdx.x == 0) {
    row_stats[2 * blockIdx.x] = mu;
    row_stats[2 * blockIdx.x + 1] = inv;
  }
}

/// Sums of two values over the block, every thread getting both (one pair of barriers).
__device__ float2 block_sum2(float2 v, float2* shared) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads(); // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? shared[lane] : make_float2(0.0f, 0.0f);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  return v;
}

// Backward of norm_kernel for rows of at most 1024 x 8 elements in 16-byte vectors (every
// preset's hidden size up to llama3-70b's): each block walks rows blockIdx.x, + gridDim.x, ...,
// each thread owning 8 columns. x and dy of a row are read once, into registers, and the next
// row's are loaded while this one is reduced; gamma, and the thread's dgamma (dy * xhat) and
// dbeta (dy) partials over the block's rows, live in shared memory (registers hold the two
// rows), the partials written once per block for norm_param_final_kernel. Two block reductions per
// row: (sum x, sum dxhat), then (sum (x - mu)^2, sum dxhat * x), with sum dxhat * xhat = inv * (sum
// dxhat * x
// - mu * sum dxhat). The two-kernel path below reads x four times and dy three times, and its
// column pass loads 2 bytes per thread: it took 245 us where the forward took 65.
template <typename T, bool kLayer>
__global__ void __launch_bounds__(1024)
    norm_backward_rows_kernel(const T* x, int64_t ldx, const T* gamma, const T* dy, int64_t lddy,
                              T* dx, int64_t lddx, int64_t rows, int64_t cols, float eps,
                              float* part_g, float* part_b) {
  constexpr int V = 8;
  __shared__ float2 shared[32];
  extern __shared__ float acc[]; // [3][V][blockDim.x]: dgamma and dbeta partials, gamma
  const float n = static_cast<float>(cols);
  const int64_t col = static_cast<int64_t>(threadIdx.x) * V;
  const bool live = col < cols;
  const int stride = blockDim.x;
  float* g = acc + 2 * V * stride + threadIdx.x; // g[j * stride]: this thread's gamma
  {
    float gv[V];
#pragma unroll
    for (int j = 0; j < V; ++j)
      gv[j] = 0.0f;
    if (live) load<T, V>(gamma + col, gv);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      acc[j * stride + threadIdx.x] = 0.0f;
      acc[(V + j) * stride + threadIdx.x] = 0.0f;
      g[j * stride] = gv[j];
    }
  }
  // Rows stay as raw 16-byte vectors in registers (this one and the next), read element-wise.
  auto fetch = [&](const T* base, int64_t ld, int64_t row) {
    return live && row < rows ? *reinterpret_cast<const uint4*>(base + row * ld + col)
                              : make_uint4(0, 0, 0, 0);
  };
  auto at = [](const uint4& raw, int j) { return to_float(reinterpret_cast<const T*>(&raw)[j]); };
  int64_t r = blockIdx.x;
  uint4 xr = fetch(x, ldx, r), dr = fetch(dy, lddy, r);
  for (; r < rows; r += gridDim.x) {
    const uint4 xn = fetch(x, ldx, r + gridDim.x), dn = fetch(dy, lddy, r + gridDim.x);
    float2 s1 = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      s1.x += at(xr, j);
      s1.y += at(dr, j) * g[j * stride];
    }
    s1 = block_sum2(s1, shared);
    const float mu = kLayer ? s1.x / n : 0.0f;
    float2 s2 = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float c = live ? at(xr, j) - mu : 0.0f;
      s2.x += c * c;
      s2.y += at(dr, j) * g[j * stride] * at(xr, j);
    }
    s2 = block_sum2(s2, shared);
    const float inv = rsqrtf(s2.x / n + eps);
    const float sum_gx = inv * (s2.y - mu * s1.y); // sum of dxhat * xhat
    const float centre = kLayer ? s1.y / n : 0.0f;
    if (live) {
      float o[V];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float xhat = (at(xr, j) - mu) * inv, dj = at(dr, j);
        o[j] = inv * (dj * g[j * stride] - centre - xhat * sum_gx / n);
        acc[j * stride + threadIdx.x] += dj * xhat;
        acc[(V + j) * stride + threadIdx.x] += dj;
      }
      store<T, V>(dx + r * lddx + col, o);
    }
    xr = xn;
    dr = dn;
  }
  if (!live) return;
  float* pg = part_g + blockIdx.x * cols + col;
#pragma unroll
  for (int j = 0; j < V; ++j)
    pg[j] = acc[j * stride + threadIdx.x];
  if (part_b != nullptr) {
    float* pb = part_b + blockIdx.x * cols + col;
#pragma unroll
    for (int j = 0; j < V; ++j)
      pb[j] = acc[(V + j) * stride + threadIdx.x];
  }
}

// First pass of the parameter gradients: thread per column, block row per chunk of rows,
// fp32 partial sums of dy * xhat (dgamma) and dy (dbeta, when wanted) per chunk.
template <typename T>
__global__ void norm_param_partial_kernel(const T* x, int64_t ldx, const T* dy, int64_t lddy,
                                          const float* row_stats, int64_t rows, int64_t cols,
                                          int64_t chunk_rows, float* part_g, float* part_b) {
  const int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (col >= cols) return;
  const int64_t r0 = blockIdx.y * chunk_rows;
  const int64_t r1 = min(rows, r0 + chunk_rows);
  float sg = 0.0f, sb = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const float g = to_float(dy[r * lddy + col]);
    const float xhat = (to_float(x[r * ldx + col]) - row_stats[2 * r]) * row_stats[2 * r + 1];
    sg += g * xhat;
    sb += g;
  }
  part_g[blockIdx.y * cols + col] = sg;
  if (part_b != nullptr) part_b[blockIdx.y * cols + col] = sb;
}

// Second pass: the chunks' partials summed per column, added to the gradient or written. A
// block per 32 columns, its 8 warps taking every 8th chunk (a warp reads 128 contiguous bytes
// of a chunk), then summed across the warps: one thread per column walking 132 or more chunks
// in turn spent longer on load latency than the first pass took.
constexpr int kFinalCols = 32, kFinalGroups = 8;

template <typename T>
__global__ void __launch_bounds__(kFinalCols* kFinalGroups)
    norm_param_final_kernel(const float* part_g, const float* part_b, int64_t chunks, int64_t cols,
                            T* dgamma, T* dbeta, bool accumulate) {
  __shared__ float sums[2][kFinalGroups][kFinalCols];
  const int lane = threadIdx.x % kFinalCols, group = threadIdx.x / kFinalCols;
  const int64_t col = blockIdx.x * static_cast<int64_t>(kFinalCols) + lane;
  float sg = 0.0f, sb = 0.0f;
  if (col < cols) {
#pragma unroll 4
    for (int64_t c = group; c < chunks; c += kFinalGroups) {
      sg += part_g[c * cols + col];
      if (part_b != nullptr) sb += part_b[c * cols + col];
    }
  }
  sums[0][group][lane] = sg;
  sums[1][group][lane] = sb;
  __syncthreads();
  if (group != 0 || col >= cols) return;
  sg = accumulate ? to_float(dgamma[col]) : 0.0f;
  sb = accumulate && dbeta != nullptr ? to_float(dbeta[col]) : 0.0f;
#pragma unroll
  for (int k = 0; k < kFinalGroups; ++k) {
    sg += sums[0][k][lane];
    sb += sums[1][k][lane];
  }
  dgamma[col] = from_float<T>(sg);
  if (dbeta != nullptr) dbeta[col] = from_float<T>(sb);
}

// One thread per (row, rotation pair, chunk of kRotaryHeads heads); the angle is computed in
// double like the host reference because positions reach tens of thousands of radians. A chunk's
// loads are all issued before its stores: a thread that walked every head of a row in turn
// waited on one load at a time, which made the rotary of a decode step (a few rows) cost more
// than its attention. sign -1 rotates back (the backward).
constexpr int kRotaryHeads = 8;

template <typename T>
__global__ void rotary_kernel(T* x, int64_t ld, int64_t rows, int64_t heads, int64_t head_dim,
                              int64_t seq_len, int64_t pos0, float theta, float sign) {
  allow_dependents();
  wait_for_primary();
  const int64_t half = head_dim / 2;
  const int64_t chunks = (heads + kRotaryHeads - 1) / kRotaryHeads;
  const int64_t total = rows * chunks * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half; // consecutive threads: consecutive columns
    const int64_t rc = idx / half;
    const int64_t r = rc / chunks, h0 = (rc % chunks) * kRotaryHeads;
    const double pos = static_cast<double>(pos0 + r % seq_len);
    const double freq = pow(static_cast<double>(theta),
                            -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    double sd, cd;
    sincos(pos * freq, &sd, &cd);
    const float cs = static_cast<float>(cd), sn = sign * static_cast<float>(sd);
    T* row = x + r * ld + h0 * head_dim + i;
    const int n = static_cast<int>(heads - h0 < kRotaryHeads ? heads - h0 : kRotaryHeads);
    float x1[kRotaryHeads], x2[kRotaryHeads];
#pragma unroll
    for (int h = 0; h < kRotaryHeads; ++h)
      if (h < n) {
        x1[h] = to_float(row[h * head_dim]);
        x2[h] = to_float(row[h * head_dim + half]);
      }
#pragma unroll
    for (int h = 0; h < kRotaryHeads; ++h)
      if (h < n) {
        row[h * head_dim] = from_float<T>(x1[h] * cs - x2[h] * sn);
        row[h * head_dim + half] = from_float<T>(x2[h] * cs + x1[h] * sn);
      }
  }
}

template <typename T>
__global__ void causal_softmax_kernel(const float* scores, T* probs, int64_t seq, int64_t context,
                                      bool causal, float scale, float* lse, int64_t lse_stride) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const float* in = scores + row * context;
  T* out = probs + row * context;
  const int64_t last = causal ? context - seq + row % seq : context - 1; // last visible key
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x)
    mx = fmaxf(mx, in[j] * scale);
  mx = block_max(mx, shared);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x)
    sum += expf(in[j] * scale - mx);
  sum = block_sum(sum, shared);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < context; j += blockDim.x)
    out[j] = from_float<T>(j <= last ? expf(in[j] * scale - mx) * inv : 0.0f);
  if (lse != nullptr && threadIdx.x == 0)
    lse[(row / seq) * lse_stride + row % seq] = mx + logf(sum);
}

// The backward's probabilities, recomputed from the forward's log-sum-exp: no row reductions.
template <typename T>
__global__ void probs_from_lse_kernel(const float* scores, T* probs, int64_t rows, int64_t seq,
                                      int64_t context, bool causal, float scale, const float* lse,
                                      int64_t lse_stride) {
  const int64_t total = rows * context;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / context, j = i - r * context;
    const int64_t last = causal ? context - seq + r % seq : context - 1;
    const float l = lse[(r / seq) * lse_stride + r % seq];
    probs[i] = from_float<T>(j <= last ? expf(scores[i] * scale - l) : 0.0f);
  }
}

// dS = P * (dP - delta) * scale, in place over P (masked entries stay zero since P is).
template <typename T>
__global__ void softmax_grad_kernel(T* probs, const float* dprobs, int64_t rows, int64_t seq,
                                    int64_t context, float scale, const float* delta,
                                    int64_t delta_stride) {
  const int64_t total = rows * context;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / context;
    const float d = delta[(r / seq) * delta_stride + r % seq];
    probs[i] = from_float<T>(to_float(probs[i]) * (dprobs[i] - d) * scale);
  }
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

void fill_random(const Tensor& t, const GenKey& key, int64_t row0, int64_t col0, cudaStream_t s) {
  dispatch(t.dtype, [&](auto tag) {
    launch_fill<decltype(tag)>(t, FillRandom{key, row0, col0}, s);
  });
}

void fill_value(const Tensor& t, float value, cudaStream_t s) {
  dispatch(t.dtype, [&](auto tag) { launch_fill<decltype(tag)>(t, FillValue{value}, s); });
}

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

void rotary(const Tensor& x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
            float theta, bool inverse, Launch where) {
  if (x.rows == 0 || heads == 0) return;
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t chunks = (heads + kRotaryHeads - 1) / kRotaryHeads;
    launch_kernel(rotary_kernel<T>, grid_for(x.rows * chunks * (head_dim / 2), kThreads), kThreads,
                  0, where, static_cast<T*>(x.data), x.ld, x.rows, heads, head_dim, seq_len, pos0,
                  theta, inverse ? -1.0f : 1.0f);
  });
}

void causal_softmax(const float* scores, void* probs, DType dtype, int64_t rows, int64_t seq,
                    int64_t context, bool causal, float scale, float* lse, int64_t lse_stride,
                    cudaStream_t s) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    causal_softmax_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
        scores, static_cast<T*>(probs), seq, context, causal, scale, lse, lse_stride);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

void probs_from_lse(const float* scores, void* probs, DType dtype, int64_t rows, int64_t seq,
                    int64_t context, bool causal, float scale, const float* lse, int64_t lse_stride,
                    cudaStream_t s) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    probs_from_lse_kernel<T><<<grid_for(rows * context, kThreads), kThreads, 0, s>>>(
        scores, static_cast<T*>(probs), rows, seq, context, causal, scale, lse, lse_stride);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

void softmax_grad(void* probs, const float* dprobs, DType dtype, int64_t rows, int64_t seq,
                  int64_t context, float scale, const float* delta, int64_t delta_stride,
                  cudaStream_t s) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_grad_kernel<T><<<grid_for(rows * context, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(probs), dprobs, rows, seq, context, scale, delta, delta_stride);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

void norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, const Tensor& dx,
                   const Tensor& dgamma, const Tensor* dbeta, float eps, bool accumulate,
                   const ScratchFn& scratch, cudaStream_t s) {
  if (x.cols == 0) return;
  // The partials of `chunks` row chunks (or blocks) summed into dgamma and dbeta.
  auto final_pass = [&](auto tag, int64_t chunks, const float* part_g, const float* part_b) {
    using T = decltype(tag);
    norm_param_final_kernel<T>
        <<<static_cast<unsigned>((x.cols + kFinalCols - 1) / kFinalCols), kFinalCols * kFinalGroups,
           0, s>>>(part_g, part_b, chunks, x.cols, static_cast<T*>(dgamma.data),
                   dbeta != nullptr ? static_cast<T*>(dbeta->data) : nullptr, accumulate);
    RIDGELINE_CHECK(cudaGetLastError());
  };
  const bool vec = rows_vectorisable(x) && rows_vectorisable(dy) && rows_vectorisable(dx) &&
                   reinterpret_cast<uintptr_t>(gamma.data) % 16 == 0;
  // One thread per 8 columns: rows up to 1024 x 8 elements take the one-kernel path (a block
  // per SM), wider or unaligned rows the two-kernel path.
  const int64_t vectors = x.cols / 8;
  if (vec && x.rows > 0 && vectors <= 1024) {
    int device = 0, sms = 0;
    RIDGELINE_CHECK(cudaGetDevice(&device));
    RIDGELINE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int64_t blocks = std::min<int64_t>(x.rows, sms);
    const int threads = static_cast<int>(std::max<int64_t>(64, (vectors + 31) / 32 * 32));
    float* part_g = static_cast<float*>(scratch(static_cast<size_t>(2 * blocks * x.cols) * 4));
    float* part_b = dbeta != nullptr ? part_g + blocks * x.cols : nullptr;
    dispatch(dx.dtype, [&](auto tag) {
      using T = decltype(tag);
      auto launch = [&](auto kernel) {
        const int smem = 3 * 8 * threads * static_cast<int>(sizeof(float));
        RIDGELINE_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        kernel<<<static_cast<unsigned>(blocks), threads, smem, s>>>(
            static_cast<const T*>(x.data), x.ld, static_cast<const T*>(gamma.data),
            static_cast<const T*>(dy.data), dy.ld, static_cast<T*>(dx.data), dx.ld, x.rows, x.cols,
            eps, part_g, part_b);
        RIDGELINE_CHECK(cudaGetLastError());
      };
      launch(dbeta != nullptr ? norm_backward_rows_kernel<T, true>
                              : norm_backward_rows_kernel<T, false>);
      final_pass(tag, blocks, part_g, part_b);
    });
    return;
  }
  constexpr int64_t kChunkRows = 64;
  const int64_t chunks = (x.rows + kChunkRows - 1) / kChunkRows;
  float* row_stats =
      static_cast<float*>(scratch(static_cast<size_t>(2 * x.rows + 2 * chunks * x.cols) * 4));
  float* part_g = row_stats + 2 * x.rows;
  float* part_b = dbeta != nullptr ? part_g + chunks * x.cols : nullptr;
  dispatch(dx.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.data);
    const T* pg = static_cast<const T*>(gamma.data);
    const T* pdy = static_cast<const T*>(dy.data);
    T* pdx = static_cast<T*>(dx.data);
    if (x.rows > 0) {
      const int64_t want = (x.cols / (vec ? 8 : 1) + 31) / 32 * 32;
      const int threads = static_cast<int>(want < 64 ? 64 : (want > 1024 ? 1024 : want));
      const dim3 grid(static_cast<unsigned>(x.rows));
      if (dbeta != nullptr && vec)
        norm_backward_kernel<T, 8, true>
            <<<grid, threads, 0, s>>>(px, x.ld, pg, pdy, dy.ld, pdx, dx.ld, x.cols, eps, row_stats);
      else if (dbeta != nullptr)
        norm_backward_kernel<T, 1, true>
            <<<grid, threads, 0, s>>>(px, x.ld, pg, pdy, dy.ld, pdx, dx.ld, x.cols, eps, row_stats);
      else if (vec)
        norm_backward_kernel<T, 8, false>
            <<<grid, threads, 0, s>>>(px, x.ld, pg, pdy, dy.ld, pdx, dx.ld, x.cols, eps, row_stats);
      else
        norm_backward_kernel<T, 1, false>
            <<<grid, threads, 0, s>>>(px, x.ld, pg, pdy, dy.ld, pdx, dx.ld, x.cols, eps, row_stats);
      RIDGELINE_CHECK(cudaGetLastError());
      norm_param_partial_kernel<T><<<dim3(static_cast<unsigned>((x.cols + kThreads - 1) / kThreads),
                                          static_cast<unsigned>(chunks)),
                                     kThreads, 0, s>>>(px, x.ld, pdy, dy.ld, row_stats, x.rows,
                                                       x.cols, kChunkRows, part_g, part_b);
      RIDGELINE_CHECK(cudaGetLastError());
    }
    final_pass(tag, chunks, part_g, part_b);
  });
}

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
