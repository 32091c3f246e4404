// The host backend's backward kernels against central finite differences of a scalar loss
// L = sum(y * g) (g fixed and random), and the GEMM's transpose flags against plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "models/backend.hpp"
#include "models/generator.hpp"

namespace ridgeline {
namespace {

struct Host {
  std::unique_ptr<Backend> be = make_host_backend();
  std::vector<Buffer> keep;
  Tensor make(int64_t rows, int64_t cols, uint64_t id, float scale = 1.0f) {
    keep.push_back(be->allocate(rows, cols));
    const Tensor t = keep.back().view(rows, cols, DType::f32);
    be->fill_random(t, GenKey{11, id, cols, scale}, 0, 0);
    return t;
  }
};

float* f(const Tensor& t) {
  return static_cast<float*>(t.data);
}

double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t c = 0; c < a.cols; ++c)
      s += static_cast<double>(f(a)[r * a.ld + c]) * f(b)[r * b.ld + c];
  return s;
}

// Compares the analytic gradient `grad` of `loss` with respect to `x` with central differences
// at every element (the tensors here are small).
void expect_gradient(const Tensor& x, const Tensor& grad, const std::function<double()>& loss,
                     double tol = 2e-3) {
  double num = 0, den = 0;
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c) {
      float& v = f(x)[r * x.ld + c];
      const float saved = v, h = 1e-2f * std::max(1.0f, std::fabs(saved));
      v = saved + h;
      const double up = loss();
      v = saved - h;
      const double down = loss();
      v = saved;
      const double fd = (up - down) / (2.0 * h);
      const double an = f(grad)[r * grad.ld + c];
      num += (fd - an) * (fd - an);
      den += fd * fd;
    }
  EXPECT_GT(den, 0.0);
  EXPECT_LT(std::sqrt(num / den), tol);
}

TEST(HostBackward, GemmTransposeFlagsAndAccumulate) {
  Host h;
  for (Trans ta : {Trans::no, Trans::yes})
    for (Trans tb : {Trans::no, Trans::yes}) {
      const int64_t m = 5, n = 7, k = 3;
      const Tensor a = ta == Trans::no ? h.make(m, k, 1) : h.make(k, m, 1);
      const Tensor b = tb == Trans::no ? h.make(k, n, 2) : h.make(n, k, 2);
      const Tensor c = h.make(m, n, 3);
      const std::vector<float> before = h.be->to_host(c);
      h.be->gemm(a, ta, b, tb, c, true, Lane::compute);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double want = before[static_cast<size_t>(i * n + j)];
          for (int64_t p = 0; p < k; ++p) {
            const float av = ta == Trans::no ? f(a)[i * a.ld + p] : f(a)[p * a.ld + i];
            const float bv = tb == Trans::no ? f(b)[p * b.ld + j] : f(b)[j * b.ld + p];
            want += static_cast<double>(av) * bv;
          }
          EXPECT_NEAR(f(c)[i * c.ld + j], want, 1e-5);
        }
    }
}

TEST(HostBackward, Norms) {
  for (bool layer : {true, false}) {
    Host h;
    const Tensor x = h.make(3, 16, 1), gamma = h.make(1, 16, 2), beta = h.make(1, 16, 3);
    const Tensor g = h.make(3, 16, 4), y = h.make(3, 16, 5), dx = h.make(3, 16, 6);
    const Tensor dgamma = h.make(1, 16, 7), dbeta = h.make(1, 16, 8);
    auto forward = [&] {
      if (layer)
        h.be->layer_norm(x, gamma, beta, y, 1e-5f);
      else
        h.be->rms_norm(x, gamma, y, 1e-5f);
      return dot(y, g);
    };
    if (layer)
      h.be->layer_norm_backward(x, gamma, g, dx, dgamma, dbeta, 1e-5f, false);
    else
      h.be->rms_norm_backward(x, gamma, g, dx, dgamma, 1e-5f, false);
    expect_gradient(x, dx, forward);
    expect_gradient(gamma, dgamma, forward);
    if (layer) expect_gradient(beta, dbeta, forward);
    // Accumulate adds the same sums again.
    const std::vector<float> once = h.be->to_host(dgamma);
    if (layer)
      h.be->layer_norm_backward(x, gamma, g, dx, dgamma, dbeta, 1e-5f, true);
    else
      h.be->rms_norm_backward(x, gamma, g, dx, dgamma, 1e-5f, true);
    for (int64_t c = 0; c < 16; ++c)
      EXPECT_NEAR(f(dgamma)[c], 2 * once[static_cast<size_t>(c)], 1e-5);
  }
}

TEST(HostBackward, Activations) {
  Host h;
  const Tensor x = h.make(4, 10, 1, 4.0f), g = h.make(4, 10, 2), y = h.make(4, 10, 3);
  const Tensor dx = h.make(4, 10, 4);
  h.be->gelu_backward(x, g, dx);
  expect_gradient(x, dx, [&] {
    h.be->gelu(x, y);
    return dot(y, g);
  });
  const Tensor gu = h.make(4, 20, 5, 4.0f), dgu = h.make(4, 20, 6);
  h.be->swiglu_backward(gu, g, dgu);
  expect_gradient(gu, dgu, [&] {
    h.be->swiglu(gu, y);
    return dot(y, g);
  });
}

TEST(HostBackward, RotaryIsItsTransposeInverse) {
  Host h;
  const Tensor x = h.make(6, 32, 1), g = h.make(6, 32, 2), y = h.make(6, 32, 3);
  // <R x, g> == <x, R^T g>: the backward is the transpose of the forward rotation.
  h.be->copy(x, y);
  h.be->rotary(y, 4, 8, 3, 5, 10000.0f);
  const double lhs = dot(y, g);
  h.be->copy(g, y);
  h.be->rotary_backward(y, 4, 8, 3, 5, 10000.0f);
  EXPECT_NEAR(dot(x, y), lhs, 1e-4 * std::fabs(lhs) + 1e-5);
  // A rotation: forward then backward gives the input back.
  h.be->rotary(y, 4, 8, 3, 5, 10000.0f);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 32; ++c)
      EXPECT_NEAR(f(y)[r * y.ld + c], f(g)[r * g.ld + c], 1e-5);
}

TEST(HostBackward, AttentionCausalAndFullWithGroupedHeads) {
  for (bool causal : {true, false})
    for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::naive}) {
      Host h;
      AttentionShape s;
      s.batch = 2;
      s.seq = s.context = s.capacity = 5;
      s.heads = 4;
      s.kv_heads = 2;
      s.head_dim = 4;
      s.causal = causal;
      const int64_t t = s.batch * s.seq;
      const Tensor q = h.make(t, 16, 1, 2.0f), k = h.make(t, 8, 2, 2.0f), v = h.make(t, 8, 3);
      const Tensor out = h.make(t, 16, 4), g = h.make(t, 16, 5);
      const Tensor dq = h.make(t, 16, 6), dk = h.make(t, 8, 7), dv = h.make(t, 8, 8);
      std::vector<float> lse(static_cast<size_t>(s.batch * s.heads * s.seq));
      h.be->attention_train(s, q, k, v, out, lse.data(), impl);
      h.be->attention_backward(s, q, k, v, out, g, lse.data(), dq, dk, dv, impl);
      auto loss = [&] {
        h.be->attention(s, q, k, v, out, impl);
        return dot(out, g);
      };
      expect_gradient(q, dq, loss);
      expect_gradient(k, dk, loss);
      expect_gradient(v, dv, loss);
    }
}

} // namespace
} // namespace ridgeline
