// Mixture of experts: routing and permutation on hand cases, the controlled routings, the load
// and imbalance arithmetic of expert-parallel ranks, and the reference layer on the host backend
// against a naive loop over tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "models/moe_layer.hpp"
#include "models/moe_routing.hpp"
#include "models/work_model.hpp"
#include "tests/support/small_moe.hpp"

namespace ridgeline {
namespace {

TEST(MoeRouting, SoftmaxTakesTheTopKLogitsAndRenormalisesOverThem) {
  // Token 0 ties experts 1 and 3: the lower index comes first.
  const std::vector<float> logits = {1, 3, 2, 3, /**/ 2, 0, 0, 1};
  const Routing r = route_top_k(logits, 2, 4, 2, GatingKind::softmax);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{1, 3, 0, 3}));
  EXPECT_FLOAT_EQ(r.weight[0], 0.5f);
  EXPECT_FLOAT_EQ(r.weight[1], 0.5f);
  EXPECT_FLOAT_EQ(r.weight[2], 1.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_FLOAT_EQ(r.weight[3], 1.0f / (1.0f + std::exp(1.0f)));
  // The same as the softmax over every expert renormalised over the chosen two.
  double all = 0;
  for (int e = 4; e < 8; ++e)
    all += std::exp(logits[e]);
  const double p0 = std::exp(2.0) / all, p3 = std::exp(1.0) / all;
  EXPECT_NEAR(r.weight[2], p0 / (p0 + p3), 1e-6);
}

TEST(MoeRouting, SigmoidNormalisesTheChosenScores) {
  const float ln3 = std::log(3.0f);
  const std::vector<float> logits = {0, 2, -1, 2, /**/ 0, ln3, -5, -5};
  const Routing r = route_top_k(logits, 2, 4, 2, GatingKind::sigmoid);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{1, 3, 1, 0}));
  EXPECT_FLOAT_EQ(r.weight[0], 0.5f);
  EXPECT_FLOAT_EQ(r.weight[1], 0.5f);
  EXPECT_FLOAT_EQ(r.weight[2], 0.6f); // 0.75 / (0.75 + 0.5)
  EXPECT_FLOAT_EQ(r.weight[3], 0.4f);
}

TEST(MoeRouting, SigmoidChoosesByScoreSoSaturatedScoresTieToTheLowerIndex) {
  // sigmoid(20) and sigmoid(30) are both 1.0f: expert 0 wins the tie; softmax sees 30 > 20.
  const std::vector<float> logits = {20, 30, 0, 0};
  EXPECT_EQ(route_top_k(logits, 1, 4, 1, GatingKind::sigmoid).expert[0], 0);
  EXPECT_EQ(route_top_k(logits, 1, 4, 1, GatingKind::softmax).expert[0], 1);
  EXPECT_FLOAT_EQ(route_top_k(logits, 1, 4, 1, GatingKind::sigmoid).weight[0], 1.0f);
}

TEST(MoeRouting, TheChoiceIsAFullSortsByScoreThenIndex) {
  // Logits on a coarse grid tie often; every k of 8 and 40 experts, both gatings, against a
  // stable sort of every expert by score (high first), equal scores by index.
  for (const int64_t experts : {8, 40})
    for (int64_t k = 1; k <= std::min<int64_t>(experts, 9); ++k)
      for (const GatingKind g : {GatingKind::softmax, GatingKind::sigmoid}) {
        const int64_t tokens = 50;
        std::vector<float> logits(static_cast<size_t>(tokens * experts));
        for (size_t i = 0; i < logits.size(); ++i)
          logits[i] = static_cast<float>(static_cast<int64_t>((i * 2654435761u) % 7) - 3) * 0.5f;
        const Routing r = route_top_k(logits, tokens, experts, k, g);
        for (int64_t t = 0; t < tokens; ++t) {
          std::vector<float> score(static_cast<size_t>(experts));
          for (int64_t e = 0; e < experts; ++e) {
            const float l = logits[static_cast<size_t>(t * experts + e)];
            score[static_cast<size_t>(e)] =
                g == GatingKind::softmax ? l : 1.0f / (1.0f + std::exp(-l));
          }
          std::vector<int32_t> order(static_cast<size_t>(experts));
          for (int32_t e = 0; e < experts; ++e)
            order[static_cast<size_t>(e)] = e;
          std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
            return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)];
          });
          for (int64_t j = 0; j < k; ++j)
            ASSERT_EQ(r.expert[static_cast<size_t>(t * k + j)], order[static_cast<size_t>(j)])
                << experts << " experts, k " << k << ", token " << t << ", choice " << j;
        }
      }
}

