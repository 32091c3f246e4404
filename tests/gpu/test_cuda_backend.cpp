// The CUDA backend against the host reference: every kernel on small and odd shapes from the
// same generated inputs, the roof kernels byte for byte. Tolerance: relative L2 error
// ||gpu - host|| / ||host|| < 2e-2 for bf16/fp16 storage (a few bf16 roundings of 2^-9 each).
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "collectives/half_types.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"
#include "models/moe_routing.hpp"
#include "tests/support/backend_pair.hpp"

namespace ridgeline {
namespace {

constexpr double kTolerance = 2e-2;

#define REQUIRE_GPU()                                                                              \
  do {                                                                                             \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";                        \
  } while (0)

bool any_nan(const std::vector<float>& v) {
  for (float x : v)
    if (std::isnan(x)) return true;
  return false;
}

/// A host backend and a CUDA backend with helpers that give both the same tensors.
class CudaVsHost : public ::testing::Test {
protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    m_gpu = make_cuda_backend(0, DType::bf16);
    m_host = make_host_backend();
  }

  using Pair = BackendPair;

  /// rows x cols on both backends (GPU rows padded to `ld`), random in [-scale, scale).
  Pair make(int64_t rows, int64_t cols, uint64_t tensor, float scale = 1.0f, int64_t ld = 0) {
    return make_backend_pair(*m_gpu, *m_host, DType::bf16, rows, cols,
                             GenKey{42, tensor, cols, scale}, ld);
  }
  Pair zeros(int64_t rows, int64_t cols) {
    return make_backend_pair(*m_gpu, *m_host, DType::bf16, rows, cols, GenKey{42, 0, cols, 0.0f});
  }
  void expect_close(const Pair& p, const char* what, double tol = kTolerance) {
    const std::vector<float> g = m_gpu->to_host(p.gpu);
    const std::vector<float> h = m_host->to_host(p.host);
    EXPECT_FALSE(any_nan(g)) << what;
    EXPECT_LT(relative_error(g, h), tol) << what;
  }

  std::unique_ptr<Backend> m_gpu;
  std::unique_ptr<Backend> m_host;
};

TEST(CudaBackend, RejectsUnsupportedDtype) {
  EXPECT_THROW(make_cuda_backend(0, DType::f32), UsageError);
}

TEST(CudaBackend, SamplerReadsClocksAndPowerInOrder) {
  REQUIRE_GPU();
  GpuSampler sampler(0, 5);
  const int64_t start = sampler.now_ns();
  while (sampler.now_ns() - start < 100'000'000) {
  }
  const std::vector<GpuSample> samples = sampler.stop();
  ASSERT_GE(samples.size(), 5u) << "5 ms period over 100 ms";
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_GT(samples[i].sm_clock_mhz, 0) << i;
    EXPECT_GT(samples[i].mem_clock_mhz, 0) << i;
    EXPECT_GT(samples[i].power_w, 0) << i;
    EXPECT_GT(samples[i].power_avg_w, 0) << i;
    EXPECT_GE(samples[i].clock_event_reasons, 0) << i;
    if (i > 0) {
      EXPECT_GE(samples[i].t_ns, samples[i - 1].t_ns);
    }
  }
  EXPECT_TRUE(sampler.stop().empty()) << "a second stop returns nothing more";
}

TEST(CudaBackend, StackAndTopology) {
  REQUIRE_GPU();
  const GpuInfo info = query_gpu(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.memory_total_bytes, 0);
  EXPECT_GE(info.compute_major, 8);
  const auto versions = cuda_stack_versions();
  bool runtime = false, nccl = false, lt = false;
  for (const auto& kv : versions) {
    runtime |= kv.first == "cuda_runtime";
    nccl |= kv.first == "nccl";
    lt |= kv.first == "cublaslt";
  }
  EXPECT_TRUE(runtime && nccl && lt);
  const auto links = gpu_link_matrix();
  if (!links.empty()) {
    ASSERT_EQ(links.size(), static_cast<size_t>(cuda_device_count()));
    for (size_t i = 0; i < links.size(); ++i)
      EXPECT_EQ(links[i][i], "X");
  }
}

// The generator must give the GPU the host's fp32 values bit for bit before rounding.
TEST_F(CudaVsHost, GeneratorBitExact) {
  for (int64_t cols : {64, 53}) { // vector path and scalar path
    const int64_t rows = 37;
    Buffer b = m_gpu->allocate(rows, cols);
    const Tensor t = b.view(rows, cols, DType::bf16);
    const GenKey key{7, tensor_id(3, 5), 1000, 0.25f};
    m_gpu->fill_random(t, key, 11, 17);
    std::vector<uint16_t> raw(static_cast<size_t>(rows * cols));
    m_gpu->download(raw.data(), t.data, raw.size() * 2);
    int wrong = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        wrong +=
            raw[static_cast<size_t>(r * cols + c)] != float_to_bf16(generate(key, 11 + r, 17 + c));
    EXPECT_EQ(wrong, 0) << "cols " << cols;
  }
  auto f16 = make_cuda_backend(0, DType::f16);
  Buffer b = f16->allocate(9, 24);
  const Tensor t = b.view(9, 24, DType::f16);
  const GenKey key{1, 2, 24, 3.0f};
  f16->fill_random(t, key, 0, 0);
  std::vector<uint16_t> raw(9 * 24);
  f16->download(raw.data(), t.data, raw.size() * 2);
  for (int64_t i = 0; i < 9 * 24; ++i)
    EXPECT_EQ(raw[static_cast<size_t>(i)], float_to_f16(generate(key, i / 24, i % 24)));
}

// An MoE layer's dispatch gather and weighted combine: the kernels against the host's row loops,
// with repeated and untouched destinations, on vector-wide (128) and scalar (72) rows.
TEST_F(CudaVsHost, GatherAndScatterAddRows) {
  const std::vector<int64_t> index = {3, 0, 3, 5, 1, 3, 0, 6};
  const std::vector<float> weight = {0.5f, 1.0f, -0.25f, 2.0f, 0.75f, 1.5f, -1.0f, 0.125f};
  for (int64_t cols : {128, 72}) {
    const Pair x = make(7, cols, 1);
    Pair rows = zeros(static_cast<int64_t>(index.size()), cols);
    m_gpu->gather_rows(x.gpu, index, rows.gpu);
    m_host->gather_rows(x.host, index, rows.host);
    expect_close(rows, "gather_rows");
    const std::vector<float> g = m_gpu->to_host(rows.gpu), x0 = m_gpu->to_host(x.gpu);
    for (size_t r = 0; r < index.size(); ++r) // a gather copies bits
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(g[r * static_cast<size_t>(cols) + static_cast<size_t>(c)],
                  x0[static_cast<size_t>(index[r] * cols + c)]);
    Pair y = make(7, cols, 2);
    m_gpu->scatter_add_rows(rows.gpu, index, weight, y.gpu);
    m_host->scatter_add_rows(rows.host, index, weight, y.host);
    expect_close(y, "scatter_add_rows");
  }
}

// The router's choice on the device against the host's rule on the same (bf16) logits: fewer
// experts than a warp's lanes, several per lane, k of 1, 2 and 8, softmax and sigmoid gating;
// bf16 logits tie often, so the ties go to the lower expert on both.
TEST_F(CudaVsHost, RouteTopK) {
  struct Case {
    int64_t experts, k;
  };
  const int64_t tokens = 300;
  for (const Case c : {Case{8, 2}, Case{60, 1}, Case{128, 8}, Case{256, 8}})
    for (const bool sigmoid : {false, true}) {
      SCOPED_TRACE(std::to_string(c.experts) + " experts, k " + std::to_string(c.k) +
                   (sigmoid ? ", sigmoid" : ", softmax"));
      const Pair logits = make(tokens, c.experts, 5, 2.0f);
      std::vector<int32_t> expert;
      std::vector<float> weight;
      m_gpu->route_top_k(logits.gpu, c.k, sigmoid, expert, weight);
      const Routing want = route_top_k(m_gpu->to_host(logits.gpu), tokens, c.experts, c.k,
                                       sigmoid ? GatingKind::sigmoid : GatingKind::softmax);
      EXPECT_EQ(expert, want.expert);
      ASSERT_EQ(weight.size(), want.weight.size());
      for (size_t i = 0; i < weight.size(); ++i)
        ASSERT_NEAR(weight[i], want.weight[i], 1e-6f) << "choice " << i;
    }
}

// A mixed step's per-row rotary and decode cache appends: the kernels against the host's
// per-run and per-row calls, on rows of a wider tensor (the step's qkv columns), positions that
// repeat, fall back and reach 30000, and rows vector-wide (128) and scalar (72).
TEST_F(CudaVsHost, RotaryRowsAndScatterRows) {
  const std::vector<int64_t> positions = {4, 5, 6, 30000, 0, 0, 17, 18, 2047};
  const int64_t rows = static_cast<int64_t>(positions.size()), heads = 6, d = 64;
  Pair x = make(rows, heads * d + 64, 1);
  const Tensor xg = x.gpu.cols_slice(0, heads * d), xh = x.host.cols_slice(0, heads * d);
  m_gpu->rotary_rows(xg, heads, d, positions, 500000.0f);
  m_host->rotary_rows(xh, heads, d, positions, 500000.0f);
  expect_close(x, "rotary_rows");
  const std::vector<int64_t> index = {11, 0, 5, 3, 8};
  for (int64_t cols : {128, 72}) {
    const Pair src = make(static_cast<int64_t>(index.size()), cols, 2);
    Pair out = make(12, cols, 3);
    m_gpu->scatter_rows(src.gpu, index, out.gpu);
    m_host->scatter_rows(src.host, index, out.host);
    expect_close(out, "scatter_rows");
    const std::vector<float> g = m_gpu->to_host(out.gpu), s = m_gpu->to_host(src.gpu);
    for (size_t r = 0; r < index.size(); ++r) { // a scatter copies bits
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(g[static_cast<size_t>(index[r] * cols + c)],
                  s[r * static_cast<size_t>(cols) + static_cast<size_t>(c)]);
      }
    }
  }
}

