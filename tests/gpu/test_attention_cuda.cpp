// Every attention implementation of the CUDA backend (fused, naive, cudnn) against the host
// backend: causal and non-causal, grouped-query groups 1, 4, 8, odd sequence lengths (1, 127,
// 4097), decode contexts; and cuDNN's backward against a double-precision host reference written
// here. Relative L2 error below 2e-2 (bf16 storage) forward, 5e-2 for gradients. Skips without a
// CUDA device; the cudnn cases skip in a build without cuDNN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "models/attention_cudnn.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"
#include "tests/support/backend_pair.hpp"

namespace ridgeline {
namespace {

constexpr double kTolerance = 2e-2;
constexpr double kGradTolerance = 5e-2;

struct Case {
  const char* name;
  int64_t batch, seq, context, capacity, heads, kv_heads, head_dim;
  bool causal;
};

AttentionShape shape_of(const Case& c) {
  AttentionShape s;
  s.batch = c.batch;
  s.seq = c.seq;
  s.context = c.context;
  s.capacity = c.capacity;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.causal = c.causal;
  return s;
}

/// A CUDA and a host backend given the same (bf16-rounded) tensors.
class AttentionVsHost : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    m_gpu = make_cuda_backend(0, DType::bf16);
    m_host = make_host_backend();
  }
  using Pair = BackendPair;
  Pair make(int64_t rows, int64_t cols, uint64_t tensor, bool random = true) {
    return make_backend_pair(*m_gpu, *m_host, DType::bf16, rows, cols,
                             GenKey{7, tensor, cols, random ? 1.0f : 0.0f});
  }
  std::unique_ptr<Backend> m_gpu;
  std::unique_ptr<Backend> m_host;
};

