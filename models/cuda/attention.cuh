// The fused attention's launchers, one translation unit per kernel and architecture, which the
// dispatch of attention.cu calls: prefill (sm80, sm90), decode (split, ragged, combine), backward
// (sm80, sm90) and the backward's row kernels. T is __nv_bfloat16 or __half, D the head dim
// (64, 128).
#pragma once

#include <vector>

#include "models/cuda/common.cuh"

namespace ridgeline {
namespace cuda {

/// Prefill on mma.sync and cp.async; with `lse`, each query row's log-sum-exp too.
template <typename T, int D>
void launch_flash_sm80(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, float* lse, cudaStream_t stream);
/// Prefill of head dim 128 on warpgroup MMA fed by TMA (a build with sm_90a code; throws
/// otherwise).
template <typename T>
void launch_flash_sm90(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, float* lse, cudaStream_t stream);

/// Decode (seq == 1): the context split across CTAs, then launch_decode_combine() where it was
/// split in more than one.
template <typename T, int D>
void launch_decode(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, int sm_count, const ScratchFn& scratch, Launch where);
/// Decode of sequences of different contexts (Backend::attention_decode_ragged()) in one launch
/// on `stream`: a work list of every sequence's context splits (its device copy from `upload`,
/// made for `stream`), then launch_decode_combine() where a sequence was split in more than one.
/// Ordinary launches.
template <typename T, int D>
void launch_decode_ragged(const AttentionShape& s, const std::vector<int64_t>& contexts,
                          const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          int sm_count, const ScratchFn& scratch, const UploadFn& upload,
                          cudaStream_t stream);
/// Merges each (head, sequence)'s partials (unnormalised outputs [slots][D], max and sum
/// [slots][2]) into `out`, an ordinary launch on `stream`. Every sequence has `splits` partials
/// ([batch][heads][splits]), or, with `first_split` (device, batch + 1 entries), sequence b has
/// first_split[b + 1] - first_split[b] of them from slot first_split[b] * heads on ([heads][its
/// splits]); one of one split is left alone.
template <typename T, int D>
void launch_decode_combine(const float* part_o, const float* part_ml, T* out, int64_t o_ld,
                           int heads, int splits, int64_t batch, cudaStream_t stream,
                           const int* first_split = nullptr);

/// What one fused attention backward reads and writes, the fp32 scratch included (laid out by
/// attention.cu's dispatch).
struct BackwardOperands {
  const Tensor* q = nullptr;
  const Tensor* k = nullptr;
  const Tensor* v = nullptr;
  const Tensor* dout = nullptr;
  const Tensor* dk = nullptr;
  const Tensor* dv = nullptr;
  const float* lse = nullptr;   ///< [batch, heads, seq], natural log
  const float* delta = nullptr; ///< [batch, heads, seq] rowsum(dO * O)
  float* dq_acc = nullptr;      ///< [batch * seq, heads * D], zeroed
  /// The CTAs a KV head's query heads are split across (sm90 only); above 1 each adds its dK and
  /// dV into dk_acc and dv_acc ([batch * seq, kv_heads * D] fp32, zeroed).
  int head_splits = 1;
  float* dk_acc = nullptr;
  float* dv_acc = nullptr;
};
/// The backward on mma.sync and cp.async over `grid` (no error check: the caller's follows).
template <typename T, int D>
void launch_backward_sm80(const AttentionShape& s, const BackwardOperands& o, const dim3& grid,
                          cudaStream_t stream);
/// The backward of head dim 128 on warpgroup MMA fed by TMA over `grid` (a build with sm_90a
/// code; throws otherwise; no error check: the caller's follows).
template <typename T>
void launch_backward_sm90(const AttentionShape& s, const BackwardOperands& o, const dim3& grid,
                          cudaStream_t stream);
/// delta[(b * heads + h) * seq + i] = rowsum(dout * out) over head h's `head_dim` columns of row
/// b * seq + i, for `rows` rows (no error check).
template <typename T>
void launch_attention_delta(const Tensor& out, const Tensor& dout, float* delta, int64_t rows,
                            int seq, int heads, int head_dim, cudaStream_t stream);
/// out[r * ld + c] = round(in[r * cols + c]): fp32 rows into the dtype (no error check).
template <typename T>
void launch_convert_rows(const float* in, T* out, int64_t ld, int64_t rows, int64_t cols,
                         cudaStream_t stream);

} // namespace cuda
} // namespace ridgeline