// The grouped GEMM of an MoE layer's experts under each GroupedGemm choice, against the host's
// loop: groups of uneven rows, an empty one, and output rows inside a wider buffer. The streams
// run the loop's own cuBLASLt plans, so their result is the loop's, bit for bit.
TEST_F(CudaVsHost, GroupedGemm) {
  const int64_t k = 200, n = 72;
  const std::vector<int64_t> offsets = {0, 37, 37, 165, 166, 230};
  const int64_t rows = offsets.back();
  const Pair a = make(rows, k, 1);
  std::vector<Pair> w;
  std::vector<Tensor> wg, wh;
  for (int g = 0; g + 1 < static_cast<int>(offsets.size()); ++g) {
    w.push_back(make(n, k, 10 + g));
    wg.push_back(w.back().gpu);
    wh.push_back(w.back().host);
  }
  std::vector<float> looped;
  for (const GroupedGemm how : {GroupedGemm::loop, GroupedGemm::streams, GroupedGemm::cublas}) {
    SCOPED_TRACE(grouped_gemm_name(how));
    m_gpu->set_grouped_gemm(how);
    Pair out = zeros(rows, 2 * n);
    const Tensor og = out.gpu.cols_slice(0, n), oh = out.host.cols_slice(0, n);
    m_gpu->grouped_gemm(a.gpu, wg, offsets, og);
    m_host->grouped_gemm(a.host, wh, offsets, oh);
    expect_close(out, "grouped_gemm");
    const std::vector<float> got = m_gpu->to_host(out.gpu);
    if (how == GroupedGemm::loop) looped = got;
    if (how == GroupedGemm::streams) {
      EXPECT_EQ(got, looped);
    }
  }
  m_gpu->set_grouped_gemm(GroupedGemm::streams);
}

