// The CUDA backend's train-phase kernels against the host backend, in bf16 and fp16: GEMMs in
// all four transpose combinations with and without accumulation, the norm, activation, rotary
// and axpy backwards, the attention forward's log-sum-exp, and the attention backward of every
// implementation (fused, naive, cudnn where built) causal and not, grouped 1:1 and 4:1, sequence
// lengths on and off the kernels' tiles, head dimensions 64 and 128. Both sides start from the
// same rounded inputs; tolerance: relative L2 error below 2e-2, 5e-2 for attention gradients (as
// the other GPU tests). Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
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

/// A CUDA backend of the parameter's dtype and a host backend, with tensors given to both.
class TrainVsHost : public ::testing::TestWithParam<DType> {
protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    m_dtype = GetParam();
    m_gpu = make_cuda_backend(0, m_dtype);
    m_host = make_host_backend();
  }

  using Pair = BackendPair;

  /// rows x cols on both backends (GPU rows padded to `ld`), random in [-scale, scale) or zero.
  Pair make(int64_t rows, int64_t cols, uint64_t tensor, float scale = 1.0f, int64_t ld = 0) {
    return make_backend_pair(*m_gpu, *m_host, m_dtype, rows, cols, GenKey{11, tensor, cols, scale},
                             ld);
  }
  /// A GPU output filled with a value that no correct kernel leaves behind.
  Pair output(int64_t rows, int64_t cols, int64_t ld = 0) {
    Pair p = make(rows, cols, 0, 0.0f, ld);
    m_gpu->fill_value(p.gpu, 77.0f);
    return p;
  }
  void expect_close(const Pair& p, const std::string& what, double tol = kTolerance) {
    EXPECT_LT(relative_error(m_gpu->to_host(p.gpu), m_host->to_host(p.host)), tol)
        << what << " (" << dtype_name(m_dtype) << ")";
  }

  DType m_dtype = DType::bf16;
  std::unique_ptr<Backend> m_gpu;
  std::unique_ptr<Backend> m_host;
};

const char* trans_name(Trans t) {
  return t == Trans::yes ? "T" : "N";
}

