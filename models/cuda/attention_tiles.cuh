// The attention kernels' tile primitives (sm80 and sm90): 16-bit packing of fp32 accumulators
// into MMA fragments, the XOR-swizzled shared-memory tile layout and its cp.async loads, and the
// online softmax over a warp's 16-row score tile.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "models/cuda/sm80.cuh"

namespace ridgeline {
namespace cuda {

template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    r = *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    r = *reinterpret_cast<uint32_t*>(&v);
  }
  return r;
}

/// The A fragment of a 16 x 16 product from two 16 x 8 fp32 accumulator tiles (columns 0-7
/// and 8-15): an m16n8k16 accumulator holds exactly the elements its A fragment needs.
template <typename T>
__device__ __forceinline__ void pack_a(uint32_t (&a)[4], const float (&lo)[4],
                                       const float (&hi)[4]) {
  a[0] = pack2<T>(lo[0], lo[1]);
  a[1] = pack2<T>(lo[2], lo[3]);
  a[2] = pack2<T>(hi[0], hi[1]);
  a[3] = pack2<T>(hi[2], hi[3]);
}

// Shared-memory tiles are [rows][D] with 16-byte chunks XOR-swizzled by (row % 8): the 8 rows
// an ldmatrix reads at one logical chunk land in 8 different bank groups.
template <int D> __device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

/// Online softmax over one key tile of a warp's 16-row MMA tile (this thread's rows g and g + 8
/// as half 0 and 1). `s` holds raw scores (-inf where masked); `scale` takes them to log2 units,
/// fused into the exponent's FMA. Updates the running max (log2 units, reduced over the quad
/// that shares a row) and the running sum, exponentiates the tile in place, and gives `alpha`,
/// the factor the output accumulators must be rescaled by. A row with no visible key yet keeps
/// max -inf and contributes nothing.
template <int kNTiles>
__device__ __forceinline__ void softmax_tile(float (&s)[kNTiles][4], float (&row_max)[2],
                                             float (&row_sum)[2], float (&alpha)[2], float scale) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float raw = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
      raw = fmaxf(raw, fmaxf(s[nt][2 * half], s[nt][2 * half + 1]));
    raw = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 1));
    raw = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 2));
    const float mx = fmaxf(row_max[half], raw * scale); // scale > 0 keeps the order
    const float base = mx == -INFINITY ? 0.0f : mx;
    alpha[half] = exp2f(row_max[half] - base);
    row_max[half] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      s[nt][2 * half] = exp2f(fmaf(s[nt][2 * half], scale, -base));
      s[nt][2 * half + 1] = exp2f(fmaf(s[nt][2 * half + 1], scale, -base));
      sum += s[nt][2 * half] + s[nt][2 * half + 1];
    }
    row_sum[half] = row_sum[half] * alpha[half] + sum;
  }
}

/// Multiplies this thread's two output rows by their softmax rescale factors.
template <int kDTiles>
__device__ __forceinline__ void rescale_rows(float (&o_acc)[kDTiles][4], const float (&alpha)[2]) {
#pragma unroll
  for (int dt = 0; dt < kDTiles; ++dt) {
    o_acc[dt][0] *= alpha[0];
    o_acc[dt][1] *= alpha[0];
    o_acc[dt][2] *= alpha[1];
    o_acc[dt][3] *= alpha[1];
  }
}

/// softmax_tile() with the output rescaled at once (kernels with no MMA still reading O).
template <int kNTiles, int kDTiles>
__device__ __forceinline__ void online_softmax(float (&s)[kNTiles][4], float (&row_max)[2],
                                               float (&row_sum)[2], float (&o_acc)[kDTiles][4],
                                               float scale) {
  float alpha[2];
  softmax_tile<kNTiles>(s, row_max, row_sum, alpha, scale);
  rescale_rows<kDTiles>(o_acc, alpha);
}

/// Issues cp.async loads of `rows` x D elements starting at logical row `row0` of a head, by
/// kThreads threads.
template <typename T, int D, int kRows, int kThreads>
__device__ __forceinline__ void load_tile(T* smem, const T* base, int64_t ld, int row0,
                                          int valid_rows) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < valid_rows;
    const T* src = base + (valid ? (static_cast<int64_t>(row0 + r) * ld + c * 8) : 0);
    cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(smem + swizzle<D>(r, c))), src,
                valid);
  }
}

} // namespace cuda
} // namespace ridgeline