TEST(MoeRouting, TopKOutsideOneToExpertsIsRefused) {
  const std::vector<float> logits(8, 0.0f);
  EXPECT_THROW(route_top_k(logits, 2, 4, 5, GatingKind::softmax), UsageError);
  EXPECT_THROW(route_top_k(logits, 2, 4, 0, GatingKind::sigmoid), UsageError);
  EXPECT_THROW(route_uniform(2, 4, 5), UsageError);
  EXPECT_THROW(route_zipf(2, 4, 5, 1.0, 1), UsageError);
  EXPECT_THROW(route_zipf(2, 4, 2, -1.0, 1), UsageError);
}

TEST(MoeRouting, UniformIsBalancedAndDistinct) {
  const Routing r = route_uniform(3, 4, 2);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(expert_counts(r), (std::vector<int64_t>{2, 2, 1, 1}));
  for (float w : r.weight)
    EXPECT_FLOAT_EQ(w, 0.5f);
  const Routing even = route_uniform(64, 8, 2);
  EXPECT_EQ(expert_counts(even), std::vector<int64_t>(8, 16));
  EXPECT_DOUBLE_EQ(imbalance(expert_counts(even)), 1.0);
}

// Every token's experts are distinct.
void expect_distinct(const Routing& r) {
  for (int64_t t = 0; t < r.tokens; ++t) {
    const std::set<int32_t> seen(r.expert.begin() + t * r.top_k,
                                 r.expert.begin() + (t + 1) * r.top_k);
    EXPECT_EQ(static_cast<int64_t>(seen.size()), r.top_k) << "token " << t;
  }
}

TEST(MoeRouting, ZipfIsSeededSkewedAndDistinct) {
  const Routing a = route_zipf(4096, 8, 2, 1.2, 7);
  EXPECT_EQ(a.expert, route_zipf(4096, 8, 2, 1.2, 7).expert);
  EXPECT_NE(a.expert, route_zipf(4096, 8, 2, 1.2, 8).expert);
  expect_distinct(a);
  const std::vector<int64_t> counts = expert_counts(a);
  for (size_t e = 1; e < counts.size(); ++e)
    EXPECT_GT(counts[e - 1], counts[e]) << "expert " << e;
  // s = 0 draws every expert alike; a steep s still finds k distinct experts for every token.
  const std::vector<int64_t> flat = expert_counts(route_zipf(8000, 4, 1, 0.0, 3));
  for (int64_t c : flat)
    EXPECT_NEAR(static_cast<double>(c), 2000.0, 150.0);
  const Routing steep = route_zipf(16, 8, 8, 20.0, 3);
  expect_distinct(steep);
  EXPECT_EQ(expert_counts(steep), std::vector<int64_t>(8, 16));
}

TEST(MoeRouting, ZipfDrawsTheSameExpertsOnEveryPlatform) {
  // mt19937_64's stream is fixed by the standard and the draw is integer arithmetic on it.
  const Routing r = route_zipf(6, 16, 2, 1.1, 2024);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{3, 7, 0, 2, 0, 1, 12, 2, 0, 4, 2, 3}));
}

