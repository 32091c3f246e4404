// Rotate-half (NeoX) rotary embedding in place, and its inverse (the backward).
#include <cmath>

#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"

namespace ridgeline {
namespace cuda {
namespace {

// One thread per (row, rotation pair, chunk of kRotaryHeads heads); the angle is computed in
// double like the host reference because positions reach tens of thousands of radians. A chunk's
// loads are all issued before its stores, rather than a thread walking every head of a row in
// turn and waiting on one load at a time (docs/FINDINGS.md). sign -1 rotates back (the
// backward). Row r is at pos0 + r % seq_len, or at positions[r] where a position list is given.
constexpr int kRotaryHeads = 8;

template <typename T>
__global__ void rotary_kernel(T* x, int64_t ld, int64_t rows, int64_t heads, int64_t head_dim,
                              int64_t seq_len, int64_t pos0, float theta, float sign,
                              const int64_t* positions) {
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
    const double pos =
        static_cast<double>(positions != nullptr ? positions[r] : pos0 + r % seq_len);
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

} // namespace

void rotary(const Tensor& x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
            float theta, bool inverse, Launch where, const int64_t* positions) {
  if (x.rows == 0 || heads == 0) return;
  dispatch(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t chunks = (heads + kRotaryHeads - 1) / kRotaryHeads;
    launch_kernel(rotary_kernel<T>, grid_for(x.rows * chunks * (head_dim / 2), kThreads), kThreads,
                  0, where, static_cast<T*>(x.data), x.ld, x.rows, heads, head_dim, seq_len, pos0,
                  theta, inverse ? -1.0f : 1.0f, positions);
  });
}

} // namespace cuda
} // namespace ridgeline
