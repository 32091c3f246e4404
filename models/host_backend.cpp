// The host backend: fp32 tensors in host memory, OpenBLAS GEMMs, plain C++ kernels. It is the
// reference the CUDA kernels are checked against, and the embedded default without a GPU.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "models/backend.hpp"

namespace ridgeline {
namespace {

constexpr int64_t kQueryBlock = 64; // fused attention: query rows per tile

float* f32(const Tensor& t) {
  RIDGELINE_REQUIRE(t.dtype == DType::f32, "host backend works on fp32 tensors");
  return static_cast<float*>(t.data);
}

void require_same_shape(const Tensor& a, const Tensor& b) {
  RIDGELINE_REQUIRE(a.rows == b.rows && a.cols == b.cols, "tensor shapes differ");
}

void free_host(void* p) {
  std::free(p);
}

// The memory passes work in 16-byte chunks of four 32-bit words, as the GPU's uint4 accesses.
// Integer words: their sum may be reassociated, so the compiler vectorises the read, and its
// speed does not depend on the bytes (denormal floats slow float adds down).
constexpr size_t kChunkWords = 4;
// What the write pass stores in every chunk.
constexpr uint32_t kWritePattern[kChunkWords] = {0x01234567u, 0x89abcdefu, 0xfedcba98u,
                                                 0x76543210u};

// The host's empty kernel: not inlined, and the opaque asm keeps every call from being dropped.
[[gnu::noinline]] void empty_kernel() {
  asm volatile("");
}

class HostBackend final : public Backend {
public:
  const char* name() const override { return "host"; }
  DType dtype() const override { return DType::f32; }
  // The compute lane blocks; the comm lane gets a tag so that MPI collectives on it run
  // non-blocking until the communicator's complete() (host-side overlap).
  Stream stream(Lane lane) override {
    return lane == Lane::compute ? nullptr
                                 : static_cast<Stream>(&m_lane_tags[static_cast<int>(lane)]);
  }
  Clock& clock() override { return m_clock; }
  void join(Lane, Lane) override {}
  void synchronize() override {}

  Buffer allocate(int64_t rows, int64_t cols) override {
    return allocate_bytes(
        static_cast<size_t>(checked_mul(checked_mul(rows, cols, "allocation elements"),
                                        static_cast<int64_t>(sizeof(float)), "allocation bytes")));
  }

  Buffer allocate_bytes(size_t bytes) override {
    const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw Error("host allocation of " + std::to_string(bytes) + " bytes failed");
    return Buffer(p, bytes, free_host);
  }

  void upload(void* dst, const void* host_src, size_t bytes) override {
    std::memcpy(dst, host_src, bytes);
  }
  void download(void* host_dst, const void* src, size_t bytes) override {
    std::memcpy(host_dst, src, bytes);
  }

  void fill_random(Tensor t, const GenKey& key, int64_t row0, int64_t col0) override {
    float* p = f32(t);
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c)
        p[r * t.ld + c] = generate(key, row0 + r, col0 + c);
  }

  void fill_value(Tensor t, float value) override {
    float* p = f32(t);
    for (int64_t r = 0; r < t.rows; ++r)
      std::fill(p + r * t.ld, p + r * t.ld + t.cols, value);
  }

  void copy(const Tensor& src, Tensor dst, Lane) override {
    require_same_shape(src, dst);
    const float* s = f32(src);
    float* d = f32(dst);
    for (int64_t r = 0; r < src.rows; ++r)
      std::memcpy(d + r * dst.ld, s + r * src.ld, static_cast<size_t>(src.cols) * sizeof(float));
  }

