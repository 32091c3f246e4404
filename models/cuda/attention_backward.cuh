// What the two backward kernels (attention_backward_sm80.cu, attention_backward_sm90.cu) and
// their dispatch share: the parameters, the store of a CTA's dK and dV rows, and the tile shapes
// the dispatch reads. In an unnamed namespace, as the kernels that take FlashBwdParams are.
#pragma once

#include <cmath>

#include "models/cuda/attention.cuh"
#include "models/cuda/attention_tiles.cuh"
#include "models/cuda/common.cuh"

namespace ridgeline {
namespace cuda {
namespace {

struct FlashBwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* dout;
  const float* lse;   ///< [batch, heads, seq], natural log
  const float* delta; ///< [batch, heads, seq]
  float* dq_acc;      ///< [batch * seq, heads * D], zeroed
  void* dk;
  void* dv;
  int64_t q_ld, k_ld, v_ld, do_ld, dk_ld, dv_ld;
  int seq, heads, kv_heads, group, offset;
  float scale_log2; ///< log2(e) / sqrt(D)
  float scale;      ///< 1 / sqrt(D)
  /// sm90 kernel: the CTAs a KV head's query heads are split across (gridDim.z); above 1 each
  /// adds its dK and dV into dk_acc and dv_acc ([batch * seq, kv_heads * D] fp32, zeroed).
  int head_splits;
  float* dk_acc;
  float* dv_acc;
};

/// Stores this thread's rows of dK and dV (keys key_lo and key_lo + 8 of KV head kvh of sequence
/// b, the m16n8 accumulator layout) as T, keys past the sequence left out.
template <typename T, int kDTiles>
__device__ __forceinline__ void
store_dk_dv(const FlashBwdParams& p, const float (&dk_acc)[kDTiles][4],
            const float (&dv_acc)[kDTiles][4], int key_lo, int b, int kvh, int t) {
  constexpr int D = kDTiles * 8;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int key = key_lo + 8 * half;
    if (key >= p.seq) continue;
    T* dk = static_cast<T*>(p.dk) + (static_cast<int64_t>(b) * p.seq + key) * p.dk_ld +
            static_cast<int64_t>(kvh) * D + 2 * t;
    T* dv = static_cast<T*>(p.dv) + (static_cast<int64_t>(b) * p.seq + key) * p.dv_ld +
            static_cast<int64_t>(kvh) * D + 2 * t;
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      *reinterpret_cast<uint32_t*>(dk + dt * 8) =
          pack2<T>(dk_acc[dt][2 * half], dk_acc[dt][2 * half + 1]);
      *reinterpret_cast<uint32_t*>(dv + dt * 8) =
          pack2<T>(dv_acc[dt][2 * half], dv_acc[dt][2 * half + 1]);
    }
  }
}

constexpr int kBwdWarps = 8;
constexpr int kBwdN = 16 * kBwdWarps; // keys per CTA, 16 per warp
constexpr int kBwd90N = 128;          // keys per CTA of the sm90 kernel, 64 per consumer warpgroup
constexpr int kBwd90M = 64;           // query rows per step of the sm90 kernel

/// The kernels' parameters of a backward of head dim D.
template <int D>
FlashBwdParams backward_params(const AttentionShape& s, const BackwardOperands& o) {
  FlashBwdParams p{};
  p.q = o.q->data;
  p.k = o.k->data;
  p.v = o.v->data;
  p.dout = o.dout->data;
  p.lse = o.lse;
  p.delta = o.delta;
  p.dq_acc = o.dq_acc;
  p.dk = o.dk->data;
  p.dv = o.dv->data;
  p.q_ld = o.q->ld;
  p.k_ld = o.k->ld;
  p.v_ld = o.v->ld;
  p.do_ld = o.dout->ld;
  p.dk_ld = o.dk->ld;
  p.dv_ld = o.dv->ld;
  p.seq = static_cast<int>(s.seq);
  p.heads = static_cast<int>(s.heads);
  p.kv_heads = static_cast<int>(s.kv_heads);
  p.group = static_cast<int>(s.heads / s.kv_heads);
  p.offset = static_cast<int>(s.causal ? 0 : s.seq - 1);
  p.scale = 1.0f / std::sqrt(static_cast<float>(D));
  p.scale_log2 = 1.4426950408889634f * p.scale;
  p.head_splits = o.head_splits;
  p.dk_acc = o.dk_acc;
  p.dv_acc = o.dv_acc;
  return p;
}

} // namespace
} // namespace cuda
} // namespace ridgeline
