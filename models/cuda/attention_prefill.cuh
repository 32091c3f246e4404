// What the two prefill kernels (attention_prefill_sm80.cu, attention_prefill_sm90.cu) share:
// their parameters, the causal mask of a score tile and the store of the finished rows. In an
// unnamed namespace, as the kernels that take FlashParams are.
#pragma once

#include <cmath>

#include "models/cuda/attention_tiles.cuh"
#include "models/cuda/common.cuh"

namespace ridgeline {
namespace cuda {
namespace {

struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  int64_t q_ld, k_ld, v_ld, o_ld;
  int seq, context, capacity, heads, group;
  int offset;       ///< query i sees keys j <= offset + i (causal: context - seq; else context - 1)
  float scale_log2; ///< log2(e) / sqrt(head_dim): the softmax runs on exp2
  float* lse;       ///< [batch, heads, seq] natural log-sum-exp of the scaled scores, or null
};

/// Masks the keys (n0..) of a warp's 16-row score tile that a row may not see: past the row's
/// diagonal or past the context. Only tiles that reach past the warp's first row's last visible
/// key, or past the context, pay for it.
template <int kNTiles>
__device__ __forceinline__ void mask_tile(float (&s)[kNTiles][4], const FlashParams& p, int n0,
                                          int warp_row0, int row_lo, int t) {
  if (n0 + kNTiles * 8 - 1 <= p.offset + warp_row0 && n0 + kNTiles * 8 <= p.context) return;
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = n0 + nt * 8 + 2 * t + (e & 1);
      const int row = e < 2 ? row_lo : row_lo + 8;
      if (key > p.offset + row || key >= p.context) s[nt][e] = -INFINITY;
    }
  }
}

/// Finishes the row sums over the quad, normalises, and stores this thread's rows that exist
/// (row_lo and row_lo + 8 of head h of sequence b), with their log-sum-exp when asked.
template <typename T, int kDTiles>
__device__ __forceinline__ void store_rows(const FlashParams& p, const float (&o_acc)[kDTiles][4],
                                           const float (&row_max)[2], const float (&row_sum)[2],
                                           int row_lo, int b, int h, int t) {
  constexpr int D = kDTiles * 8;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.0f / sum;
    const int row = row_lo + 8 * half;
    if (row >= p.seq) continue;
    if (p.lse != nullptr && t == 0) // row_max is in log2 units of the scaled scores
      p.lse[(static_cast<int64_t>(b) * p.heads + h) * p.seq + row] =
          (row_max[half] + log2f(sum)) * 0.6931471805599453f;
    T* out = static_cast<T*>(p.o) + (static_cast<int64_t>(b) * p.seq + row) * p.o_ld +
             static_cast<int64_t>(h) * D;
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      *reinterpret_cast<uint32_t*>(out + dt * 8 + 2 * t) =
          pack2<T>(o_acc[dt][2 * half] * inv, o_acc[dt][2 * half + 1] * inv);
    }
  }
}

/// Head dimension of the sm90 kernels (two 64-column swizzle atoms): the only one they take.
constexpr int kSm90D = 128;

/// The kernels' parameters of a prefill of head dim D.
template <int D>
FlashParams flash_params(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& out, float* lse) {
  FlashParams p{};
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.o = out.data;
  p.q_ld = q.ld;
  p.k_ld = k.ld;
  p.v_ld = v.ld;
  p.o_ld = out.ld;
  p.seq = static_cast<int>(s.seq);
  p.context = static_cast<int>(s.context);
  p.capacity = static_cast<int>(s.capacity);
  p.heads = static_cast<int>(s.heads);
  p.group = static_cast<int>(s.heads / s.kv_heads);
  p.offset = static_cast<int>(s.causal ? s.context - s.seq : s.context - 1);
  p.scale_log2 = 1.4426950408889634f / std::sqrt(static_cast<float>(D));
  p.lse = lse;
  return p;
}

} // namespace
} // namespace cuda
} // namespace ridgeline
