// Decode on the CUDA backend against the host backend: the decode attention kernel (one query
// per sequence over a KV cache, split along the context and combined) at the context lengths
// around its tile and split boundaries and at grouped-query group sizes 1, 4 and 8; and a
// stage generating tokens into a growing cache, eager and as one captured graph per step; and
// ragged decode (sequences of different contexts in one call). Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"
#include "parallel/tp_layer.hpp"
#include "tests/support/backend_pair.hpp"

namespace ridgeline {
namespace {

// bf16 storage: a few roundings of 2^-9 each (as test_cuda_backend).
constexpr double kTolerance = 2e-2;

struct DecodeCase {
  int64_t context;
  int64_t group; ///< query heads per KV head
};

class DecodeAttention : public ::testing::TestWithParam<DecodeCase> {};

// The cache holds more rows than the step sees (capacity > context), as a growing cache does:
// rows past `context` must not be read.
TEST_P(DecodeAttention, MatchesHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  const DecodeCase c = GetParam();
  auto gpu = make_cuda_backend(0, DType::bf16);
  auto host = make_host_backend();
  AttentionShape s;
  s.batch = 2;
  s.seq = 1;
  s.context = c.context;
  s.capacity = c.context + 3;
  s.kv_heads = 2;
  s.heads = s.kv_heads * c.group;
  s.head_dim = 128;
  const int64_t q_cols = s.heads * s.head_dim, kv_cols = s.kv_heads * s.head_dim;
  const int64_t kv_rows = s.batch * s.capacity;
  // Both backends hold the GPU's bf16-rounded values, so only the kernels' arithmetic differs.
  auto make = [&](int64_t rows, int64_t cols, uint64_t tensor) {
    return make_backend_pair(*gpu, *host, DType::bf16, rows, cols, GenKey{7, tensor, cols, 1.0f});
  };
  BackendPair q = make(s.batch, q_cols, 1), k = make(kv_rows, kv_cols, 2),
              v = make(kv_rows, kv_cols, 3);
  BackendPair out = make(s.batch, q_cols, 4);
  // Rows past the context hold large values: reading them would show in the output.
  gpu->fill_value(k.gpu.strided_rows(c.context, s.batch, s.capacity), 30.f);
  host->fill_value(k.host.strided_rows(c.context, s.batch, s.capacity), 30.f);
  for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::naive}) {
    gpu->attention(s, q.gpu, k.gpu, v.gpu, out.gpu, impl);
    host->attention(s, q.host, k.host, v.host, out.host, impl);
    const std::vector<float> g = gpu->to_host(out.gpu);
    for (float x : g)
      ASSERT_TRUE(std::isfinite(x));
    EXPECT_LT(relative_error(g, host->to_host(out.host)), kTolerance)
        << (impl == AttentionImpl::fused ? "fused" : "naive") << " context " << c.context
        << " group " << c.group;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ContextsAndGroups, DecodeAttention,
    ::testing::Values(DecodeCase{1, 1}, DecodeCase{1, 4}, DecodeCase{1, 8}, DecodeCase{63, 1},
                      DecodeCase{63, 4}, DecodeCase{63, 8}, DecodeCase{64, 1}, DecodeCase{64, 4},
                      DecodeCase{64, 8}, DecodeCase{65, 1}, DecodeCase{65, 4}, DecodeCase{65, 8},
                      DecodeCase{1000, 1}, DecodeCase{1000, 4}, DecodeCase{1000, 8},
                      DecodeCase{4097, 1}, DecodeCase{4097, 4}, DecodeCase{4097, 8}),
    [](const ::testing::TestParamInfo<DecodeCase>& i) {
      return "context" + std::to_string(i.param.context) + "_group" + std::to_string(i.param.group);
    });

struct RaggedCase {
  std::string name;
  std::vector<int64_t> contexts;
  int64_t kv_heads, group, head_dim;
  DType dtype;
};

// `n` contexts spread evenly over [lo, hi].
std::vector<int64_t> spread(int64_t lo, int64_t hi, int64_t n) {
  std::vector<int64_t> c;
  for (int64_t i = 0; i < n; ++i)
    c.push_back(lo + (hi - lo) * i / (n - 1));
  return c;
}

class RaggedDecode : public ::testing::TestWithParam<RaggedCase> {};

// One ragged call (the fused kernel: every sequence in one launch) against the host's ragged
// call (one attention() per run of equal contexts) and against one CUDA attention() per
// sequence. The cache rows past each sequence's context hold large values, so a read past it
// would show.
TEST_P(RaggedDecode, MatchesHostAndOneCallPerSequence) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  const RaggedCase& c = GetParam();
  auto gpu = make_cuda_backend(0, c.dtype);
  auto host = make_host_backend();
  AttentionShape s;
  s.batch = static_cast<int64_t>(c.contexts.size());
  s.seq = 1;
  s.capacity = *std::max_element(c.contexts.begin(), c.contexts.end()) + 5;
  s.kv_heads = c.kv_heads;
  s.heads = c.kv_heads * c.group;
  s.head_dim = c.head_dim;
  const int64_t q_cols = s.heads * s.head_dim, kv_cols = s.kv_heads * s.head_dim;
  const int64_t kv_rows = s.batch * s.capacity;
  auto make = [&](int64_t rows, int64_t cols, uint64_t tensor) {
    return make_backend_pair(*gpu, *host, c.dtype, rows, cols, GenKey{9, tensor, cols, 1.0f});
  };
  // K and V as the mixed step passes them: the two halves of one cache row.
  BackendPair q = make(s.batch, q_cols, 1), kv = make(kv_rows, 2 * kv_cols, 2);
  BackendPair out = make(s.batch, q_cols, 4), single = make(s.batch, q_cols, 5);
  for (int64_t i = 0; i < s.batch; ++i) {
    const int64_t ctx = c.contexts[static_cast<size_t>(i)];
    gpu->fill_value(kv.gpu.rows_slice(i * s.capacity + ctx, s.capacity - ctx), 30.f);
    host->fill_value(kv.host.rows_slice(i * s.capacity + ctx, s.capacity - ctx), 30.f);
  }
  auto k_of = [&](const Tensor& t) { return t.cols_slice(0, kv_cols); };
  auto v_of = [&](const Tensor& t) { return t.cols_slice(kv_cols, kv_cols); };
  for (AttentionImpl impl : {AttentionImpl::fused, AttentionImpl::naive}) {
    const char* what = attention_name(impl);
    gpu->attention_decode_ragged(s, c.contexts, q.gpu, k_of(kv.gpu), v_of(kv.gpu), out.gpu, impl);
    host->attention_decode_ragged(s, c.contexts, q.host, k_of(kv.host), v_of(kv.host), out.host,
                                  impl);
    for (int64_t i = 0; i < s.batch; ++i) {
      AttentionShape one = s;
      one.batch = 1;
      one.context = c.contexts[static_cast<size_t>(i)];
      const Tensor block = kv.gpu.rows_slice(i * s.capacity, s.capacity);
      gpu->attention(one, q.gpu.rows_slice(i, 1), k_of(block), v_of(block),
                     single.gpu.rows_slice(i, 1), impl);
    }
    const std::vector<float> g = gpu->to_host(out.gpu);
    for (float x : g)
      ASSERT_TRUE(std::isfinite(x)) << what;
    EXPECT_LT(relative_error(g, host->to_host(out.host)), kTolerance) << what;
    EXPECT_LT(relative_error(g, gpu->to_host(single.gpu)), kTolerance) << what;
    // Each sequence on its own, so that a short one's error does not hide in a long one's.
    const std::vector<float> h = host->to_host(out.host);
    for (int64_t i = 0; i < s.batch; ++i) {
      const auto row = [&](const std::vector<float>& x) {
        return std::vector<float>(x.begin() + i * q_cols, x.begin() + (i + 1) * q_cols);
      };
      EXPECT_LT(relative_error(row(g), row(h)), kTolerance)
          << what << " sequence " << i << " context " << c.contexts[static_cast<size_t>(i)];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Contexts, RaggedDecode,
    ::testing::Values(
        // Contexts of 1, around the 16-key step and the 64-key round, and long ones split.
        RaggedCase{
            "mixed_group4", {1, 65, 4097, 63, 64, 1000, 1, 2049, 17}, 2, 4, 128, DType::bf16},
        RaggedCase{
            "mixed_group1", {1, 65, 4097, 63, 64, 1000, 1, 2049, 17}, 2, 1, 128, DType::bf16},
        RaggedCase{"mixed_group8_d64_fp16", {3000, 1, 129, 7, 7, 7, 511}, 1, 8, 64, DType::f16},
        // 20 query heads per KV head: two head chunks of the 16-row tile.
        RaggedCase{"group20", {33, 1500, 2}, 1, 20, 128, DType::bf16},
        // Nothing split: one split per sequence, no combine.
        RaggedCase{"all_one", {1, 1, 1, 1}, 2, 4, 128, DType::bf16},
        RaggedCase{"all_equal", {777, 777, 777}, 2, 4, 128, DType::bf16},
        // One sequence: the ragged launch alone.
        RaggedCase{"single", {5000}, 2, 4, 128, DType::bf16},
        // llama3-8b's heads at TP 1 over 64 contexts from 793 to 7933.
        RaggedCase{"llama3_8b_64", spread(793, 7933, 64), 8, 4, 128, DType::bf16}),
    [](const ::testing::TestParamInfo<RaggedCase>& i) { return i.param.name; });

StageSpec decode_stage(int64_t steps) {
  StageSpec spec;
  spec.model.hidden = 512;
  spec.model.heads = 8;
  spec.model.kv_heads = 2;
  spec.model.ffn_hidden = 1024;
  spec.model.layers = 1;
  spec.model.mlp = MlpKind::swiglu;
  spec.model.norm = NormKind::rmsnorm;
  spec.model.rotary = true;
  spec.shape.phase = Phase::decode;
  spec.shape.batch = 3;
  spec.shape.context = 63;
  spec.shape.decode_steps = steps;
  spec.num_layers = 1;
  spec.seed = 11;
  return spec;
}

// Tokens generated into a growing cache: every step on the GPU matches the host's step at the
// same position, and replaying one captured graph per step reproduces the eager steps.
TEST(DecodeSteps, GrowingCacheMatchesHostEagerAndGraphs) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  constexpr int64_t kSteps = 4;
  auto gpu = make_cuda_backend(0, DType::bf16);
  auto host = make_host_backend();
  StageSpec gspec = decode_stage(kSteps), hspec = decode_stage(kSteps);
  gspec.shape.dtype = DType::bf16;
  hspec.shape.dtype = DType::f32;
  OpTable gops, hops;
  TpStage g(*gpu, nullptr, gspec, gops), h(*host, nullptr, hspec, hops);
  g.fill_input(0);
  h.fill_input(0);
  Recorder grec(gpu->clock(), gops), hrec(host->clock(), hops);
  grec.set_enabled(false);
  hrec.set_enabled(false);
  std::vector<std::vector<float>> eager;
  for (int64_t step = 0; step < kSteps; ++step) {
    g.set_decode_step(step);
    h.set_decode_step(step);
    g.forward(grec);
    h.forward(hrec);
    eager.push_back(gpu->to_host(g.output()));
    EXPECT_LT(relative_error(eager.back(), host->to_host(h.output())), 5e-2) << "step " << step;
  }
  std::vector<int> graphs;
  for (int64_t step = 0; step < kSteps; ++step) {
    g.set_decode_step(step);
    gpu->capture_begin(Lane::compute);
    g.forward(grec);
    graphs.push_back(gpu->capture_end(Lane::compute));
  }
  for (int64_t step = 0; step < kSteps; ++step) {
    gpu->replay(graphs[static_cast<size_t>(step)], Lane::compute);
    EXPECT_EQ(gpu->to_host(g.output()), eager[static_cast<size_t>(step)]) << "step " << step;
  }
}

// --gemm-algo skinny at one and two rows folds decode's small ops into the GEMMs before them
// (rotary and the cache append into QKV, the activation into FC1; asked for, the last residual
// add into FC2): each step of a growing cache still matches the host's, for a grouped-query
// SwiGLU layer with rotary and RMS norm and for a GELU layer with layer norm and no rotary; the
// step records its fused launches; at three rows nothing is folded.
TEST(DecodeSteps, FusedEpiloguesMatchHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  constexpr int64_t kSteps = 3;
  for (const bool llama : {true, false})
    for (const int64_t batch : {1, 2, 3}) {
      // The llama layer also folds the residual add (not folded unless asked).
      if (llama) setenv("RIDGELINE_EPILOGUES", "rotary,act,residual", 1);
      auto gpu = make_cuda_backend(0, DType::bf16);
      unsetenv("RIDGELINE_EPILOGUES");
      auto host = make_host_backend();
      gpu->set_gemm_algo(GemmAlgo::skinny);
      EXPECT_EQ(gpu->fuses_epilogue(batch, GemmEpilogue::Kind::rotary_append), batch <= 2);
      StageSpec gspec = decode_stage(kSteps);
      if (!llama) {
        gspec.model.mlp = MlpKind::gelu;
        gspec.model.norm = NormKind::layernorm;
        gspec.model.rotary = false;
        gspec.model.kv_heads = gspec.model.heads;
      }
      gspec.shape.batch = batch;
      StageSpec hspec = gspec;
      gspec.shape.dtype = DType::bf16;
      hspec.shape.dtype = DType::f32;
      OpTable gops, hops;
      TpStage g(*gpu, nullptr, gspec, gops), h(*host, nullptr, hspec, hops);
      g.fill_input(0);
      h.fill_input(0);
      Recorder grec(gpu->clock(), gops), hrec(host->clock(), hops);
      grec.set_enabled(false);
      hrec.set_enabled(false);
      const std::string what =
          std::string(llama ? "swiglu" : "gelu") + ", batch " + std::to_string(batch);
      for (int64_t step = 0; step < kSteps; ++step) {
        g.set_decode_step(step);
        h.set_decode_step(step);
        g.forward(grec);
        h.forward(hrec);
        EXPECT_LT(relative_error(gpu->to_host(g.output()), host->to_host(h.output())), 5e-2)
            << what << ", step " << step;
      }
      std::string fused;
      for (const std::string& line : gpu->gemm_choices())
        if (line.find(", epilogue: ") != std::string::npos) fused += line + "\n";
      if (batch > 2) {
        EXPECT_EQ(fused, "") << what;
        continue;
      }
      for (const char* name :
           {"epilogue: rotary and cache append)", llama ? "epilogue: swiglu)" : "epilogue: gelu)"})
        EXPECT_NE(fused.find(name), std::string::npos) << what << ": " << fused;
      EXPECT_EQ(fused.find("epilogue: residual add)") != std::string::npos, llama) << fused;
    }
}

// The kernels of a forward step as programmatic dependent launches (each may start while the one
// before it ends; the skinny GEMM loads its weights before it waits) compute the step bit for bit
// as ordinary launches do, eager and replayed from graphs many times, with the skinny GEMM's
// CUDA-core kernel at one and two rows (where decode's small ops fold into it: every fold at one
// row, the default ones at two) and at three (nothing folded), and with cuBLASLt's (the
// heuristic).
TEST(DecodeSteps, ChainedLaunchesMatchOrdinaryOnes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  constexpr int64_t kSteps = 3;
  constexpr int kReplays = 50;
  struct Case {
    GemmAlgo algo;
    int64_t batch;
    const char* epilogues; ///< RIDGELINE_EPILOGUES, or nullptr for the default
  };
  for (const Case c :
       {Case{GemmAlgo::skinny, 1, "norm,rotary,act,residual"}, Case{GemmAlgo::skinny, 2, nullptr},
        Case{GemmAlgo::skinny, 3, nullptr}, Case{GemmAlgo::heuristic, 3, nullptr}}) {
    const std::string what = std::string(c.algo == GemmAlgo::skinny ? "skinny" : "heuristic") +
                             ", batch " + std::to_string(c.batch);
    std::vector<std::vector<float>> outputs[2]; // [ordinary, chained][step, eager then replays]
    for (int chained = 0; chained < 2; ++chained) {
      // Read when the backend is made.
      if (chained)
        unsetenv("RIDGELINE_PDL");
      else
        setenv("RIDGELINE_PDL", "0", 1);
      if (c.epilogues) setenv("RIDGELINE_EPILOGUES", c.epilogues, 1);
      auto gpu = make_cuda_backend(0, DType::bf16);
      unsetenv("RIDGELINE_PDL");
      unsetenv("RIDGELINE_EPILOGUES");
      gpu->set_gemm_algo(c.algo);
      StageSpec spec = decode_stage(kSteps);
      spec.shape.dtype = DType::bf16;
      spec.shape.batch = c.batch;
      OpTable ops;
      TpStage g(*gpu, nullptr, spec, ops);
      g.fill_input(0);
      Recorder rec(gpu->clock(), ops);
      rec.set_enabled(false);
      std::vector<int> graphs;
      for (int64_t step = 0; step < kSteps; ++step) {
        g.set_decode_step(step);
        g.forward(rec);
        outputs[chained].push_back(gpu->to_host(g.output()));
        gpu->capture_begin(Lane::compute);
        g.forward(rec);
        graphs.push_back(gpu->capture_end(Lane::compute));
      }
      for (int r = 0; r < kReplays; ++r)
        for (int64_t step = 0; step < kSteps; ++step) {
          gpu->replay(graphs[static_cast<size_t>(step)], Lane::compute);
          outputs[chained].push_back(gpu->to_host(g.output()));
        }
      // The fused path is the one under test at one and two rows.
      bool folded = false;
      for (const std::string& line : gpu->gemm_choices())
        folded = folded || line.find(", epilogue: ") != std::string::npos;
      EXPECT_EQ(folded, c.algo == GemmAlgo::skinny && c.batch <= 2) << what;
    }
    ASSERT_EQ(outputs[0].size(), outputs[1].size());
    for (size_t i = 0; i < outputs[0].size(); ++i)
      ASSERT_EQ(outputs[1][i], outputs[0][i]) << what << ", output " << i;
    // Each step's replays give its eager output.
    for (size_t i = 0; i < outputs[1].size(); ++i)
      ASSERT_EQ(outputs[1][i], outputs[1][i % kSteps]) << what << ", output " << i;
  }
}

// --gemm-algo search: a skinny GEMM searched at first use (eagerly, and inside a capture)
// computes what the heuristic's choice computes, and the choice is recorded once per shape. At
// 16 rows the project's skinny kernel is one of the candidates; at 32 it is not.
TEST(GemmSearch, MatchesTheHeuristicAndRecordsTheChoice) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto gpu = make_cuda_backend(0, DType::bf16);
  const int64_t m = 16, n = 3072, k = 4096;
  Buffer a = gpu->allocate(m, k), w = gpu->allocate(n, k), c1 = gpu->allocate(m, n),
         c2 = gpu->allocate(m, n), c3 = gpu->allocate(2 * m, n), a3 = gpu->allocate(2 * m, k);
  const Tensor ta = a.view(m, k, DType::bf16), tw = w.view(n, k, DType::bf16);
  gpu->fill_random(ta, GenKey{3, 1, k, 1.0f}, 0, 0);
  gpu->fill_random(tw, GenKey{3, 2, k, 0.05f}, 0, 0);
  gpu->gemm(ta, tw, c1.view(m, n, DType::bf16));
  const std::vector<float> heuristic = gpu->to_host(c1.view(m, n, DType::bf16));
  gpu->set_gemm_algo(GemmAlgo::search);
  gpu->gemm(ta, tw, c2.view(m, n, DType::bf16));
  gpu->gemm(ta, tw, c2.view(m, n, DType::bf16)); // cached: no second search
  EXPECT_LT(relative_error(gpu->to_host(c2.view(m, n, DType::bf16)), heuristic), 1e-2);
  ASSERT_EQ(gpu->gemm_choices().size(), 1u);
  // Either cuBLASLt's fastest candidate or, at 16 rows, the project's skinny kernel, each
  // beside the other's time.
  const std::string choice = gpu->gemm_choices()[0];
  EXPECT_TRUE(choice.rfind("m=16 n=3072 k=4096 bf16: algo ", 0) == 0 ||
              choice.rfind("m=16 n=3072 k=4096 bf16: skinny kernel ", 0) == 0)
      << choice;
  EXPECT_NE(choice.find(choice.find(": algo ") != std::string::npos ? "skinny kernel: "
                                                                    : "cuBLASLt's best: "),
            std::string::npos)
      << choice;
  // A shape first met inside a capture is searched beside it, then captured with its choice.
  const Tensor ta3 = a3.view(2 * m, k, DType::bf16), tc3 = c3.view(2 * m, n, DType::bf16);
  gpu->fill_random(ta3, GenKey{3, 3, k, 1.0f}, 0, 0);
  gpu->synchronize();
  gpu->capture_begin(Lane::compute);
  gpu->gemm(ta3, tw, tc3);
  const int graph = gpu->capture_end(Lane::compute);
  gpu->fill_value(tc3, 0.0f);
  gpu->replay(graph, Lane::compute);
  const std::vector<float> replayed = gpu->to_host(tc3);
  gpu->set_gemm_algo(GemmAlgo::heuristic);
  gpu->gemm(ta3, tw, tc3);
  EXPECT_LT(relative_error(replayed, gpu->to_host(tc3)), 1e-2);
  EXPECT_EQ(gpu->gemm_choices().size(), 2u);
  // Wider than decode's 256 rows: the heuristic's choice, no search.
  gpu->set_gemm_algo(GemmAlgo::search);
  Buffer big_a = gpu->allocate(512, k), big_c = gpu->allocate(512, n);
  gpu->fill_value(big_a.view(512, k, DType::bf16), 0.5f);
  gpu->gemm(big_a.view(512, k, DType::bf16), tw, big_c.view(512, n, DType::bf16));
  gpu->synchronize();
  EXPECT_EQ(gpu->gemm_choices().size(), 2u);
}

} // namespace
} // namespace ridgeline