  void memory_pass(MemoryPass kind, const Buffer& src, const Buffer& dst, size_t bytes,
                   Lane) override {
    RIDGELINE_REQUIRE(bytes % 16 == 0, "memory_pass: bytes must be a multiple of 16");
    RIDGELINE_REQUIRE(kind == MemoryPass::write || bytes <= src.bytes(),
                      "memory_pass: source shorter than bytes");
    RIDGELINE_REQUIRE(kind == MemoryPass::read || bytes <= dst.bytes(),
                      "memory_pass: destination shorter than bytes");
    const size_t words = bytes / sizeof(uint32_t);
    const auto* in = static_cast<const uint32_t*>(src.data());
    auto* out = static_cast<uint32_t*>(dst.data());
    switch (kind) {
    case MemoryPass::read: {
      uint32_t sum[kChunkWords] = {};
      for (size_t i = 0; i < words; i += kChunkWords)
        for (size_t j = 0; j < kChunkWords; ++j)
          sum[j] += in[i + j];
      m_sink = sum[0] + sum[1] + sum[2] + sum[3];
      break;
    }
    case MemoryPass::write:
      for (size_t i = 0; i < words; i += kChunkWords)
        for (size_t j = 0; j < kChunkWords; ++j)
          out[i + j] = kWritePattern[j];
      break;
    case MemoryPass::copy:
      for (size_t i = 0; i < words; i += kChunkWords)
        for (size_t j = 0; j < kChunkWords; ++j)
          out[i + j] = in[i + j];
      break;
    }
  }

  void empty_kernels(int count, Lane) override {
    // A volatile pointer: an indirect call per launch, as the kernels' virtual dispatch, that the
    // optimiser can neither inline nor hoist.
    void (*volatile kernel)() = empty_kernel;
    for (int i = 0; i < count; ++i)
      kernel();
  }

  std::vector<float> to_host(const Tensor& t) override {
    std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
    const float* p = f32(t);
    for (int64_t r = 0; r < t.rows; ++r)
      std::memcpy(out.data() + r * t.cols, p + r * t.ld,
                  static_cast<size_t>(t.cols) * sizeof(float));
    return out;
  }

  void gemm(const Tensor& a, Trans ta, const Tensor& b, Trans tb, Tensor c, bool accumulate,
            Lane) override {
    const bool at = ta == Trans::yes, bt = tb == Trans::yes;
    const int64_t m = at ? a.cols : a.rows, k = at ? a.rows : a.cols;
    const int64_t kb = bt ? b.cols : b.rows, n = bt ? b.rows : b.cols;
    RIDGELINE_REQUIRE(k == kb && c.rows == m && c.cols == n,
                      "gemm shapes do not match: c[m,n] = op(a)[m,k] * op(b)[k,n]");
    cblas_sgemm(CblasRowMajor, at ? CblasTrans : CblasNoTrans, bt ? CblasTrans : CblasNoTrans,
                static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, f32(a),
                static_cast<int>(a.ld), f32(b), static_cast<int>(b.ld), accumulate ? 1.0f : 0.0f,
                f32(c), static_cast<int>(c.ld));
  }

