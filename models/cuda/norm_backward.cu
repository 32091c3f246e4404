// Backward of the layer and RMS norms: dx, and dgamma (and dbeta) as fp32 partial column sums
// then summed per column. Rows of at most 1024 x 8 elements in 16-byte vectors take one kernel
// (norm_backward_rows_kernel) and the column sums; wider or unaligned rows two kernels (dx, then
// the partials) and the column sums.
#include <algorithm>
#include <cstdint>

#include "models/cuda/block_reduce.cuh"
#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"
#include "models/cuda/norm.cuh"

namespace ridgeline {
namespace cuda {
namespace {

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

// Backward of norm_kernel for rows of at most 1024 x 8 elements in 16-byte vectors (every
// preset's hidden size up to llama3-70b's): each block walks rows blockIdx.x, + gridDim.x, ...,
// each thread owning 8 columns. x and dy of a row are read once, into registers, and the next
// row's are loaded while this one is reduced; gamma, and the thread's dgamma (dy * xhat) and
// dbeta (dy) partials over the block's rows, live in shared memory (registers hold the two
// rows), the partials written once per block for norm_param_final_kernel. Two block reductions
// per row: (sum x, sum dxhat), then (sum (x - mu)^2, sum dxhat * x), with sum dxhat * xhat =
// inv * (sum dxhat * x - mu * sum dxhat). The two-kernel path below reads x four times and dy
// three times, and its column pass loads 2 bytes per thread (docs/FINDINGS.md).
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
// of a chunk), then summed across the warps: one thread per column walking every chunk in turn
// would wait on one load at a time (docs/FINDINGS.md).
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

} // namespace

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

} // namespace cuda
} // namespace ridgeline
