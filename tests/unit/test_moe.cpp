// Mixture of experts: routing and permutation on hand cases, the controlled routings, the load
// and imbalance arithmetic of expert-parallel ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "models/moe_routing.hpp"

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

} // namespace
} // namespace ridgeline