TEST(MoeRouting, PermutationGroupsByExpertInTokenOrderWithItsInverse) {
  Routing r;
  r.tokens = 3;
  r.experts = 3;
  r.top_k = 2;
  r.expert = {2, 0, 0, 1, 2, 1};
  r.weight.assign(6, 0.5f);
  const Permutation p = permute(r);
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(p.assignment, (std::vector<int64_t>{1, 2, 3, 5, 0, 4}));
  EXPECT_EQ(p.row, (std::vector<int64_t>{4, 0, 1, 2, 5, 3}));
  // An expert nobody chose has an empty block.
  r.experts = 4;
  const Permutation q = permute(r);
  EXPECT_EQ(q.offsets, (std::vector<int64_t>{0, 2, 4, 6, 6}));
}

TEST(MoeLoad, RowsPerRankAndOffRankTrafficOnAHandCase) {
  Routing r;
  r.tokens = 4;
  r.experts = 4;
  r.top_k = 2;
  // Tokens 0-1 on rank 0, 2-3 on rank 1; experts 0-1 on rank 0, 2-3 on rank 1.
  r.expert = {0, 1, 2, 3, 0, 2, 1, 0};
  r.weight.assign(8, 0.5f);
  const MoeLoad load = moe_load(r, 2);
  EXPECT_EQ(load.expert_rows, (std::vector<int64_t>{3, 2, 2, 1}));
  EXPECT_EQ(load.rank_rows, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(load.sent_rows, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(load.received_rows, (std::vector<int64_t>{3, 2}));
  EXPECT_DOUBLE_EQ(load.rank_imbalance(), 1.25);
  EXPECT_DOUBLE_EQ(load.expert_imbalance(), 1.5);
  const MoeLoad one = moe_load(r, 1);
  EXPECT_EQ(one.rank_rows, (std::vector<int64_t>{8}));
  EXPECT_EQ(one.sent_rows, (std::vector<int64_t>{0}));
  EXPECT_DOUBLE_EQ(one.rank_imbalance(), 1.0);
  EXPECT_THROW(moe_load(r, 3), UsageError); // 4 experts on 3 ranks
  r.tokens = 2;
  r.experts = 8;
  r.top_k = 4;
  EXPECT_THROW(moe_load(r, 4), UsageError); // 2 tokens on 4 ranks
}

TEST(MoeLoad, ImbalanceIsTheMaxOverTheMean) {
  EXPECT_DOUBLE_EQ(imbalance({}), 1.0);
  EXPECT_DOUBLE_EQ(imbalance({0, 0}), 1.0);
  EXPECT_DOUBLE_EQ(imbalance({1, 3}), 1.5);
  EXPECT_DOUBLE_EQ(imbalance({6, 0, 0}), 3.0);
}

constexpr uint64_t kSeed = 1234;
constexpr int64_t kLayer = 3;

// Element (row, col) of a logical MoE tensor as make_moe_weights generates it.
double weight(int64_t role, int64_t cols, int64_t row, int64_t col) {
  const GenKey key{kSeed, tensor_id(kLayer, role), cols,
                   1.0f / std::sqrt(static_cast<float>(cols))};
  return generate(key, row, col);
}

double silu(double v) {
  return v / (1.0 + std::exp(-v));
}

// One SwiGLU expert of width f on token x: gate and up rows from row0 of their tensors, down
// rows from down_row0 (columns down_col0 on) of a down tensor with down_cols columns.
std::vector<double> naive_expert(const ModelSpec& m, const float* x, int64_t gate_role,
                                 int64_t up_role, int64_t down_role, int64_t row0, int64_t f,
                                 int64_t down_row0, int64_t down_col0, int64_t down_cols) {
  const int64_t h = m.hidden;
  std::vector<double> out(static_cast<size_t>(h), 0.0);
  for (int64_t i = 0; i < f; ++i) {
    double g = 0, u = 0;
    for (int64_t c = 0; c < h; ++c) {
      g += x[c] * weight(gate_role, h, row0 + i, c);
      u += x[c] * weight(up_role, h, row0 + i, c);
    }
    const double a = silu(g) * u;
    for (int64_t j = 0; j < h; ++j)
      out[j] += a * weight(down_role, down_cols, down_row0 + j, down_col0 + i);
  }
  return out;
}

// The MoE MLP one token at a time in double, choosing the experts itself (a stable sort of the
// scores) unless `given` routes them. Writes its choice to `chosen`.
std::vector<double> naive_moe(const ModelSpec& m, const std::vector<float>& x, int64_t tokens,
                              const Routing* given, std::vector<int32_t>& chosen) {
  const int64_t h = m.hidden, f = m.expert_ffn_hidden, k = m.top_k, fs = m.shared_experts * f;
  std::vector<double> y(static_cast<size_t>(tokens * h), 0.0);
  chosen.clear();
  for (int64_t t = 0; t < tokens; ++t) {
    const float* xt = x.data() + t * h;
    std::vector<double> score(static_cast<size_t>(m.experts));
    for (int64_t e = 0; e < m.experts; ++e) {
      double l = 0;
      for (int64_t c = 0; c < h; ++c)
        l += xt[c] * weight(role_router, h, e, c);
      score[e] = m.gating == GatingKind::softmax ? l : 1.0 / (1.0 + std::exp(-l));
    }
    std::vector<int32_t> order(static_cast<size_t>(m.experts));
    for (int32_t e = 0; e < m.experts; ++e)
      order[e] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return score[a] > score[b]; });
    std::vector<double> w(static_cast<size_t>(k));
    double sum = 0;
    for (int64_t j = 0; j < k; ++j)
      sum += w[j] = m.gating == GatingKind::softmax ? std::exp(score[order[j]] - score[order[0]])
                                                    : score[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      if (given != nullptr) {
        order[j] = given->expert[t * k + j];
        w[j] = given->weight[t * k + j];
      } else {
        w[j] /= sum;
      }
      chosen.push_back(order[j]);
      const int64_t e = order[j];
      const std::vector<double> out = naive_expert(m, xt, role_expert_gate, role_expert_up,
                                                   role_expert_down, e * f, f, e * h, 0, f);
      for (int64_t c = 0; c < h; ++c)
        y[t * h + c] += w[j] * out[c];
    }
    if (fs > 0) {
      const std::vector<double> out =
          naive_expert(m, xt, role_shared_gate, role_shared_up, role_shared_down, 0, fs, 0, 0, fs);
      for (int64_t c = 0; c < h; ++c)
        y[t * h + c] += out[c];
    }
  }
  return y;
}