  void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                  float eps) override {
    require_same_shape(x, y);
    const float* g = f32(gamma);
    const float* b = f32(beta);
    for (int64_t r = 0; r < x.rows; ++r) {
      const float* in = f32(x) + r * x.ld;
      float* out = f32(y) + r * y.ld;
      double sum = 0, sq = 0;
      for (int64_t c = 0; c < x.cols; ++c)
        sum += in[c];
      const double mu = sum / static_cast<double>(x.cols);
      for (int64_t c = 0; c < x.cols; ++c)
        sq += (in[c] - mu) * (in[c] - mu);
      const float inv = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(x.cols) + eps));
      for (int64_t c = 0; c < x.cols; ++c)
        out[c] = (in[c] - static_cast<float>(mu)) * inv * g[c] + b[c];
    }
  }

  void rms_norm(const Tensor& x, const Tensor& gamma, Tensor y, float eps) override {
    require_same_shape(x, y);
    const float* g = f32(gamma);
    for (int64_t r = 0; r < x.rows; ++r) {
      const float* in = f32(x) + r * x.ld;
      float* out = f32(y) + r * y.ld;
      double sq = 0;
      for (int64_t c = 0; c < x.cols; ++c)
        sq += static_cast<double>(in[c]) * in[c];
      const float inv = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(x.cols) + eps));
      for (int64_t c = 0; c < x.cols; ++c)
        out[c] = in[c] * inv * g[c];
    }
  }

  void add_norm(const Tensor& x, const Tensor& r, Tensor sum, const Tensor& gamma,
                const Tensor& beta, Tensor y, float eps) override {
    add(x, r, sum, Lane::compute);
    norm_of_sum(sum, gamma, beta, y, eps);
  }

  void add_partials_norm(const Tensor& x, const Tensor& p, const Tensor& q, Tensor sum,
                         const Tensor& gamma, const Tensor& beta, Tensor y, float eps) override {
    add_partials(x, p, q, sum);
    norm_of_sum(sum, gamma, beta, y, eps);
  }

  /// The norm after a fused add: layer norm where it has a beta, RMS norm otherwise.
  void norm_of_sum(const Tensor& sum, const Tensor& gamma, const Tensor& beta, Tensor y,
                   float eps) {
    if (beta.data != nullptr)
      layer_norm(sum, gamma, beta, y, eps);
    else
      rms_norm(sum, gamma, y, eps);
  }

  void add_partials(const Tensor& x, const Tensor& p, const Tensor& q, Tensor y) override {
    require_same_shape(x, y);
    require_same_shape(p, y);
    require_same_shape(q, y);
    for (int64_t r = 0; r < y.rows; ++r) {
      const float* px = f32(x) + r * x.ld;
      const float* pp = f32(p) + r * p.ld;
      const float* pq = f32(q) + r * q.ld;
      float* out = f32(y) + r * y.ld;
      for (int64_t c = 0; c < y.cols; ++c)
        out[c] = px[c] + (pp[c] + pq[c]);
    }
  }

  void gelu(const Tensor& x, Tensor y) override {
    require_same_shape(x, y);
    constexpr float k = 0.7978845608028654f; // sqrt(2 / pi)
    for (int64_t r = 0; r < x.rows; ++r) {
      const float* in = f32(x) + r * x.ld;
      float* out = f32(y) + r * y.ld;
      for (int64_t c = 0; c < x.cols; ++c) {
        const float v = in[c];
        out[c] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
      }
    }
  }

  void swiglu(const Tensor& gate_up, Tensor y) override {
    RIDGELINE_REQUIRE(gate_up.rows == y.rows && gate_up.cols == 2 * y.cols,
                      "swiglu: input must be [m, 2f] for an [m, f] output");
    for (int64_t r = 0; r < y.rows; ++r) {
      const float* gate = f32(gate_up) + r * gate_up.ld;
      const float* up = gate + y.cols;
      float* out = f32(y) + r * y.ld;
      for (int64_t c = 0; c < y.cols; ++c)
        out[c] = gate[c] / (1.0f + std::exp(-gate[c])) * up[c];
    }
  }

  void add(const Tensor& a, const Tensor& b, Tensor y, Lane) override {
    require_same_shape(a, y);
    require_same_shape(b, y);
    for (int64_t r = 0; r < y.rows; ++r) {
      const float* pa = f32(a) + r * a.ld;
      const float* pb = f32(b) + r * b.ld;
      float* out = f32(y) + r * y.ld;
      for (int64_t c = 0; c < y.cols; ++c)
        out[c] = pa[c] + pb[c];
    }
  }

  void rotary(Tensor x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
              float theta) override {
    rotate(x, heads, head_dim, seq_len, pos0, theta, 1.0);
  }

  void rotary_backward(Tensor dx, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
                       float theta) override {
    rotate(dx, heads, head_dim, seq_len, pos0, theta, -1.0);
  }

  void attention(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                 Tensor out, AttentionImpl impl) override {
    attend(s, q, k, v, out, nullptr, impl);
  }

  void attention_train(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       Tensor out, void* lse, AttentionImpl impl) override {
    RIDGELINE_REQUIRE(lse != nullptr, "attention_train: no log-sum-exp buffer");
    attend(s, q, k, v, out, static_cast<float*>(lse), impl);
  }

  void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, Tensor dx,
                           Tensor dgamma, Tensor dbeta, float eps, bool accumulate) override {
    norm_backward(x, gamma, dy, dx, dgamma, &dbeta, eps, accumulate, true);
  }

  void rms_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, Tensor dx,
                         Tensor dgamma, float eps, bool accumulate) override {
    norm_backward(x, gamma, dy, dx, dgamma, nullptr, eps, accumulate, false);
  }

  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) override {
    require_same_shape(x, dy);
    require_same_shape(x, dx);
    constexpr float k = 0.7978845608028654f; // sqrt(2 / pi)
    for (int64_t r = 0; r < x.rows; ++r) {
      const float* in = f32(x) + r * x.ld;
      const float* g = f32(dy) + r * dy.ld;
      float* out = f32(dx) + r * dx.ld;
      for (int64_t c = 0; c < x.cols; ++c) {
        const float v = in[c];
        const float t = std::tanh(k * (v + 0.044715f * v * v * v));
        const float dt = (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * v * v);
        out[c] = g[c] * (0.5f * (1.0f + t) + 0.5f * v * dt);
      }
    }
  }

  void swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor d_gate_up) override {
    RIDGELINE_REQUIRE(gate_up.rows == dy.rows && gate_up.cols == 2 * dy.cols,
                      "swiglu_backward: input must be [m, 2f] for an [m, f] gradient");
    require_same_shape(gate_up, d_gate_up);
    const int64_t f = dy.cols;
    for (int64_t r = 0; r < dy.rows; ++r) {
      const float* gate = f32(gate_up) + r * gate_up.ld;
      const float* up = gate + f;
      const float* g = f32(dy) + r * dy.ld;
      float* dgate = f32(d_gate_up) + r * d_gate_up.ld;
      float* dup = dgate + f;
      for (int64_t c = 0; c < f; ++c) {
        const float sig = 1.0f / (1.0f + std::exp(-gate[c]));
        const float silu = gate[c] * sig;
        dgate[c] = g[c] * up[c] * sig * (1.0f + gate[c] * (1.0f - sig));
        dup[c] = g[c] * silu;
      }
    }
  }

  void attention_backward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& out, const Tensor& dout, const void* lse,
                          Tensor dq, Tensor dk, Tensor dv, AttentionImpl impl) override {
    if (impl == AttentionImpl::cudnn)
      throw UsageError("--attention cudnn needs the cuda backend (cuDNN runs on NVIDIA GPUs)");
    RIDGELINE_REQUIRE(s.seq == s.context && s.context == s.capacity,
                      "attention_backward: prefill shapes only");
    RIDGELINE_REQUIRE(s.heads % s.kv_heads == 0, "attention: heads must be a multiple of kv_heads");
    RIDGELINE_REQUIRE(q.rows == s.batch * s.seq && k.rows == q.rows && dq.rows == q.rows &&
                          dk.rows == k.rows && dv.rows == v.rows,
                      "attention_backward: rows");
    const int64_t d = s.head_dim, n = s.seq;
    const int64_t group = s.heads / s.kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const float* stats = static_cast<const float*>(lse);
    fill_value(dk, 0.0f);
    fill_value(dv, 0.0f);
    // Per (sequence, head): P = exp(S - lse) recomputed from the saved log-sum-exp, then
    // dV += P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)), dQ = dS K, dK += dS^T Q, each
    // a GEMM over the [seq, seq] block (the host's naive and fused are the same arithmetic).
    std::vector<float> p(static_cast<size_t>(n * n)), dp(static_cast<size_t>(n * n));
    std::vector<float> delta(static_cast<size_t>(n));
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t kvh = h / group;
        const float* qb = f32(q) + b * n * q.ld + h * d;
        const float* kb = f32(k) + b * n * k.ld + kvh * d;
        const float* vb = f32(v) + b * n * v.ld + kvh * d;
        const float* ob = f32(out) + b * n * out.ld + h * d;
        const float* gb = f32(dout) + b * n * dout.ld + h * d;
        float* dqb = f32(dq) + b * n * dq.ld + h * d;
        float* dkb = f32(dk) + b * n * dk.ld + kvh * d;
        float* dvb = f32(dv) + b * n * dv.ld + kvh * d;
        const float* row_lse = stats + (b * s.heads + h) * n;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                    static_cast<int>(n), static_cast<int>(d), scale, qb, static_cast<int>(q.ld), kb,
                    static_cast<int>(k.ld), 0.0f, p.data(), static_cast<int>(n));
        for (int64_t i = 0; i < n; ++i) {
          const int64_t last = s.causal ? i : n - 1;
          float* row = p.data() + i * n;
          for (int64_t j = 0; j < n; ++j)
            row[j] = j <= last ? std::exp(row[j] - row_lse[i]) : 0.0f;
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += static_cast<double>(ob[i * out.ld + c]) * gb[i * dout.ld + c];
          delta[static_cast<size_t>(i)] = static_cast<float>(dot);
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(n),
                    static_cast<int>(d), static_cast<int>(n), 1.0f, p.data(), static_cast<int>(n),
                    gb, static_cast<int>(dout.ld), 1.0f, dvb, static_cast<int>(dv.ld));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                    static_cast<int>(n), static_cast<int>(d), 1.0f, gb, static_cast<int>(dout.ld),
                    vb, static_cast<int>(v.ld), 0.0f, dp.data(), static_cast<int>(n));
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const size_t e = static_cast<size_t>(i * n + j);
            dp[e] = p[e] * (dp[e] - delta[static_cast<size_t>(i)]) * scale;
          }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n),
                    static_cast<int>(d), static_cast<int>(n), 1.0f, dp.data(), static_cast<int>(n),
                    kb, static_cast<int>(k.ld), 0.0f, dqb, static_cast<int>(dq.ld));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(n),
                    static_cast<int>(d), static_cast<int>(n), 1.0f, dp.data(), static_cast<int>(n),
                    qb, static_cast<int>(q.ld), 1.0f, dkb, static_cast<int>(dk.ld));
      }
  }

  void axpy(float alpha, const Tensor& x, Tensor y) override {
    require_same_shape(x, y);
    for (int64_t r = 0; r < y.rows; ++r)
      cblas_saxpy(static_cast<int>(y.cols), alpha, f32(x) + r * x.ld, 1, f32(y) + r * y.ld, 1);
  }