TEST_F(CudaVsHost, Gemm) {
  struct Case {
    int64_t m, n, k, lda;
  };
  for (const Case c : {Case{64, 64, 64, 0}, Case{37, 53, 29, 0}, Case{33, 40, 24, 40},
                       Case{1, 96, 128, 0}, Case{130, 72, 200, 208}}) {
    Pair a = make(c.m, c.k, 1, 1.0f, c.lda);
    Pair w = make(c.n, c.k, 2);
    Pair out = zeros(c.m, c.n);
    m_gpu->gemm(a.gpu, w.gpu, out.gpu);
    m_host->gemm(a.host, w.host, out.host);
    expect_close(out, "gemm");
  }
}

// gemm_add: the addend summed in cuBLASLt's epilogue (heuristic and searched plans), or, under
// --gemm-algo skinny, added after the GEMM; against the host, with the addend left unchanged and
// rows inside a larger buffer (the ring's sub-pieces are row ranges of a window).
TEST_F(CudaVsHost, GemmAdd) {
  for (const GemmAlgo algo : {GemmAlgo::heuristic, GemmAlgo::search, GemmAlgo::skinny}) {
    m_gpu->set_gemm_algo(algo);
    for (const int64_t m : {2, 37, 128}) {
      Pair a = make(m, 200, 1), w = make(72, 200, 2);
      Pair addend = make(2 * m, 72, 3, 4.0f), out = zeros(2 * m, 72);
      const Tensor ga = addend.gpu.rows_slice(m, m), ha = addend.host.rows_slice(m, m);
      const std::vector<float> before = m_gpu->to_host(addend.gpu);
      m_gpu->gemm_add(a.gpu, w.gpu, ga, out.gpu.rows_slice(m, m));
      m_host->gemm_add(a.host, w.host, ha, out.host.rows_slice(m, m));
      const std::string what =
          "gemm_add m=" + std::to_string(m) + " algo " + std::to_string(static_cast<int>(algo));
      expect_close(out, what.c_str());
      EXPECT_EQ(m_gpu->to_host(addend.gpu), before) << what;
    }
  }
  m_gpu->set_gemm_algo(GemmAlgo::heuristic);
}

// --gemm-algo skinny: the project's CUDA-core kernel up to 4 rows, cuBLASLt's first choice from
// 5 rows on; the shapes it takes are recorded once each.
TEST_F(CudaVsHost, SkinnyGemmTakesFourRows) {
  m_gpu->set_gemm_algo(GemmAlgo::skinny);
  for (const int64_t m : {4, 5, 16}) {
    Pair a = make(m, 256, 1), w = make(96, 256, 2), out = zeros(m, 96);
    m_gpu->gemm(a.gpu, w.gpu, out.gpu);
    m_host->gemm(a.host, w.host, out.host);
    expect_close(out, ("m=" + std::to_string(m)).c_str());
    EXPECT_EQ(m_gpu->gemm_choices().size(), 1u) << "m=" << m;
  }
  m_gpu->set_gemm_algo(GemmAlgo::heuristic);
}

// RIDGELINE_SKINNY_ROWS=16: the project's kernels for at most 16 rows: the CUDA-core one up to 4
// rows (k whose rows split into uneven slices, and one row whose warps take their slices in
// several rounds, the last partial: 2049 words in 8 slices of 257, 128 a round), the MMA one at
// row counts on both sides of its MMA's half (8), column counts off its 8-column tiles, k off its
// 32-wide chunks, padded activation rows, a wide grid; cuBLASLt beyond 16 rows. Every shape taken
// is recorded once.
TEST_F(CudaVsHost, SkinnyGemm) {
  struct Case {
    int64_t m, n, k, lda;
    bool skinny;
  };
  setenv("RIDGELINE_SKINNY_ROWS", "16", 1);
  m_gpu = make_cuda_backend(0, DType::bf16);
  unsetenv("RIDGELINE_SKINNY_ROWS");
  m_gpu->set_gemm_algo(GemmAlgo::skinny);
  size_t taken = 0;
  for (const Case c :
       {Case{1, 96, 128, 0, true}, Case{5, 60, 40, 48, true}, Case{8, 8, 8, 0, true},
        Case{9, 131, 200, 0, true}, Case{16, 4104, 4096, 4160, true},
        Case{16, 1024, 14336, 0, true}, Case{3, 10000, 264, 0, true},
        Case{2, 300, 4104, 4112, true}, Case{4, 77, 8, 0, true}, Case{4, 1000, 2048, 0, true},
        Case{1, 50, 16392, 0, true}, Case{1, 33, 4104, 0, true}, Case{17, 64, 64, 0, false},
        Case{4, 64, 30, 0, false}}) {
    Pair a = make(c.m, c.k, 1, 1.0f, c.lda);
    Pair w = make(c.n, c.k, 2);
    Pair out = zeros(c.m, c.n);
    m_gpu->gemm(a.gpu, w.gpu, out.gpu);
    m_gpu->gemm(a.gpu, w.gpu, out.gpu); // recorded once per shape
    m_host->gemm(a.host, w.host, out.host);
    const std::string what =
        "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
    expect_close(out, what.c_str());
    taken += c.skinny ? 1 : 0;
    ASSERT_EQ(m_gpu->gemm_choices().size(), taken) << what;
    if (c.skinny) {
      EXPECT_NE(m_gpu->gemm_choices().back().find(what + " bf16: skinny kernel"), std::string::npos)
          << m_gpu->gemm_choices().back();
    }
  }
  m_gpu->set_gemm_algo(GemmAlgo::heuristic);
}