// The reference layer on the host backend against the naive loop: the same experts, and the
// output within fp32's rounding of sums over hidden and f terms.
void check_layer(const ModelSpec& m, const RoutingControl& control, int64_t tokens) {
  std::unique_ptr<Backend> backend = make_host_backend();
  const MoeWeights w = make_moe_weights(*backend, m, kLayer, kSeed, 0, m.experts);
  Buffer xb = backend->allocate(tokens, m.hidden);
  Buffer yb = backend->allocate(tokens, m.hidden);
  const Tensor x = xb.view(tokens, m.hidden, DType::f32);
  const Tensor y = yb.view(tokens, m.hidden, DType::f32);
  backend->fill_random(x, GenKey{kSeed, tensor_id(kLayer, 99), m.hidden, 1.0f}, 0, 0);
  const MoeStep step = moe_forward(*backend, m, w, x, y, control);
  const std::vector<float> xs = backend->to_host(x), ys = backend->to_host(y);
  std::vector<int32_t> chosen;
  const bool router = control.mode == RoutingMode::router;
  const std::vector<double> ref =
      naive_moe(m, xs, tokens, router ? nullptr : &step.routing, chosen);
  EXPECT_EQ(step.routing.expert, chosen);
  double largest = 0, error = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    largest = std::max(largest, std::abs(ref[i]));
    error = std::max(error, std::abs(ref[i] - ys[i]));
  }
  EXPECT_GT(largest, 0.01);
  EXPECT_LE(error, 1e-5 * std::max(1.0, largest)) << "largest |y| " << largest;
}