private:
  void attend(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
              Tensor out, float* lse, AttentionImpl impl) {
    RIDGELINE_REQUIRE(s.heads % s.kv_heads == 0, "attention: heads must be a multiple of kv_heads");
    RIDGELINE_REQUIRE(q.rows == s.batch * s.seq && out.rows == q.rows, "attention: q rows");
    RIDGELINE_REQUIRE(k.rows == s.batch * s.capacity && v.rows == k.rows, "attention: kv rows");
    RIDGELINE_REQUIRE(s.context <= s.capacity && s.seq <= s.context, "attention: context");
    if (impl == AttentionImpl::cudnn)
      throw UsageError("--attention cudnn needs the cuda backend (cuDNN runs on NVIDIA GPUs)");
    const int64_t d = s.head_dim;
    // Causal: query i sees keys j <= context - seq + i; otherwise every key.
    const int64_t shift = s.causal ? s.context - s.seq : s.context - 1;
    const int64_t group = s.heads / s.kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    // Naive: the whole [seq, context] score block per head at once; fused: query tiles only.
    const int64_t block = impl == AttentionImpl::naive ? s.seq : std::min(kQueryBlock, s.seq);
    std::vector<float> scores(static_cast<size_t>(block * s.context));
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t kvh = h / group;
        const float* kb = f32(k) + (b * s.capacity) * k.ld + kvh * d;
        const float* vb = f32(v) + (b * s.capacity) * v.ld + kvh * d;
        for (int64_t q0 = 0; q0 < s.seq; q0 += block) {
          const int64_t nq = std::min(block, s.seq - q0);
          // Query i (global index q0 + i) sees keys j <= last(i).
          const int64_t visible = std::min(s.context, shift + q0 + nq);
          const float* qb = f32(q) + (b * s.seq + q0) * q.ld + h * d;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nq),
                      static_cast<int>(visible), static_cast<int>(d), scale, qb,
                      static_cast<int>(q.ld), kb, static_cast<int>(k.ld), 0.0f, scores.data(),
                      static_cast<int>(visible));
          for (int64_t i = 0; i < nq; ++i) {
            float* row = scores.data() + i * visible;
            const int64_t last = std::min(s.context - 1, shift + q0 + i);
            float mx = -INFINITY;
            for (int64_t j = 0; j <= last; ++j)
              mx = std::max(mx, row[j]);
            float sum = 0;
            for (int64_t j = 0; j <= last; ++j) {
              row[j] = std::exp(row[j] - mx);
              sum += row[j];
            }
            const float inv = 1.0f / sum;
            if (lse) lse[(b * s.heads + h) * s.seq + q0 + i] = mx + std::log(sum);
            for (int64_t j = 0; j <= last; ++j)
              row[j] *= inv;
            for (int64_t j = last + 1; j < visible; ++j)
              row[j] = 0.0f;
          }
          float* ob = f32(out) + (b * s.seq + q0) * out.ld + h * d;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nq),
                      static_cast<int>(d), static_cast<int>(visible), 1.0f, scores.data(),
                      static_cast<int>(visible), vb, static_cast<int>(v.ld), 0.0f, ob,
                      static_cast<int>(out.ld));
        }
      }
    }
  }

  // Rotates pairs (i, i + half) of every head by sign * the position's angle.
  void rotate(Tensor x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0, float theta,
              double sign) {
    RIDGELINE_REQUIRE(heads * head_dim <= x.cols && head_dim % 2 == 0, "rotary: bad head layout");
    const int64_t half = head_dim / 2;
    std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
    for (int64_t r = 0; r < x.rows; ++r) {
      const double pos = static_cast<double>(pos0 + r % seq_len);
      for (int64_t i = 0; i < half; ++i) {
        const double freq = std::pow(static_cast<double>(theta),
                                     -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
        cos_t[static_cast<size_t>(i)] = static_cast<float>(std::cos(pos * freq));
        sin_t[static_cast<size_t>(i)] = static_cast<float>(sign * std::sin(pos * freq));
      }
      float* row = f32(x) + r * x.ld;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = row + h * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half];
          v[i] = x1 * cos_t[static_cast<size_t>(i)] - x2 * sin_t[static_cast<size_t>(i)];
          v[i + half] = x2 * cos_t[static_cast<size_t>(i)] + x1 * sin_t[static_cast<size_t>(i)];
        }
      }
    }
  }

  // Layer norm (with_mean) or RMS norm backward, statistics recomputed in double.
  void norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, Tensor dx,
                     Tensor dgamma, Tensor* dbeta, float eps, bool accumulate, bool with_mean) {
    require_same_shape(x, dy);
    require_same_shape(x, dx);
    const int64_t n = x.cols;
    const float* g = f32(gamma);
    std::vector<double> dg(static_cast<size_t>(n), 0.0), db(static_cast<size_t>(n), 0.0);
    std::vector<double> xhat(static_cast<size_t>(n));
    for (int64_t r = 0; r < x.rows; ++r) {
      const float* in = f32(x) + r * x.ld;
      const float* gy = f32(dy) + r * dy.ld;
      float* out = f32(dx) + r * dx.ld;
      double mu = 0, sq = 0;
      if (with_mean) {
        for (int64_t c = 0; c < n; ++c)
          mu += in[c];
        mu /= static_cast<double>(n);
      }
      for (int64_t c = 0; c < n; ++c)
        sq += (in[c] - mu) * (in[c] - mu);
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
      double sum_g = 0, sum_gx = 0; // sums of dxhat and dxhat * xhat over the row
      for (int64_t c = 0; c < n; ++c) {
        const auto i = static_cast<size_t>(c);
        xhat[i] = (in[c] - mu) * inv;
        const double dxhat = static_cast<double>(gy[c]) * g[c];
        sum_g += dxhat;
        sum_gx += dxhat * xhat[i];
        dg[i] += static_cast<double>(gy[c]) * xhat[i];
        db[i] += gy[c];
      }
      const double nn = static_cast<double>(n);
      for (int64_t c = 0; c < n; ++c) {
        const auto i = static_cast<size_t>(c);
        const double dxhat = static_cast<double>(gy[c]) * g[c];
        const double centre = with_mean ? sum_g / nn : 0.0;
        out[c] = static_cast<float>(inv * (dxhat - centre - xhat[i] * sum_gx / nn));
      }
    }
    float* pg = f32(dgamma);
    for (int64_t c = 0; c < n; ++c)
      pg[c] = static_cast<float>(dg[static_cast<size_t>(c)] + (accumulate ? pg[c] : 0.0f));
    if (dbeta) {
      float* pb = f32(*dbeta);
      for (int64_t c = 0; c < n; ++c)
        pb[c] = static_cast<float>(db[static_cast<size_t>(c)] + (accumulate ? pb[c] : 0.0f));
    }
  }

  HostClock m_clock;
  char m_lane_tags[kLaneCount] = {};
  volatile uint32_t m_sink = 0; // the read pass's sum: a store the compiler must make
};

} // namespace

std::unique_ptr<Backend> make_host_backend() {
  return std::make_unique<HostBackend>();
}

} // namespace ridgeline