// The CUDA-core skinny kernel with each epilogue (decode's small ops inside the GEMM's kernel)
// against the host's GEMM then op: one and two rows (three and four take the GEMM and the op in
// turn); one, two, four and eight warps per column (at eight, the paired epilogues' CTAs hold
// one pair in 16 warps); heads of 64 and 128 columns, rotated or not, appended to the middle of
// a cache whose sequences hold 7 slots; each without and with the RMS norm of the input folded in
// front (at three and four rows the norm's own kernel runs first).
TEST_F(CudaVsHost, GemmEpilogues) {
  using Kind = GemmEpilogue::Kind;
  setenv("RIDGELINE_EPILOGUES", "norm,rotary,act,residual", 1); // the residual only when asked
  m_gpu = make_cuda_backend(0, DType::bf16);
  unsetenv("RIDGELINE_EPILOGUES");
  m_gpu->set_gemm_algo(GemmAlgo::skinny);
  for (const int64_t m : {1, 2, 3, 4})
    for (const int64_t k : {256, 4096, 16392}) {
      for (const Kind kind : {Kind::gelu, Kind::swiglu, Kind::residual, Kind::rotary_append}) {
        ASSERT_EQ(m_gpu->fuses_epilogue(m, kind), m <= 2);
        EXPECT_FALSE(m_host->fuses_epilogue(m, kind));
      }
      ASSERT_EQ(m_gpu->fuses_rms_norm(m), m <= 2);
      EXPECT_FALSE(m_host->fuses_rms_norm(m));
      Pair a = make(m, k, 1), gamma = make(1, k, 5), normed = zeros(m, k);
      for (const bool norm : {false, true}) {
        const std::string at =
            "m=" + std::to_string(m) + " k=" + std::to_string(k) + (norm ? " norm" : "");
        // The norm in front, when asked, on both sides.
        auto norm_in_front = [&](GemmEpilogue& eg, GemmEpilogue& eh) {
          if (!norm) return;
          eg.norm_gamma = gamma.gpu;
          eh.norm_gamma = gamma.host;
          eg.norm_out = normed.gpu;
          eh.norm_out = normed.host;
          eg.norm_eps = eh.norm_eps = 1e-5f;
        };
        // gelu and the residual add: 1000 columns; swiglu: 2 x 500.
        for (const Kind kind : {Kind::gelu, Kind::residual, Kind::swiglu}) {
          const int64_t n = 1000, cols = kind == Kind::swiglu ? n / 2 : n;
          Pair w = make(n, k, 2, 0.05f);
          Pair c = zeros(m, n);
          Pair out = kind == Kind::residual ? make(m, cols, 3) : zeros(m, cols);
          GemmEpilogue eg, eh;
          eg.kind = eh.kind = kind;
          eg.out = out.gpu;
          eh.out = out.host;
          norm_in_front(eg, eh);
          m_gpu->gemm_epilogue(a.gpu, w.gpu, c.gpu, eg);
          m_host->gemm_epilogue(a.host, w.host, c.host, eh);
          expect_close(out, (at + (kind == Kind::gelu       ? " gelu"
                                   : kind == Kind::residual ? " residual"
                                                            : " swiglu"))
                                .c_str());
        }
        for (const int64_t d : {64, 128})
          for (const int64_t rotated : {0, 6}) {
            // 4 query heads, then 2 key and 2 value heads; the first `rotated` heads rotate.
            const int64_t n = 8 * d, col0 = 4 * d, slots = 7, pos = 5;
            Pair w = make(n, k, 4, 0.05f);
            Pair c = zeros(m, n);
            Pair cache = zeros(m * slots, n - col0);
            GemmEpilogue eg, eh;
            eg.kind = eh.kind = Kind::rotary_append;
            eg.head_dim = eh.head_dim = d;
            eg.rotated_heads = eh.rotated_heads = rotated;
            eg.pos = eh.pos = pos;
            eg.theta = eh.theta = 10000.0f;
            eg.cache = cache.gpu;
            eh.cache = cache.host;
            eg.cache_seq_rows = eh.cache_seq_rows = slots;
            eg.cache_col0 = eh.cache_col0 = col0;
            norm_in_front(eg, eh);
            m_gpu->gemm_epilogue(a.gpu, w.gpu, c.gpu, eg);
            m_host->gemm_epilogue(a.host, w.host, c.host, eh);
            const std::string what =
                at + " d=" + std::to_string(d) + " rotated=" + std::to_string(rotated);
            expect_close(c, (what + " rows").c_str());
            expect_close(cache, (what + " cache").c_str());
            // Only the appended slots hold anything.
            const std::vector<float> g = m_gpu->to_host(cache.gpu);
            int64_t stray = 0;
            for (int64_t r = 0; r < m * slots; ++r)
              for (int64_t j = 0; j < n - col0; ++j)
                stray += r % slots != pos && g[static_cast<size_t>(r * (n - col0) + j)] != 0.0f;
            EXPECT_EQ(stray, 0) << what;
          }
      }
    }
  // Each fused launch is recorded once, with its epilogue (and its norm).
  int recorded = 0, normed_lines = 0;
  for (const std::string& line : m_gpu->gemm_choices()) {
    recorded += line.find(", epilogue: ") != std::string::npos;
    normed_lines += line.find(", prologue: rms norm, epilogue: ") != std::string::npos;
  }
  EXPECT_EQ(recorded, 2 * 3 * (3 + 2) * 2) << "one line per shape, epilogue and norm";
  EXPECT_EQ(normed_lines, 2 * 3 * (3 + 2)) << "one line per shape and epilogue";
  m_gpu->set_gemm_algo(GemmAlgo::heuristic);
  EXPECT_FALSE(m_gpu->fuses_epilogue(1, Kind::swiglu));
  // By default the residual add and the norm are not folded; rotary and the activation are.
  auto plain = make_cuda_backend(0, DType::bf16);
  plain->set_gemm_algo(GemmAlgo::skinny);
  EXPECT_FALSE(plain->fuses_epilogue(1, Kind::residual));
  EXPECT_TRUE(plain->fuses_epilogue(1, Kind::rotary_append));
  EXPECT_TRUE(plain->fuses_epilogue(1, Kind::swiglu));
  EXPECT_FALSE(plain->fuses_rms_norm(1));
}

