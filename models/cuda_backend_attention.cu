// The CUDA backend's attention: the fused kernels of cuda/attention.cu, cuDNN's, and the naive
// one (materialised scores, cuBLASLt GEMMs and the softmax kernels), forward and backward.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "models/cuda_backend_impl.cuh"

namespace ridgeline {
namespace cuda {

void CudaBackend::attention(const AttentionShape& s, const Tensor& q, const Tensor& k,
                            const Tensor& v, Tensor out, AttentionImpl impl) {
  require_attention(s, q, k, v, out);
  if (impl == AttentionImpl::cudnn)
    cudnn().forward(s, q, k, v, out);
  else if (impl == AttentionImpl::fused)
    cuda::attention_fused(
        s, q, k, v, out, m_sm_count,
        [this](size_t bytes) { return scratch(m_decode_scratch, bytes); }, chained(Lane::compute));
  else
    attention_naive(s, q, k, v, out, nullptr);
}

void CudaBackend::attention_decode_ragged(const AttentionShape& s,
                                          const std::vector<int64_t>& contexts, const Tensor& q,
                                          const Tensor& k, const Tensor& v, Tensor out,
                                          AttentionImpl impl) {
  if (impl != AttentionImpl::fused) {
    Backend::attention_decode_ragged(s, contexts, q, k, v, out, impl);
    return;
  }
  RIDGELINE_REQUIRE(s.seq == 1 && s.batch == static_cast<int64_t>(contexts.size()),
                    "attention_decode_ragged: one query per sequence, one context per sequence");
  RIDGELINE_REQUIRE(!m_capturing, "attention_decode_ragged: not inside a graph capture");
  AttentionShape longest = s;
  longest.context = 1;
  for (int64_t c : contexts) {
    RIDGELINE_REQUIRE(c >= 1 && c <= s.capacity, "attention_decode_ragged: a context outside "
                                                 "[1, capacity]");
    longest.context = std::max(longest.context, c);
  }
  require_attention(longest, q, k, v, out);
  // Every context equal: the uniform launch, whose split search fits one context (and which
  // needs no work list).
  if (std::all_of(contexts.begin(), contexts.end(),
                  [&](int64_t c) { return c == contexts.front(); })) {
    attention(longest, q, k, v, out, impl);
    return;
  }
  cuda::attention_fused_decode_ragged(
      s, contexts, q, k, v, out, m_sm_count,
      [this](size_t bytes) { return scratch(m_decode_scratch, bytes); },
      [this](const void* host, size_t bytes) { return upload_held(m_ragged_work, host, bytes); },
      m_compute.get());
}

void CudaBackend::attention_train(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                  const Tensor& v, Tensor out, void* lse, AttentionImpl impl) {
  RIDGELINE_REQUIRE(lse != nullptr, "attention_train: no log-sum-exp buffer");
  require_attention(s, q, k, v, out);
  float* stats = static_cast<float*>(lse);
  if (impl == AttentionImpl::cudnn)
    cudnn().forward(s, q, k, v, out, stats); // cuDNN's stats: the same natural log-sum-exp
  else if (impl == AttentionImpl::fused)
    cuda::attention_fused(
        s, q, k, v, out, m_sm_count,
        [this](size_t bytes) { return scratch(m_decode_scratch, bytes); }, m_compute.get(), stats);
  else
    attention_naive(s, q, k, v, out, stats);
}

void CudaBackend::attention_backward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& out, const Tensor& dout,
                                     const void* lse, Tensor dq, Tensor dk, Tensor dv,
                                     AttentionImpl impl) {
  RIDGELINE_REQUIRE(lse != nullptr, "attention_backward: no log-sum-exp buffer");
  RIDGELINE_REQUIRE(s.seq == s.context && s.context == s.capacity,
                    "attention_backward: prefill shapes only");
  require_attention(s, q, k, v, out);
  RIDGELINE_REQUIRE(dout.rows == out.rows && dq.rows == q.rows && dk.rows == k.rows &&
                        dv.rows == v.rows && dout.cols >= s.heads * s.head_dim &&
                        dq.cols >= s.heads * s.head_dim && dk.cols >= s.kv_heads * s.head_dim &&
                        dv.cols >= s.kv_heads * s.head_dim,
                    "attention_backward: gradient shapes");
  require_dtype(dout);
  require_dtype(dq);
  require_dtype(dk);
  require_dtype(dv);
  const float* stats = static_cast<const float*>(lse);
  if (impl == AttentionImpl::cudnn)
    cudnn().backward(s, q, k, v, out, dout, stats, dq, dk, dv);
  else if (impl == AttentionImpl::fused)
    cuda::attention_fused_backward(
        s, q, k, v, out, dout, stats, dq, dk, dv,
        [this](size_t bytes) { return scratch(m_train_scratch, bytes); }, m_compute.get());
  else
    attention_naive_backward(s, q, k, v, out, dout, stats, dq, dk, dv);
}

std::vector<std::string> CudaBackend::attention_plans() const {
  return m_cudnn ? m_cudnn->plans() : std::vector<std::string>{};
}

void CudaBackend::require_attention(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor& out) const {
  RIDGELINE_REQUIRE(s.kv_heads > 0 && s.heads % s.kv_heads == 0,
                    "attention: heads must be a multiple of kv_heads");
  RIDGELINE_REQUIRE(q.rows == s.batch * s.seq && out.rows == q.rows, "attention: q rows");
  RIDGELINE_REQUIRE(k.rows == s.batch * s.capacity && v.rows == k.rows, "attention: kv rows");
  RIDGELINE_REQUIRE(s.context <= s.capacity && s.seq <= s.context && s.seq >= 1,
                    "attention: context");
  RIDGELINE_REQUIRE(q.cols >= s.heads * s.head_dim && out.cols >= s.heads * s.head_dim &&
                        k.cols >= s.kv_heads * s.head_dim && v.cols >= s.kv_heads * s.head_dim,
                    "attention: head columns");
  require_dtype(q);
  require_dtype(k);
  require_dtype(v);
  require_dtype(out);
}

CudnnAttention& CudaBackend::cudnn() {
  if (!m_cudnn) m_cudnn = std::make_unique<CudnnAttention>(m_compute.get());
  return *m_cudnn;
}

Operand CudaBackend::head_block(const Tensor& t, int64_t head, int64_t d, int64_t per_seq) {
  Operand o = operand(t);
  o.data = static_cast<const char*>(t.data) + static_cast<size_t>(head * d) * dtype_size(t.dtype);
  o.rows = per_seq;
  o.cols = d;
  o.stride = per_seq * t.ld;
  return o;
}

Operand CudaBackend::dense(const void* data, int64_t rows, int64_t cols, cudaDataType_t type) {
  Operand o;
  o.data = data;
  o.rows = rows;
  o.cols = cols;
  o.ld = cols;
  o.stride = rows * cols;
  o.type = type;
  return o;
}

void CudaBackend::attention_naive(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& out, float* lse) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  const size_t cells = static_cast<size_t>(s.batch * s.seq * s.context);
  float* scores = static_cast<float*>(scratch(m_scores, cells * sizeof(float)));
  void* probs = scratch(m_probs, cells * dtype_size(m_dtype));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const Operand s_op = dense(scores, s.seq, s.context, CUDA_R_32F);
  const Operand p_op = dense(probs, s.seq, s.context, cuda_type(m_dtype));
  for (int64_t h = 0; h < s.heads; ++h) {
    const int64_t kvh = h / group;
    // The keys of a sequence: its first `context` cache rows.
    Operand kh = head_block(k, kvh, d, s.capacity);
    Operand vh = head_block(v, kvh, d, s.capacity);
    kh.rows = vh.rows = s.context;
    const Operand qh = head_block(q, h, d, s.seq);
    const Operand oh = head_block(out, h, d, s.seq);
    matmul(qh, Trans::no, kh, Trans::yes, s_op, false, s.batch, Lane::compute, false);
    cuda::causal_softmax(scores, probs, m_dtype, s.batch * s.seq, s.seq, s.context, s.causal, scale,
                         lse ? lse + h * s.seq : nullptr, s.heads * s.seq, m_compute.get());
    matmul(p_op, Trans::no, vh, Trans::no, oh, false, s.batch, Lane::compute, false);
  }
}