TEST_P(AttentionVsHost, EveryImplementationMatchesHost) {
  const Case c = GetParam();
  const AttentionShape s = shape_of(c);
  Pair q = make(c.batch * c.seq, c.heads * c.head_dim, 1);
  Pair k = make(c.batch * c.capacity, c.kv_heads * c.head_dim, 2);
  Pair v = make(c.batch * c.capacity, c.kv_heads * c.head_dim, 3);
  Pair want = make(c.batch * c.seq, c.heads * c.head_dim, 4, false);
  m_host->attention(s, q.host, k.host, v.host, want.host, AttentionImpl::fused);
  const std::vector<float> reference = m_host->to_host(want.host);
  std::vector<AttentionImpl> impls = {AttentionImpl::fused, AttentionImpl::naive};
  if (cudnn_compiled()) impls.push_back(AttentionImpl::cudnn);
  for (AttentionImpl impl : impls) {
    Pair out = make(c.batch * c.seq, c.heads * c.head_dim, 5, false);
    m_gpu->attention(s, q.gpu, k.gpu, v.gpu, out.gpu, impl);
    EXPECT_LT(relative_error(m_gpu->to_host(out.gpu), reference), kTolerance)
        << attention_name(impl) << " (" << fused_prefill_kernel(0, c.head_dim) << ")";
  }
  // Where the device takes the Hopper prefill kernel, the Ampere-style one is checked too.
  if (c.seq > 1 && fused_prefill_kernel(0, c.head_dim) == "sm90") {
    set_fused_prefill_kernel("sm80");
    Pair out = make(c.batch * c.seq, c.heads * c.head_dim, 5, false);
    m_gpu->attention(s, q.gpu, k.gpu, v.gpu, out.gpu, AttentionImpl::fused);
    set_fused_prefill_kernel("auto");
    EXPECT_LT(relative_error(m_gpu->to_host(out.gpu), reference), kTolerance) << "fused (sm80)";
  }
  if (cudnn_compiled()) {
    const std::vector<std::string> plans = m_gpu->attention_plans();
    ASSERT_FALSE(plans.empty());
    EXPECT_NE(plans.back().find("fwd"), std::string::npos) << plans.back();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionVsHost,
    ::testing::Values(Case{"seq1_group1", 2, 1, 1, 1, 2, 2, 128, true},
                      Case{"seq127_group1", 2, 127, 127, 127, 4, 4, 128, true},
                      Case{"seq127_group4", 2, 127, 127, 127, 8, 2, 128, true},
                      Case{"seq127_group8_noncausal", 2, 127, 127, 127, 8, 1, 128, false},
                      Case{"seq127_group4_noncausal_d64", 1, 127, 127, 127, 4, 1, 64, false},
                      Case{"seq4097_group8", 1, 4097, 4097, 4097, 8, 1, 128, true},
                      Case{"seq4097_group4_noncausal", 1, 4097, 4097, 4097, 4, 1, 128, false},
                      Case{"split_prefill_bottom_right", 2, 50, 130, 160, 4, 4, 64, true},
                      Case{"decode_context1", 3, 1, 1, 8, 8, 1, 128, true},
                      Case{"decode_context37_group1", 3, 1, 37, 40, 8, 8, 128, true},
                      Case{"decode_context1000_group8", 2, 1, 1000, 1024, 16, 2, 128, true},
                      Case{"decode_context4097_group4", 1, 1, 4097, 4097, 8, 2, 128, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Decode over the grid of contexts around the kernel's 16-key steps and 64-key rounds, and the
// grouped-query group sizes of the presets, at both head dims; then the layouts that change the
// launch: 16 and 32 query heads per KV head (one and two 16-row tiles), a batch wide enough that
// each CTA takes the whole context (no combine), and a cache longer than the context.
std::vector<Case> decode_grid() {
  std::vector<Case> cases;
  for (int64_t d : {128, 64})
    for (int64_t context : {1, 63, 64, 65, 1000, 4097})
      for (int64_t group : {1, 4, 8})
        cases.push_back(Case{nullptr, 2, 1, context, context + 3, 2 * group, 2, d, true});
  cases.push_back(Case{nullptr, 1, 1, 4097, 4097, 16, 1, 128, true});
  cases.push_back(Case{nullptr, 1, 1, 1000, 1000, 64, 2, 128, true});
  cases.push_back(Case{nullptr, 48, 1, 1000, 1000, 64, 8, 128, true});
  return cases;
}

// Prefill around the 128-row and 128-key tiles of both fused kernels: sequences one short of,
// at and past a tile, causal and not, grouped-query groups 1 and 4, and chunked prefill (the
// queries at the bottom right of a longer context in a still longer cache).
std::vector<Case> prefill_grid() {
  std::vector<Case> cases;
  for (int64_t seq : {2, 63, 128, 129, 300, 1000})
    for (int64_t group : {1, 4})
      for (bool causal : {true, false})
        cases.push_back(Case{nullptr, 2, seq, seq, seq, 2 * group, 2, 128, causal});
  cases.push_back(Case{nullptr, 3, 50, 130, 160, 4, 4, 128, true});
  cases.push_back(Case{nullptr, 2, 200, 333, 400, 8, 2, 128, true});
  cases.push_back(Case{nullptr, 2, 200, 333, 400, 8, 2, 128, false});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Prefill, AttentionVsHost, ::testing::ValuesIn(prefill_grid()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return "b" + std::to_string(c.batch) + "_seq" + std::to_string(c.seq) +
                                  "_ctx" + std::to_string(c.context) + "_cap" +
                                  std::to_string(c.capacity) + "_group" +
                                  std::to_string(c.heads / c.kv_heads) +
                                  (c.causal ? "_causal" : "_full");
                         });

INSTANTIATE_TEST_SUITE_P(Decode, AttentionVsHost, ::testing::ValuesIn(decode_grid()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return "b" + std::to_string(c.batch) + "_ctx" +
                                  std::to_string(c.context) + "_group" +
                                  std::to_string(c.heads / c.kv_heads) + "_kv" +
                                  std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim);
                         });

// Double-precision attention backward of one (batch, head): dq, dk, dv accumulate (dk, dv are
// shared by the grouped heads).
void host_backward(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                   const std::vector<float>& v, const std::vector<float>& dout,
                   std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) {
  const int64_t d = c.head_dim, group = c.heads / c.kv_heads;
  const int64_t qw = c.heads * d, kw = c.kv_heads * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> p(static_cast<size_t>(c.context)), dp(p.size());
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t kh = h / group;
      for (int64_t i = 0; i < c.seq; ++i) {
        const int64_t last = c.causal ? c.context - c.seq + i : c.context - 1;
        const float* qi = &q[static_cast<size_t>((b * c.seq + i) * qw + h * d)];
        const float* doi = &dout[static_cast<size_t>((b * c.seq + i) * qw + h * d)];
        double mx = -INFINITY;
        for (int64_t j = 0; j <= last; ++j) {
          const float* kj = &k[static_cast<size_t>((b * c.capacity + j) * kw + kh * d)];
          double dot = 0;
          for (int64_t x = 0; x < d; ++x)
            dot += static_cast<double>(qi[x]) * kj[x];
          p[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, p[static_cast<size_t>(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= last; ++j)
          sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
        // dP = dO V^T; dS = P (dP - sum_j P dP).
        double pdp = 0;
        for (int64_t j = 0; j <= last; ++j) {
          p[static_cast<size_t>(j)] /= sum;
          const float* vj = &v[static_cast<size_t>((b * c.capacity + j) * kw + kh * d)];
          double dot = 0;
          for (int64_t x = 0; x < d; ++x)
            dot += static_cast<double>(doi[x]) * vj[x];
          dp[static_cast<size_t>(j)] = dot;
          pdp += p[static_cast<size_t>(j)] * dot;
        }
        for (int64_t j = 0; j <= last; ++j) {
          const double pj = p[static_cast<size_t>(j)];
          const double ds = pj * (dp[static_cast<size_t>(j)] - pdp) * scale;
          const size_t krow = static_cast<size_t>((b * c.capacity + j) * kw + kh * d);
          const size_t qrow = static_cast<size_t>((b * c.seq + i) * qw + h * d);
          for (int64_t x = 0; x < d; ++x) {
            dv[krow + x] += pj * doi[x];
            dq[qrow + x] += ds * k[krow + x];
            dk[krow + x] += ds * qi[x];
          }
        }
      }
    }
}

class CudnnBackward : public AttentionVsHost {};

TEST_P(CudnnBackward, MatchesHostReference) {
  if (!cudnn_compiled()) GTEST_SKIP() << "built without cuDNN";
  const Case c = GetParam();
  const AttentionShape s = shape_of(c);
  Pair q = make(c.batch * c.seq, c.heads * c.head_dim, 11);
  Pair k = make(c.batch * c.capacity, c.kv_heads * c.head_dim, 12);
  Pair v = make(c.batch * c.capacity, c.kv_heads * c.head_dim, 13);
  Pair dout = make(c.batch * c.seq, c.heads * c.head_dim, 14);
  Pair out = make(c.batch * c.seq, c.heads * c.head_dim, 15, false);
  Pair dq = make(c.batch * c.seq, c.heads * c.head_dim, 16, false);
  Pair dk = make(c.batch * c.capacity, c.kv_heads * c.head_dim, 17, false);
  Pair dv = make(c.batch * c.capacity, c.kv_heads * c.head_dim, 18, false);
  // fp32 log-sum-exp per (batch, head, query): two bf16 elements each.
  Buffer stats = m_gpu->allocate(c.batch * c.heads * c.seq, 2);
  CudnnAttention cudnn(m_gpu->stream(Lane::compute));
  cudnn.forward(s, q.gpu, k.gpu, v.gpu, out.gpu, stats.data());
  cudnn.backward(s, q.gpu, k.gpu, v.gpu, out.gpu, dout.gpu, stats.data(), dq.gpu, dk.gpu, dv.gpu);
  m_gpu->synchronize();
  ASSERT_EQ(cudnn.plans().size(), 2u);

  Pair want = make(c.batch * c.seq, c.heads * c.head_dim, 19, false);
  m_host->attention(s, q.host, k.host, v.host, want.host, AttentionImpl::fused);
  EXPECT_LT(relative_error(m_gpu->to_host(out.gpu), m_host->to_host(want.host)), kTolerance)
      << "forward";
  std::vector<double> rq(static_cast<size_t>(q.host.elements())),
      rk(static_cast<size_t>(k.host.elements())), rv(static_cast<size_t>(v.host.elements()));
  host_backward(c, m_host->to_host(q.host), m_host->to_host(k.host), m_host->to_host(v.host),
                m_host->to_host(dout.host), rq, rk, rv);
  const auto as_float = [](const std::vector<double>& x) {
    return std::vector<float>(x.begin(), x.end());
  };
  EXPECT_LT(relative_error(m_gpu->to_host(dq.gpu), as_float(rq)), kGradTolerance) << "dq";
  EXPECT_LT(relative_error(m_gpu->to_host(dk.gpu), as_float(rk)), kGradTolerance) << "dk";
  EXPECT_LT(relative_error(m_gpu->to_host(dv.gpu), as_float(rv)), kGradTolerance) << "dv";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudnnBackward,
    ::testing::Values(Case{"causal_group1", 2, 127, 127, 127, 4, 4, 128, true},
                      Case{"causal_group4", 1, 127, 127, 127, 8, 2, 128, true},
                      Case{"noncausal_group8", 1, 96, 96, 96, 8, 1, 128, false},
                      Case{"noncausal_group1_d64", 2, 64, 64, 64, 2, 2, 64, false}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(CudnnAttentionBuild, ReportsItsVersion) {
  if (!cudnn_compiled()) {
    EXPECT_EQ(cudnn_build_version(), "");
    EXPECT_THROW(cudnn_runtime_version(), UsageError);
    return;
  }
  EXPECT_EQ(cudnn_build_version().substr(0, 2), "9.");
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  const int64_t v = cudnn_runtime_version();
  EXPECT_EQ(v / 10000, 9);
  EXPECT_FALSE(cudnn_loaded_version().empty());
}

} // namespace
} // namespace ridgeline