TEST(MoeLayer, SoftmaxRouterMatchesTheNaiveLoop) {
  check_layer(small_moe(GatingKind::softmax, 0), RoutingControl{}, 10);
}

TEST(MoeLayer, SigmoidRouterWithASharedExpertMatchesTheNaiveLoop) {
  check_layer(small_moe(GatingKind::sigmoid, 1), RoutingControl{}, 9);
}

TEST(MoeLayer, ControlledRoutingsMatchTheNaiveLoop) {
  const ModelSpec m = small_moe(GatingKind::softmax, 2);
  check_layer(m, RoutingControl{RoutingMode::uniform, 0.0, 0}, 7);
  check_layer(m, RoutingControl{RoutingMode::zipf, 1.5, 11}, 12);
  std::unique_ptr<Backend> backend = make_host_backend();
  Buffer logits = backend->allocate(7, m.experts);
  EXPECT_EQ(route(*backend, RoutingControl{RoutingMode::uniform, 0.0, 0}, m,
                  logits.view(7, m.experts, backend->dtype()))
                .expert,
            route_uniform(7, 6, 2).expert);
}

TEST(MoeLayer, AnyRangeOfExpertsHoldsTheSameNumbersAsTheWholeLayer) {
  const ModelSpec m = small_moe(GatingKind::softmax, 1);
  std::unique_ptr<Backend> backend = make_host_backend();
  const MoeWeights whole = make_moe_weights(*backend, m, kLayer, kSeed, 0, m.experts);
  const MoeWeights part = make_moe_weights(*backend, m, kLayer, kSeed, 2, 3);
  ASSERT_EQ(part.gate_up.size(), 3u);
  const int64_t h = m.hidden, f = m.expert_ffn_hidden;
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(backend->to_host(part.gate_up[e].view(2 * f, h, DType::f32)),
              backend->to_host(whole.gate_up[e + 2].view(2 * f, h, DType::f32)));
    EXPECT_EQ(backend->to_host(part.down[e].view(h, f, DType::f32)),
              backend->to_host(whole.down[e + 2].view(h, f, DType::f32)));
  }
}

// The experts split into EP contiguous blocks, each block's rows computed from its own weights
// onto the shared experts' output: the one-rank layer's numbers, bit for bit (each token's rows
// are added in expert order both ways).
TEST(MoeLayer, ExpertBlocksOfEveryEpDegreeAddUpToTheWholeLayer) {
  const ModelSpec m = small_moe(GatingKind::sigmoid, 1);
  std::unique_ptr<Backend> backend = make_host_backend();
  const int64_t tokens = 12, h = m.hidden;
  const MoeWeights whole = make_moe_weights(*backend, m, kLayer, kSeed, 0, m.experts);
  Buffer xb = backend->allocate(tokens, h), yb = backend->allocate(tokens, h);
  const Tensor x = xb.view(tokens, h, DType::f32), y = yb.view(tokens, h, DType::f32);
  backend->fill_random(x, GenKey{kSeed, tensor_id(kLayer, 99), h, 1.0f}, 0, 0);
  for (const RoutingControl& control :
       {RoutingControl{}, RoutingControl{RoutingMode::zipf, 1.2, 5}}) {
    const MoeStep step = moe_forward(*backend, m, whole, x, y, control);
    const std::vector<float> expected = backend->to_host(y);
    for (int ep : {1, 2, 3, 6}) {
      Buffer zb = backend->allocate(tokens, h);
      const Tensor z = zb.view(tokens, h, DType::f32);
      moe_shared(*backend, m, whole, x, z);
      const int64_t per_rank = m.experts / ep;
      for (int r = 0; r < ep; ++r)
        moe_routed(*backend, m,
                   make_moe_weights(*backend, m, kLayer, kSeed, r * per_rank, per_rank), x, z,
                   step);
      EXPECT_EQ(backend->to_host(z), expected)
          << "ep " << ep << ", " << routing_mode_name(control.mode);
    }
  }
}