// Both skinny kernels in fp16 against cuBLASLt's, and replayed from a graph (where they are
// programmatic dependent launches on compute capability 9.0) against their eager results.
class SkinnyHalf : public ::testing::TestWithParam<int64_t> {};
TEST_P(SkinnyHalf, AndGraph) {
  REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::f16);
  const int64_t m = GetParam(), n = 3000, k = 2048;
  Buffer a = gpu->allocate(m, k), w = gpu->allocate(n, k), c1 = gpu->allocate(m, n),
         c2 = gpu->allocate(m, n), x = gpu->allocate(m, k);
  const Tensor ta = a.view(m, k, DType::f16), tw = w.view(n, k, DType::f16),
               tc1 = c1.view(m, n, DType::f16), tc2 = c2.view(m, n, DType::f16),
               tx = x.view(m, k, DType::f16);
  gpu->fill_random(ta, GenKey{5, 1, k, 1.0f}, 0, 0);
  gpu->fill_random(tw, GenKey{5, 2, k, 0.05f}, 0, 0);
  gpu->gemm(ta, tw, tc1);
  gpu->set_gemm_algo(GemmAlgo::skinny);
  gpu->gemm(ta, tw, tc2);
  const std::vector<float> eager = gpu->to_host(tc2);
  EXPECT_LT(relative_error(eager, gpu->to_host(tc1)), 1e-2);
  // In the graph the GEMM follows a kernel that writes its input: it must wait for it.
  gpu->fill_value(tx, 0.0f);
  gpu->synchronize();
  gpu->capture_begin(Lane::compute);
  gpu->copy(ta, tx);
  gpu->gemm(tx, tw, tc2);
  const int graph = gpu->capture_end(Lane::compute);
  gpu->fill_value(tc2, 0.0f);
  for (int i = 0; i < 3; ++i)
    gpu->replay(graph, Lane::compute);
  EXPECT_EQ(gpu->to_host(tc2), eager);
}
INSTANTIATE_TEST_SUITE_P(Rows, SkinnyHalf, ::testing::Values(12, 1, 3));

// The residual add fused with the norm: bit for bit the unfused add then norm on the GPU (both
// norms, vectorised and scalar rows, the sum written in place over x), and close to the host's.
TEST_F(CudaVsHost, AddNormIsAddThenNorm) {
  for (int64_t cols : {72, 45})
    for (bool layer : {true, false})
      for (bool in_place : {false, true}) {
        const int64_t rows = 7;
        Pair x = make(rows, cols, 30, 2.0f), r = make(rows, cols, 31, 1.0f);
        Pair gamma = make(1, cols, 32, 1.0f), beta = make(1, cols, 33, 0.5f);
        Pair sum = zeros(rows, cols), y = zeros(rows, cols);
        Pair sum2 = zeros(rows, cols), y2 = zeros(rows, cols);
        const Tensor gb = layer ? beta.gpu : Tensor{}, hb = layer ? beta.host : Tensor{};
        m_gpu->add(x.gpu, r.gpu, sum2.gpu);
        if (layer)
          m_gpu->layer_norm(sum2.gpu, gamma.gpu, beta.gpu, y2.gpu, 1e-5f);
        else
          m_gpu->rms_norm(sum2.gpu, gamma.gpu, y2.gpu, 1e-5f);
        const Pair& s = in_place ? x : sum;
        m_gpu->add_norm(x.gpu, r.gpu, s.gpu, gamma.gpu, gb, y.gpu, 1e-5f);
        m_host->add_norm(x.host, r.host, s.host, gamma.host, hb, y.host, 1e-5f);
        const std::string what = "cols " + std::to_string(cols) + (layer ? " layer" : " rms") +
                                 (in_place ? " in place" : "");
        EXPECT_EQ(m_gpu->to_host(s.gpu), m_gpu->to_host(sum2.gpu)) << what;
        EXPECT_EQ(m_gpu->to_host(y.gpu), m_gpu->to_host(y2.gpu)) << what;
        expect_close(y, what.c_str());
      }
}

// Two partial sums (a ring reduce-scatter's own piece and a peer's) added as the residual
// branch: bit for bit add(p, q, p) then add_norm() / add() on the GPU, p left unchanged, both
// norms, vectorised and scalar rows, the sum in place over x; close to the host's.
TEST_F(CudaVsHost, AddPartialsIsAddThenAdd) {
  for (int64_t cols : {72, 45})
    for (bool layer : {true, false})
      for (bool in_place : {false, true}) {
        const int64_t rows = 7;
        Pair x = make(rows, cols, 40, 2.0f), p = make(rows, cols, 41, 1.0f);
        Pair q = make(rows, cols, 42, 1.0f);
        Pair gamma = make(1, cols, 43, 1.0f), beta = make(1, cols, 44, 0.5f);
        Pair sum = zeros(rows, cols), y = zeros(rows, cols), added = zeros(rows, cols);
        Pair pq = zeros(rows, cols), sum2 = zeros(rows, cols), y2 = zeros(rows, cols);
        const Tensor gb = layer ? beta.gpu : Tensor{}, hb = layer ? beta.host : Tensor{};
        const std::vector<float> p_before = m_gpu->to_host(p.gpu);
        m_gpu->add(p.gpu, q.gpu, pq.gpu);
        m_gpu->add_norm(x.gpu, pq.gpu, sum2.gpu, gamma.gpu, gb, y2.gpu, 1e-5f);
        m_gpu->add_partials(x.gpu, p.gpu, q.gpu, added.gpu);
        m_host->add_partials(x.host, p.host, q.host, added.host);
        const Pair& s = in_place ? x : sum;
        m_gpu->add_partials_norm(x.gpu, p.gpu, q.gpu, s.gpu, gamma.gpu, gb, y.gpu, 1e-5f);
        m_host->add_partials_norm(x.host, p.host, q.host, s.host, gamma.host, hb, y.host, 1e-5f);
        const std::string what = "cols " + std::to_string(cols) + (layer ? " layer" : " rms") +
                                 (in_place ? " in place" : "");
        EXPECT_EQ(m_gpu->to_host(added.gpu), m_gpu->to_host(sum2.gpu)) << what;
        EXPECT_EQ(m_gpu->to_host(s.gpu), m_gpu->to_host(sum2.gpu)) << what;
        EXPECT_EQ(m_gpu->to_host(y.gpu), m_gpu->to_host(y2.gpu)) << what;
        EXPECT_EQ(m_gpu->to_host(p.gpu), p_before) << what;
        expect_close(added, (what + " add_partials").c_str());
        expect_close(y, what.c_str());
      }
}