void CudaBackend::attention_naive_backward(const AttentionShape& s, const Tensor& q,
                                           const Tensor& k, const Tensor& v, const Tensor& out,
                                           const Tensor& dout, const float* lse, const Tensor& dq,
                                           const Tensor& dk, const Tensor& dv) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads, n = s.seq;
  const size_t cells = static_cast<size_t>(s.batch * n * n);
  float* scores = static_cast<float*>(scratch(m_scores, cells * sizeof(float)));
  void* probs = scratch(m_probs, cells * dtype_size(m_dtype));
  float* delta = static_cast<float*>(
      scratch(m_delta, static_cast<size_t>(s.batch * s.heads * n) * sizeof(float)));
  cuda::attention_delta(s, out, dout, delta, m_compute.get());
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const Operand s_op = dense(scores, n, n, CUDA_R_32F);
  const Operand p_op = dense(probs, n, n, cuda_type(m_dtype));
  for (int64_t h = 0; h < s.heads; ++h) {
    const int64_t kvh = h / group;
    const bool first = h % group == 0;
    const Operand qh = head_block(q, h, d, n);
    const Operand kh = head_block(k, kvh, d, n);
    const Operand vh = head_block(v, kvh, d, n);
    const Operand doh = head_block(dout, h, d, n);
    const Operand dqh = head_block(dq, h, d, n);
    const Operand dkh = head_block(dk, kvh, d, n);
    const Operand dvh = head_block(dv, kvh, d, n);
    matmul(qh, Trans::no, kh, Trans::yes, s_op, false, s.batch, Lane::compute, false);
    cuda::probs_from_lse(scores, probs, m_dtype, s.batch * n, n, n, s.causal, scale, lse + h * n,
                         s.heads * n, m_compute.get());
    matmul(p_op, Trans::yes, doh, Trans::no, dvh, !first, s.batch, Lane::compute, false);
    matmul(doh, Trans::no, vh, Trans::yes, s_op, false, s.batch, Lane::compute, false);
    cuda::softmax_grad(probs, scores, m_dtype, s.batch * n, n, n, scale, delta + h * n, s.heads * n,
                       m_compute.get());
    matmul(p_op, Trans::no, kh, Trans::no, dqh, false, s.batch, Lane::compute, false);
    matmul(p_op, Trans::yes, qh, Trans::no, dkh, !first, s.batch, Lane::compute, false);
  }
}

} // namespace cuda
} // namespace ridgeline