TEST(MoeWork, CostsOfTheBusiestRankOnAHandCase) {
  // The hand routing of MoeLoad's test: h = 4, f = 2, one shared expert, fp32, EP 2.
  ModelSpec m;
  m.hidden = 4;
  m.experts = 4;
  m.top_k = 2;
  m.expert_ffn_hidden = 2;
  m.shared_experts = 1;
  Routing r;
  r.tokens = 4;
  r.experts = 4;
  r.top_k = 2;
  r.expert = {0, 1, 2, 3, 0, 2, 1, 0};
  r.weight.assign(8, 0.5f);
  const MoeWork w = moe_work(m, moe_load(r, 2), DType::f32);
  // Router: 2 tokens a rank x [4 experts, 4]: 2*2*4*4 FLOPs; (2*4 + 4*4 + 2*4) x 4 bytes.
  EXPECT_DOUBLE_EQ(w.router.flops, 64);
  EXPECT_DOUBLE_EQ(w.router.hbm_bytes, 128);
  // Rank 0 holds experts 0 (3 rows) and 1 (2 rows): per row 2*4*4 (gate, up) + 2*4*2 (down)
  // FLOPs; per expert (c*4 + 4*4 + c*4) + (c*2 + 4*2 + c*4) elements = 14c + 24.
  EXPECT_EQ(w.busiest_rank, 0);
  EXPECT_DOUBLE_EQ(w.experts.flops, 48.0 * 5);
  EXPECT_DOUBLE_EQ(w.experts.hbm_bytes, (14.0 * 3 + 24 + 14.0 * 2 + 24) * 4);
  // Shared (f = 2) on 2 tokens: [2, 4] x [4, 4]^T then [2, 2] x [4, 2]^T.
  EXPECT_DOUBLE_EQ(w.shared.flops, 64 + 32);
  EXPECT_DOUBLE_EQ(w.shared.hbm_bytes, (8 + 16 + 8) * 4 + (4 + 8 + 8) * 4);
  // Rank 0 receives 3 rows and sends 2, rank 1 the reverse: 3 rows x 4 x 4 bytes; mean 2.5 rows.
  EXPECT_DOUBLE_EQ(w.dispatch.comm_bytes, 48);
  EXPECT_DOUBLE_EQ(w.combine.comm_bytes, 48);
  EXPECT_DOUBLE_EQ(w.dispatch_mean_bytes, 40);
  EXPECT_DOUBLE_EQ(w.rank_imbalance, 1.25);
  EXPECT_DOUBLE_EQ(w.expert_imbalance, 1.5);
}

TEST(MoeWork, UniformRoutingOnOneRankSendsNothingAndIsBalanced) {
  ModelSpec m;
  m.hidden = 8;
  m.experts = 8;
  m.top_k = 2;
  m.expert_ffn_hidden = 4;
  const MoeWork one = moe_work(m, moe_load(route_uniform(16, 8, 2), 1), DType::bf16);
  EXPECT_DOUBLE_EQ(one.dispatch.comm_bytes, 0);
  EXPECT_DOUBLE_EQ(one.rank_imbalance, 1);
  // 32 rows, 4 per expert: 6 FLOPs per row and weight element, 3 weights of 8 x 4 a row.
  EXPECT_DOUBLE_EQ(one.experts.flops, 32.0 * 2 * 3 * 8 * 4);
  EXPECT_DOUBLE_EQ(one.shared.flops, 0);
  // On 4 ranks the busiest rank computes a quarter of the rows, and the uniform routing sends
  // 3/4 of each rank's 8 rows away: 6 rows x 8 x 2 bytes.
  const MoeWork four = moe_work(m, moe_load(route_uniform(16, 8, 2), 4), DType::bf16);
  EXPECT_DOUBLE_EQ(four.experts.flops, one.experts.flops / 4);
  EXPECT_DOUBLE_EQ(four.dispatch.comm_bytes, 6.0 * 8 * 2);
  EXPECT_DOUBLE_EQ(four.dispatch_mean_bytes, 6.0 * 8 * 2);
}