TEST_F(CudaVsHost, ElementwiseAndNorms) {
  for (int64_t cols : {72, 45}) {
    const int64_t rows = 19;
    Pair x = make(rows, cols, 10, 2.0f);
    Pair y = make(rows, cols, 11);
    Pair gamma = make(1, cols, 12);
    Pair beta = make(1, cols, 13);
    Pair out = zeros(rows, cols);

    m_gpu->gelu(x.gpu, out.gpu);
    m_host->gelu(x.host, out.host);
    expect_close(out, "gelu");
    m_gpu->add(x.gpu, y.gpu, out.gpu);
    m_host->add(x.host, y.host, out.host);
    expect_close(out, "add");
    m_gpu->layer_norm(x.gpu, gamma.gpu, beta.gpu, out.gpu, 1e-5f);
    m_host->layer_norm(x.host, gamma.host, beta.host, out.host, 1e-5f);
    expect_close(out, "layer_norm");
    m_gpu->rms_norm(x.gpu, gamma.gpu, out.gpu, 1e-5f);
    m_host->rms_norm(x.host, gamma.host, out.host, 1e-5f);
    expect_close(out, "rms_norm");

    Pair gate_up = make(rows, 2 * cols, 14, 3.0f);
    m_gpu->swiglu(gate_up.gpu, out.gpu);
    m_host->swiglu(gate_up.host, out.host);
    expect_close(out, "swiglu");
  }
}

TEST_F(CudaVsHost, RotaryAndCopy) {
  // 3 and 11 heads: less than one and more than one chunk of the kernel's 8 heads per thread.
  for (int64_t head_dim : {64, 128})
    for (int64_t heads : {3, 11}) {
      const int64_t rows = 21;
      Pair x = make(rows, heads * head_dim + 8, 20);
      m_gpu->rotary(x.gpu, heads, head_dim, 7, 1000, 10000.0f);
      m_host->rotary(x.host, heads, head_dim, 7, 1000, 10000.0f);
      expect_close(x, heads == 3 ? "rotary, 3 heads" : "rotary, 11 heads");
    }
  Pair src = make(17, 40, 21, 1.0f, 48);
  Pair dst = zeros(17, 40);
  m_gpu->copy(src.gpu, dst.gpu);
  m_host->copy(src.host, dst.host);
  expect_close(dst, "copy", 1e-7);
}

struct AttentionCase {
  const char* name;
  int64_t batch, seq, context, capacity, heads, kv_heads, head_dim;
};

class CudaAttention : public CudaVsHost, public ::testing::WithParamInterface<AttentionCase> {};

TEST_P(CudaAttention, FusedAndNaiveMatchHost) {
  const AttentionCase c = GetParam();
  AttentionShape s;
  s.batch = c.batch;
  s.seq = c.seq;
  s.context = c.context;
  s.capacity = c.capacity;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  Pair q = make(c.batch * c.seq, c.heads * c.head_dim, 30);
  Pair k = make(c.batch * c.capacity, c.kv_heads * c.head_dim, 31);
  Pair v = make(c.batch * c.capacity, c.kv_heads * c.head_dim, 32);
  Pair fused = zeros(c.batch * c.seq, c.heads * c.head_dim);
  Pair naive = zeros(c.batch * c.seq, c.heads * c.head_dim);
  m_gpu->attention(s, q.gpu, k.gpu, v.gpu, fused.gpu, AttentionImpl::fused);
  m_gpu->attention(s, q.gpu, k.gpu, v.gpu, naive.gpu, AttentionImpl::naive);
  m_host->attention(s, q.host, k.host, v.host, fused.host, AttentionImpl::fused);
  m_host->attention(s, q.host, k.host, v.host, naive.host, AttentionImpl::naive);
  expect_close(fused, "fused");
  expect_close(naive, "naive");
  EXPECT_LT(relative_error(m_gpu->to_host(fused.gpu), m_gpu->to_host(naive.gpu)), kTolerance)
      << "fused vs naive";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttention,
    ::testing::Values(AttentionCase{"prefill_d64_gqa8_odd", 2, 77, 77, 77, 8, 1, 64},
                      AttentionCase{"prefill_d128_gqa2", 1, 200, 200, 200, 4, 2, 128},
                      AttentionCase{"prefill_d128_two_tiles", 1, 256, 256, 256, 2, 2, 128},
                      AttentionCase{"chunked_prefill_d64", 2, 50, 130, 160, 4, 4, 64},
                      AttentionCase{"decode_context1_d128", 3, 1, 1, 8, 8, 1, 128},
                      AttentionCase{"decode_context37_mha_d64", 3, 1, 37, 40, 8, 8, 64},
                      AttentionCase{"decode_context64_gqa4_d128", 2, 1, 64, 64, 8, 2, 128},
                      AttentionCase{"decode_context65_d128", 2, 1, 65, 70, 4, 4, 128},
                      AttentionCase{"decode_context1000_d64", 2, 1, 1000, 1024, 16, 2, 64},
                      AttentionCase{"decode_context1000_gqa16_d128", 1, 1, 1000, 1000, 16, 1, 128}),
    [](const ::testing::TestParamInfo<AttentionCase>& info) { return info.param.name; });