TEST_P(TrainVsHost, GemmEveryTransposeWithAndWithoutAccumulate) {
  struct Case {
    int64_t m, n, k, pad; // pad: extra elements at the end of every GPU row
  };
  for (const Case c : {Case{37, 53, 29, 0}, Case{64, 96, 128, 8}, Case{1, 40, 72, 0}}) {
    for (Trans ta : {Trans::no, Trans::yes})
      for (Trans tb : {Trans::no, Trans::yes})
        for (bool accumulate : {false, true}) {
          const int64_t ar = ta == Trans::no ? c.m : c.k, ac = ta == Trans::no ? c.k : c.m;
          const int64_t br = tb == Trans::no ? c.k : c.n, bc = tb == Trans::no ? c.n : c.k;
          Pair a = make(ar, ac, 1, 1.0f, c.pad ? ac + c.pad : 0);
          Pair b = make(br, bc, 2, 1.0f, c.pad ? bc + c.pad : 0);
          Pair out = make(c.m, c.n, 3, 1.0f, c.pad ? c.n + c.pad : 0);
          m_gpu->gemm(a.gpu, ta, b.gpu, tb, out.gpu, accumulate, Lane::compute);
          m_host->gemm(a.host, ta, b.host, tb, out.host, accumulate, Lane::compute);
          expect_close(out, std::string("gemm ") + trans_name(ta) + trans_name(tb) +
                                (accumulate ? " accumulate" : "") + " m=" + std::to_string(c.m) +
                                " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k));
        }
  }
  // The layers' forward form still goes through the same plans.
  Pair a = make(48, 64, 4);
  Pair w = make(80, 64, 5);
  Pair out = output(48, 80);
  m_gpu->gemm(a.gpu, w.gpu, out.gpu);
  m_host->gemm(a.host, w.host, out.host);
  expect_close(out, "gemm a w^T");
}

TEST_P(TrainVsHost, NormBackward) {
  // 72 and 8192 columns take the register-row kernel (a block per SM walking several rows once
  // rows outnumber the SMs: 300), 8200 the two-kernel vector path (wider than 1024 x 8), 45 the
  // scalar one; 150 rows span three row chunks of the two-kernel path.
  for (int64_t cols : {72, 8192, 8200, 45})
    for (int64_t rows : {19, 150, 300})
      for (bool accumulate : {false, true}) {
        const std::string what = " cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                                 (accumulate ? " accumulate" : "");
        Pair x = make(rows, cols, 10, 2.0f);
        Pair gamma = make(1, cols, 11);
        Pair dy = make(rows, cols, 12);
        Pair dx = output(rows, cols);
        Pair dgamma = make(1, cols, 13);
        Pair dbeta = make(1, cols, 14);
        m_gpu->layer_norm_backward(x.gpu, gamma.gpu, dy.gpu, dx.gpu, dgamma.gpu, dbeta.gpu, 1e-5f,
                                   accumulate);
        m_host->layer_norm_backward(x.host, gamma.host, dy.host, dx.host, dgamma.host, dbeta.host,
                                    1e-5f, accumulate);
        expect_close(dx, "layer_norm dx" + what);
        expect_close(dgamma, "layer_norm dgamma" + what);
        expect_close(dbeta, "layer_norm dbeta" + what);

        Pair rdx = output(rows, cols);
        Pair rdgamma = make(1, cols, 15);
        m_gpu->rms_norm_backward(x.gpu, gamma.gpu, dy.gpu, rdx.gpu, rdgamma.gpu, 1e-5f, accumulate);
        m_host->rms_norm_backward(x.host, gamma.host, dy.host, rdx.host, rdgamma.host, 1e-5f,
                                  accumulate);
        expect_close(rdx, "rms_norm dx" + what);
        expect_close(rdgamma, "rms_norm dgamma" + what);
      }
}

TEST_P(TrainVsHost, ActivationRotaryAndAxpyBackward) {
  for (int64_t cols : {72, 45}) {
    const int64_t rows = 23;
    const std::string what = " cols=" + std::to_string(cols);
    Pair x = make(rows, cols, 20, 3.0f);
    Pair dy = make(rows, cols, 21);
    Pair dx = output(rows, cols);
    m_gpu->gelu_backward(x.gpu, dy.gpu, dx.gpu);
    m_host->gelu_backward(x.host, dy.host, dx.host);
    expect_close(dx, "gelu_backward" + what);

    Pair gate_up = make(rows, 2 * cols, 22, 3.0f);
    Pair d_gate_up = output(rows, 2 * cols);
    m_gpu->swiglu_backward(gate_up.gpu, dy.gpu, d_gate_up.gpu);
    m_host->swiglu_backward(gate_up.host, dy.host, d_gate_up.host);
    expect_close(d_gate_up, "swiglu_backward" + what);

    Pair y = make(rows, cols, 23);
    m_gpu->axpy(-0.375f, x.gpu, y.gpu);
    m_host->axpy(-0.375f, x.host, y.host);
    expect_close(y, "axpy" + what);
  }
  for (int64_t head_dim : {64, 128}) {
    const int64_t rows = 21, heads = 3;
    Pair g = make(rows, heads * head_dim + 8, 24);
    m_gpu->rotary_backward(g.gpu, heads, head_dim, 7, 1000, 10000.0f);
    m_host->rotary_backward(g.host, heads, head_dim, 7, 1000, 10000.0f);
    expect_close(g, "rotary_backward d=" + std::to_string(head_dim));
    // The backward undoes the forward (up to rounding).
    Pair x = make(rows, heads * head_dim, 25);
    const std::vector<float> before = m_gpu->to_host(x.gpu);
    m_gpu->rotary(x.gpu, heads, head_dim, 7, 1000, 10000.0f);
    m_gpu->rotary_backward(x.gpu, heads, head_dim, 7, 1000, 10000.0f);
    EXPECT_LT(relative_error(m_gpu->to_host(x.gpu), before), kTolerance) << "rotary round trip";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TrainVsHost, ::testing::Values(DType::bf16, DType::f16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

struct AttentionCase {
  const char* name;
  int64_t batch, seq, heads, kv_heads, head_dim;
  bool causal;
};

class AttentionTrain : public TrainVsHost {};

// Every implementation's attention_train (output and log-sum-exp) and attention_backward against
// the host's, on the GPU's own forward output and log-sum-exp.
TEST_P(AttentionTrain, EveryImplementationMatchesHost) {
  const AttentionCase cases[] = {
      {"s128_d64_mha_causal", 2, 128, 4, 4, 64, true},
      {"s128_d128_gqa4_full", 1, 128, 8, 2, 128, false},
      {"s256_d128_gqa4_causal", 1, 256, 8, 2, 128, true},
      {"s256_d64_gqa4_full", 2, 256, 4, 1, 64, false},
      {"s384_d64_gqa4_causal", 1, 384, 8, 2, 64, true},
      {"s384_d128_mha_full", 1, 384, 4, 4, 128, false},
      {"s200_d128_gqa4_causal", 2, 200, 4, 1, 128, true},
      {"s77_d64_gqa4_full", 1, 77, 8, 2, 64, false},
      // 64 keys past the last whole 128-key block; a group of 8 on one KV head.
      {"s192_d128_mha_causal", 2, 192, 2, 2, 128, true},
      {"s512_d128_gqa8_causal", 1, 512, 8, 1, 128, true},
  };
  // The fused kernels again with sm80 forced, where the device takes the sm90 ones (head dim
  // 128; the sm90 backward takes sequences that are a multiple of 64).
  struct Variant {
    AttentionImpl impl;
    bool sm80;
  };
  std::vector<Variant> variants = {{AttentionImpl::fused, false}, {AttentionImpl::naive, false}};
  if (fused_prefill_kernel(0, 128) == "sm90") variants.push_back({AttentionImpl::fused, true});
  if (cudnn_compiled()) variants.push_back({AttentionImpl::cudnn, false});
  for (const AttentionCase& c : cases) {
    AttentionShape s;
    s.batch = c.batch;
    s.seq = s.context = s.capacity = c.seq;
    s.heads = c.heads;
    s.kv_heads = c.kv_heads;
    s.head_dim = c.head_dim;
    s.causal = c.causal;
    const int64_t rows = c.batch * c.seq, qw = c.heads * c.head_dim, kw = c.kv_heads * c.head_dim;
    Pair q = make(rows, qw, 30, 2.0f);
    Pair k = make(rows, kw, 31, 2.0f);
    Pair v = make(rows, kw, 32);
    Pair dout = make(rows, qw, 33);
    const size_t stats_n = static_cast<size_t>(c.batch * c.heads * c.seq);

    // Host reference: forward with log-sum-exp, then the backward from the host's own output.
    Pair ref_out = output(rows, qw);
    std::vector<float> ref_lse(stats_n);
    m_host->attention_train(s, q.host, k.host, v.host, ref_out.host, ref_lse.data(),
                            AttentionImpl::fused);
    Pair ref_dq = output(rows, qw), ref_dk = output(rows, kw), ref_dv = output(rows, kw);
    m_host->attention_backward(s, q.host, k.host, v.host, ref_out.host, dout.host, ref_lse.data(),
                               ref_dq.host, ref_dk.host, ref_dv.host, AttentionImpl::fused);
    const std::vector<float> want_out = m_host->to_host(ref_out.host);
    const std::vector<float> want_dq = m_host->to_host(ref_dq.host);
    const std::vector<float> want_dk = m_host->to_host(ref_dk.host);
    const std::vector<float> want_dv = m_host->to_host(ref_dv.host);

    for (const auto& [impl, sm80] : variants) {
      set_fused_prefill_kernel(sm80 ? "sm80" : "auto");
      const std::string what = std::string(c.name) + " " + attention_name(impl) +
                               (sm80 ? " (sm80)" : "") + " " + dtype_name(m_dtype);
      Buffer lse = m_gpu->allocate_bytes(stats_n * sizeof(float));
      Pair out = output(rows, qw);
      m_gpu->attention_train(s, q.gpu, k.gpu, v.gpu, out.gpu, lse.data(), impl);
      EXPECT_LT(relative_error(m_gpu->to_host(out.gpu), want_out), kTolerance) << what << " out";
      std::vector<float> got_lse(stats_n);
      m_gpu->download(got_lse.data(), lse.data(), stats_n * sizeof(float));
      double worst = 0;
      for (size_t i = 0; i < stats_n; ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(got_lse[i]) - ref_lse[i]));
      EXPECT_LT(worst, 2e-2) << what << " log-sum-exp: largest difference";

      Pair dq = output(rows, qw), dk = output(rows, kw), dv = output(rows, kw);
      m_gpu->attention_backward(s, q.gpu, k.gpu, v.gpu, out.gpu, dout.gpu, lse.data(), dq.gpu,
                                dk.gpu, dv.gpu, impl);
      EXPECT_LT(relative_error(m_gpu->to_host(dq.gpu), want_dq), kGradTolerance) << what << " dq";
      EXPECT_LT(relative_error(m_gpu->to_host(dk.gpu), want_dk), kGradTolerance) << what << " dk";
      EXPECT_LT(relative_error(m_gpu->to_host(dv.gpu), want_dv), kGradTolerance) << what << " dv";
    }
    set_fused_prefill_kernel("auto");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionTrain, ::testing::Values(DType::bf16, DType::f16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST_P(AttentionTrain, BackwardRefusesDecodeShapes) {
  AttentionShape s;
  s.seq = 1;
  s.context = s.capacity = 64;
  s.heads = s.kv_heads = 1;
  s.head_dim = 64;
  Pair q = make(1, 64, 1), kv = make(64, 64, 2);
  Buffer lse = m_gpu->allocate_bytes(sizeof(float));
  EXPECT_THROW(m_gpu->attention_backward(s, q.gpu, kv.gpu, kv.gpu, q.gpu, q.gpu, lse.data(), q.gpu,
                                         kv.gpu, kv.gpu, AttentionImpl::fused),
               Error);
}

} // namespace
} // namespace ridgeline