// A tiny MoE layer: h 8, 2 heads, 4 experts of 4, top 2, one shared expert; 8 tokens a rank.
ModelSpec tiny_moe() {
  ModelSpec m;
  m.hidden = 8;
  m.heads = 2;
  m.kv_heads = 2;
  m.ffn_hidden = 4;
  m.mlp = MlpKind::swiglu;
  m.experts = 4;
  m.top_k = 2;
  m.expert_ffn_hidden = 4;
  m.shared_experts = 1;
  return m;
}

LayerShape eight_tokens() {
  LayerShape s;
  s.seq = 8;
  s.dtype = DType::f32;
  return s;
}

TEST(MoeLayerOps, AttentionUnchangedThenTheMoeMlpOnOneRank) {
  const ModelSpec m = tiny_moe();
  const LayerShape s = eight_tokens();
  const std::vector<OpSpec> dense = layer_ops(m, s, AttentionImpl::fused);
  const std::vector<OpSpec> ops =
      moe_layer_ops(m, s, AttentionImpl::fused, moe_load(route_uniform(8, 4, 2), 1));
  std::vector<std::string> names;
  for (const OpSpec& o : ops)
    names.push_back(o.name);
  const std::vector<std::string> expected = {
      op::norm1,      op::qkv,         op::attention,  op::proj,     op::residual1_norm2,
      op::moe_router, op::moe_experts, op::moe_shared, op::residual2};
  EXPECT_EQ(names, expected);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(ops[i].cost.flops, dense[i].cost.flops) << ops[i].name;
    EXPECT_EQ(ops[i].cost.hbm_bytes, dense[i].cost.hbm_bytes) << ops[i].name;
  }
  EXPECT_EQ(ops.back().cost.hbm_bytes, dense.back().cost.hbm_bytes);
  // Router [8, 8] x [4, 8]^T: 2*8*4*8 FLOPs, (64 + 32 + 32) floats.
  const OpSpec& router = find_op(ops, op::moe_router);
  EXPECT_DOUBLE_EQ(router.cost.flops, 512);
  EXPECT_DOUBLE_EQ(router.cost.hbm_bytes, 128.0 * 4);
  // 16 rows, 4 per expert: 2*4*(2*4)*8 + 2*4*8*4 FLOPs an expert; (32 + 64 + 32) + (16 + 32 + 32)
  // floats an expert.
  const OpSpec& experts = find_op(ops, op::moe_experts);
  EXPECT_DOUBLE_EQ(experts.cost.flops, 4.0 * (512 + 256));
  EXPECT_DOUBLE_EQ(experts.cost.hbm_bytes, 4.0 * 208 * 4);
  EXPECT_EQ(experts.m, 4);
  EXPECT_EQ(experts.n, 8);
  EXPECT_EQ(experts.k, 8);
  // One shared expert of 4 on 8 tokens: [8, 8] x [8, 8]^T then [8, 4] x [8, 4]^T.
  const OpSpec& shared = find_op(ops, op::moe_shared);
  EXPECT_DOUBLE_EQ(shared.cost.flops, 1024 + 512);
  EXPECT_DOUBLE_EQ(shared.cost.hbm_bytes, ((64 + 64 + 64) + (32 + 32 + 64)) * 4.0);
  // On one rank no row leaves it: no all-to-all (the names above).
}