TEST_F(CudaVsHost, FusedRejectsOtherHeadDims) {
  AttentionShape s;
  s.seq = s.context = s.capacity = 16;
  s.heads = s.kv_heads = 1;
  s.head_dim = 96;
  Pair q = make(16, 96, 1);
  Pair out = zeros(16, 96);
  EXPECT_THROW(m_gpu->attention(s, q.gpu, q.gpu, q.gpu, out.gpu, AttentionImpl::fused), Error);
}

// A captured graph with a cross-lane fork/join must reproduce the eager result.
TEST_F(CudaVsHost, GraphReplayMatchesEager) {
  ASSERT_TRUE(m_gpu->supports_graphs());
  Pair a = make(48, 64, 40);
  Pair w = make(96, 64, 41);
  Pair h = zeros(48, 96);
  Pair eager = zeros(48, 96);
  Pair replayed = zeros(48, 96);
  auto layer = [&](const Tensor& out) {
    m_gpu->gemm(a.gpu, w.gpu, h.gpu);
    m_gpu->gelu(h.gpu, h.gpu);
    m_gpu->join(Lane::comm, Lane::compute);
    m_gpu->add(h.gpu, h.gpu, out, Lane::comm);
    m_gpu->join(Lane::compute, Lane::comm);
  };
  layer(eager.gpu);
  m_gpu->synchronize();
  m_gpu->capture_begin(Lane::compute);
  layer(replayed.gpu);
  const int id = m_gpu->capture_end(Lane::compute);
  m_gpu->synchronize();
  EXPECT_EQ(relative_error(m_gpu->to_host(replayed.gpu), std::vector<float>(48 * 96, 0.0f)), 0.0)
      << "capture must not execute";
  m_gpu->replay(id, Lane::compute);
  m_gpu->replay(id, Lane::compute);
  EXPECT_EQ(relative_error(m_gpu->to_host(replayed.gpu), m_gpu->to_host(eager.gpu)), 0.0);
}

/// The roof kernels' buffers: 64 MiB plus three 16-byte words, so that the grid-stride loops
/// end part way through a step; src holds a byte pattern that no written word can equal.
class RoofKernels : public ::testing::Test {
protected:
  static constexpr size_t kBytes = (size_t{64} << 20) + 48;

  void SetUp() override {
    REQUIRE_GPU();
    m_gpu = make_cuda_backend(0, DType::bf16);
    m_src = m_gpu->allocate_bytes(kBytes);
    m_dst = m_gpu->allocate_bytes(kBytes);
    m_pattern.resize(kBytes);
    for (size_t i = 0; i < kBytes; ++i)
      m_pattern[i] = static_cast<unsigned char>(i * 7 + 1);
    m_gpu->upload(m_src.data(), m_pattern.data(), kBytes);
  }

  std::vector<unsigned char> download(const Buffer& b) {
    std::vector<unsigned char> out(b.bytes());
    m_gpu->download(out.data(), b.data(), b.bytes());
    return out;
  }
  void zero(const Buffer& b) {
    const std::vector<unsigned char> zeros(b.bytes(), 0);
    m_gpu->upload(b.data(), zeros.data(), b.bytes());
  }
  /// Every 16-byte word of `got` equals its first and differs from the pattern there.
  void expect_written(const std::vector<unsigned char>& got) {
    ASSERT_EQ(got.size() % 16, 0u);
    for (size_t w = 0; w < got.size(); w += 16) {
      ASSERT_EQ(std::memcmp(got.data() + w, got.data(), 16), 0) << "word at byte " << w;
      ASSERT_NE(std::memcmp(got.data() + w, m_pattern.data() + w, 16), 0) << "word at byte " << w;
    }
  }

  std::unique_ptr<Backend> m_gpu;
  Buffer m_src, m_dst;
  std::vector<unsigned char> m_pattern;
};

TEST_F(RoofKernels, PassesMoveTheRightBytes) {
  // Short passes too: fewer words than one block's threads, and bytes past the pass untouched.
  for (size_t bytes : {size_t{16}, size_t{48}, kBytes}) {
    zero(m_dst);
    m_gpu->memory_pass(Backend::MemoryPass::copy, m_src, m_dst, bytes);
    const std::vector<unsigned char> got = download(m_dst);
    ASSERT_EQ(std::memcmp(got.data(), m_pattern.data(), bytes), 0) << bytes << " bytes";
    for (size_t i = bytes; i < kBytes; ++i)
      ASSERT_EQ(got[i], 0) << bytes << " bytes: byte " << i << " written";
  }
  m_gpu->memory_pass(Backend::MemoryPass::write, m_src, m_dst, kBytes);
  expect_written(download(m_dst));
  m_gpu->memory_pass(Backend::MemoryPass::read, m_src, m_dst, kBytes);
  m_gpu->empty_kernels(1000);
  m_gpu->empty_kernels(1, Lane::comm);
  m_gpu->synchronize();
  EXPECT_EQ(download(m_src), m_pattern) << "read must leave its source alone";
  EXPECT_THROW(m_gpu->memory_pass(Backend::MemoryPass::copy, m_src, m_dst, 40), Error);
  EXPECT_THROW(m_gpu->memory_pass(Backend::MemoryPass::read, m_src, m_dst, kBytes + 16), Error);
}

TEST_F(RoofKernels, PassesAreCapturable) {
  Buffer written = m_gpu->allocate_bytes(kBytes);
  zero(m_dst);
  zero(written);
  m_gpu->capture_begin(Lane::compute);
  m_gpu->memory_pass(Backend::MemoryPass::write, m_src, written, kBytes);
  m_gpu->memory_pass(Backend::MemoryPass::copy, m_src, m_dst, kBytes);
  m_gpu->memory_pass(Backend::MemoryPass::read, m_src, m_dst, kBytes);
  m_gpu->empty_kernels(1000);
  const int id = m_gpu->capture_end(Lane::compute);
  m_gpu->synchronize();
  EXPECT_EQ(download(m_dst), std::vector<unsigned char>(kBytes, 0)) << "capture must not execute";
  m_gpu->replay(id, Lane::compute);
  m_gpu->replay(id, Lane::compute);
  m_gpu->synchronize();
  EXPECT_EQ(download(m_dst), m_pattern);
  expect_written(download(written));
}

// Not a pass/fail speed bar: prints each pass's rate over 2 GiB (copy counts read + write
// bytes) and the eager launch floor, so that a GPU run shows how close they come to the roofs.
TEST(CudaBackend, RoofKernelThroughput) {
  REQUIRE_GPU();
  auto gpu = make_cuda_backend(0, DType::bf16);
  const size_t bytes = size_t{2} << 30;
  Buffer src = gpu->allocate_bytes(bytes), dst = gpu->allocate_bytes(bytes);
  const int reps = 20;
  auto seconds = [&](auto&& issue) {
    issue();
    gpu->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i)
      issue();
    gpu->synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  const struct {
    const char* name;
    Backend::MemoryPass kind;
    double traffic;
  } passes[] = {{"read", Backend::MemoryPass::read, 1.0},
                {"write", Backend::MemoryPass::write, 1.0},
                {"copy", Backend::MemoryPass::copy, 2.0}};
  for (const auto& p : passes) {
    const double sec = seconds([&] { gpu->memory_pass(p.kind, src, dst, bytes); });
    std::printf("memory %s 2 GiB: %.3f ms, %.0f GB/s\n", p.name, sec * 1e3,
                p.traffic * static_cast<double>(bytes) / sec / 1e9);
  }
  const int launches = 10000;
  const double sec = seconds([&] { gpu->empty_kernels(launches); });
  std::printf("empty kernel, eager: %.2f us per launch\n", sec / launches * 1e6);
}

TEST_F(CudaVsHost, ClockStampsAreOrdered) {
  Clock& clock = m_gpu->clock();
  EXPECT_STREQ(clock.name(), "cuda_event");
  Pair a = make(256, 256, 50);
  Pair out = zeros(256, 256);
  clock.start_epoch();
  for (int i = 0; i < 300; ++i) { // more stamps than the initial pool
    clock.stamp(Lane::compute);
    m_gpu->gemm(a.gpu, a.gpu, out.gpu);
  }
  clock.stamp(Lane::compute);
  const std::vector<int64_t> t = clock.collect();
  ASSERT_EQ(t.size(), 301u);
  for (size_t i = 1; i < t.size(); ++i)
    EXPECT_GE(t[i], t[i - 1]);
  EXPECT_GT(t.back(), t.front());
  EXPECT_TRUE(clock.collect().empty());
}

// A held fence stays the point it marked however many ring fences come after it (a pipeline
// receive is waited for an action or more after its exchange): the compute copies a flag that
// the comm lane sets only after a long run of GEMMs, having waited on the held fence across
// more than the ring's 64 fences; again after the fence went back to the pool and was reused.
TEST_F(CudaVsHost, HeldFenceOutlivesTheRing) {
  Pair a = make(2048, 2048, 51);
  Pair out = zeros(2048, 2048);
  Pair one = make(1, 16, 52, 0.0f);
  m_gpu->fill_value(one.gpu, 1.0f);
  for (int round = 0; round < 2; ++round) {
    Pair flag = zeros(1, 16), seen = zeros(1, 16);
    m_gpu->synchronize();
    for (int i = 0; i < 40; ++i)
      m_gpu->gemm(a.gpu, a.gpu, out.gpu, Lane::comm);
    m_gpu->copy(one.gpu, flag.gpu, Lane::comm);
    const size_t held = m_gpu->hold_fence(Lane::comm);
    for (int i = 0; i < 200; ++i)
      m_gpu->wait_fence(Lane::compute, m_gpu->fence(Lane::compute));
    m_gpu->wait_fence(Lane::compute, held);
    m_gpu->copy(flag.gpu, seen.gpu);
    m_gpu->release_fence(held);
    for (float v : m_gpu->to_host(seen.gpu))
      EXPECT_EQ(v, 1.0f) << "round " << round;
  }
}

// Not a pass/fail speed bar: prints the fused prefill rate (causal FLOPs = 2 * seq^2 * d * heads)
// next to the naive path's, so that a GPU run shows what the fused kernel buys.
TEST_F(CudaVsHost, FusedPrefillThroughput) {
  AttentionShape s;
  s.batch = 1;
  s.seq = s.context = s.capacity = 4096;
  s.heads = s.kv_heads = 32;
  s.head_dim = 128;
  const int64_t width = s.heads * s.head_dim;
  Buffer qb = m_gpu->allocate(s.seq, width), kb = m_gpu->allocate(s.seq, width),
         vb = m_gpu->allocate(s.seq, width), ob = m_gpu->allocate(s.seq, width);
  const Tensor q = qb.view(s.seq, width, DType::bf16), k = kb.view(s.seq, width, DType::bf16),
               v = vb.view(s.seq, width, DType::bf16), o = ob.view(s.seq, width, DType::bf16);
  m_gpu->fill_random(q, GenKey{1, 1, width, 1.0f}, 0, 0);
  m_gpu->fill_random(k, GenKey{1, 2, width, 1.0f}, 0, 0);
  m_gpu->fill_random(v, GenKey{1, 3, width, 1.0f}, 0, 0);
  const double flops = 2.0 * static_cast<double>(s.seq * s.seq) * s.head_dim * s.heads;
  for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::naive}) {
    for (int i = 0; i < 3; ++i)
      m_gpu->attention(s, q, k, v, o, impl);
    m_gpu->synchronize();
    const int reps = 20;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i)
      m_gpu->attention(s, q, k, v, o, impl);
    m_gpu->synchronize();
    const double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("attention %s seq 4096 d 128 heads 32: %.3f ms, %.1f TFLOP/s\n",
                impl == AttentionImpl::fused ? "fused" : "naive", sec * 1e3, flops / sec / 1e12);
    EXPECT_FALSE(any_nan(m_gpu->to_host(o.rows_slice(0, 64))));
  }
}

} // namespace
} // namespace ridgeline