TEST(MoeLayerOps, TwoRanksSendHalfTheirRows) {
  // 16 tokens on 2 ranks, experts 0-1 on rank 0: an even token takes experts 0 and 1, an odd
  // one 2 and 3, so each rank sends its 4 odd (or even) tokens' 8 rows: 8 x 8 floats each way.
  const ModelSpec m = tiny_moe();
  const std::vector<OpSpec> ops =
      moe_layer_ops(m, eight_tokens(), AttentionImpl::fused, moe_load(route_uniform(16, 4, 2), 2));
  for (const char* name : {op::moe_dispatch, op::moe_combine}) {
    const OpSpec& a2a = find_op(ops, name);
    EXPECT_EQ(a2a.kind, OpKind::collective);
    EXPECT_EQ(a2a.lane, Lane::comm);
    EXPECT_EQ(a2a.collective, "all_to_all");
    EXPECT_EQ(a2a.group, CommGroup::ep);
    EXPECT_EQ(a2a.group_size, 2);
    EXPECT_DOUBLE_EQ(a2a.cost.comm_bytes, 8.0 * 8 * 4);
    EXPECT_DOUBLE_EQ(a2a.cost.flops, 0);
  }
  // The order: router, dispatch, experts, combine, shared, residual.
  EXPECT_EQ(ops[ops.size() - 5].name, op::moe_dispatch);
  EXPECT_EQ(ops[ops.size() - 3].name, op::moe_combine);
  // Each rank's experts compute 16 rows: half of the 32.
  EXPECT_DOUBLE_EQ(find_op(ops, op::moe_experts).cost.flops, 2.0 * (512 + 256) * 2);
}

TEST(MoeLayerOps, AtTpTwoEachRankRoutesItsBlockAndTheBlocksAreGathered) {
  // TP 2 x EP 2: the TP group's 8 tokens in blocks of 4, each rank routing its own; the load
  // routes 4 x 2 tokens over the EP group.
  const ModelSpec m = tiny_moe();
  LayerShape s = eight_tokens();
  s.tp = 2;
  const MoeLoad load = moe_load(route_uniform(8, 4, 2), 2);
  const std::vector<OpSpec> ops = moe_layer_ops(m, s, AttentionImpl::fused, load);
  std::vector<std::string> names;
  for (const OpSpec& o : ops)
    names.push_back(o.name);
  const std::vector<std::string> expected = {
      op::norm1,           op::qkv,           op::attention,    op::proj,        op::allreduce_attn,
      op::residual1_norm2, op::moe_router,    op::moe_dispatch, op::moe_experts, op::moe_combine,
      op::moe_shared,      op::moe_allgather, op::residual2};
  EXPECT_EQ(names, expected);
  // Router [4, 8] x [4, 8]^T; the shared expert on the same 4 tokens.
  EXPECT_EQ(find_op(ops, op::moe_router).m, 4);
  EXPECT_DOUBLE_EQ(find_op(ops, op::moe_router).cost.flops, 2.0 * 4 * 4 * 8);
  EXPECT_EQ(find_op(ops, op::moe_shared).m, 4);
  // The gather: every rank's [4, 8] block into the [8, 8] output.
  const OpSpec& gather = find_op(ops, op::moe_allgather);
  EXPECT_EQ(gather.kind, OpKind::collective);
  EXPECT_EQ(gather.collective, "all_gather");
  EXPECT_EQ(gather.group, CommGroup::tp);
  EXPECT_DOUBLE_EQ(gather.cost.comm_bytes, 8.0 * 8 * 4);
  EXPECT_DOUBLE_EQ(gather.cost.hbm_bytes, (32.0 + 64) * 4);
  // Under sequence parallelism the block is the rank's own rows: nothing to gather, and no dense
  // collective of the MLP is left.
  s.sequence_parallel = true;
  const std::vector<OpSpec> sp = moe_layer_ops(m, s, AttentionImpl::fused, load);
  for (const OpSpec& o : sp)
    for (const char* dense : {op::moe_allgather, op::allgather_mlp, op::reducescatter_mlp, op::fc1})
      EXPECT_NE(o.name, dense);
  EXPECT_EQ(sp[sp.size() - 2].name, op::moe_shared);
}

} // namespace
} // namespace ridgeline
