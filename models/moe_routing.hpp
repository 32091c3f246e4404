// Mixture-of-experts routing, pure arithmetic: the top-k of a router's logits (softmax or
// sigmoid gating), controlled routings (uniform, Zipf), the permutation that groups a layer's
// tokens by expert, and the load each expert-parallel rank receives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model_spec.hpp"

namespace ridgeline {

/// The experts each token goes to and the weight of each in the combine.
struct Routing {
  int64_t tokens = 0;
  int64_t experts = 0;
  int64_t top_k = 0;
  /// [tokens x top_k]: token t's experts at t * top_k + j, distinct, highest score first (ties:
  /// the lower expert index first).
  std::vector<int32_t> expert;
  std::vector<float> weight; ///< [tokens x top_k]: the combine weight of each choice
};

/// The top_k experts of each row of `logits` ([tokens x experts], row-major), ties broken by the
/// lower expert index. softmax: chosen by logit, weights the softmax over the k chosen logits
/// (equal to the softmax over all experts renormalised over the k). sigmoid: chosen by
/// sigmoid(logit), weights those scores divided by their sum over the k. Throws UsageError
/// where top_k is not in [1, experts].
Routing route_top_k(const std::vector<float>& logits, int64_t tokens, int64_t experts,
                    int64_t top_k, GatingKind gating);

/// How a run chooses the experts: from the router's logits, or controlled.
enum class RoutingMode { router, uniform, zipf };

/// "router", "uniform", "zipf".
const char* routing_mode_name(RoutingMode mode);

/// Uniform: assignment i = t * top_k + j goes to expert i mod experts, so each token's k experts
/// are distinct and every expert receives floor or ceil(tokens x top_k / experts) of them.
/// Weights 1 / top_k.
Routing route_uniform(int64_t tokens, int64_t experts, int64_t top_k);

/// Zipf(s): expert e drawn with probability proportional to (e + 1)^-s (expert 0 the most
/// popular, so the hot experts sit on the first expert-parallel rank), k distinct per token by
/// drawing each next expert among those not yet chosen. The stream is std::mt19937_64(seed)'s
/// raw output and the weights are fixed-point integers (2^-40), so every platform draws the same
/// experts. Weights 1 / top_k. s = 0 is uniform in probability. Throws UsageError where top_k
/// is not in [1, experts] or s < 0.
Routing route_zipf(int64_t tokens, int64_t experts, int64_t top_k, double s, uint64_t seed);

/// The routing's assignments grouped by expert, each expert's rows in token order: permuted row
/// p holds assignment `assignment[p]` (token assignment / top_k), expert e's rows are
/// [offsets[e], offsets[e + 1]).
struct Permutation {
  std::vector<int64_t> offsets;    ///< [experts + 1]
  std::vector<int64_t> assignment; ///< [tokens x top_k]: permuted row -> t * top_k + j
  std::vector<int64_t> row;        ///< [tokens x top_k]: the inverse, t * top_k + j -> its row
};

/// The permutation of `r` (a counting sort by expert, stable in token order).
Permutation permute(const Routing& r);

/// Assignments (token, expert pairs) per expert.
std::vector<int64_t> expert_counts(const Routing& r);

/// The load of one MoE layer on an expert-parallel group of `ep` ranks: experts split into ep
/// contiguous blocks of experts / ep, tokens into ep contiguous blocks of tokens / ep (the
/// tokens each rank holds before the dispatch). Each assignment whose expert lives on another
/// rank than its token is one row sent by the dispatch and one row sent back by the combine.
struct MoeLoad {
  int ep = 1;
  std::vector<int64_t> expert_rows;   ///< [experts]: assignments per expert
  std::vector<int64_t> rank_rows;     ///< [ep]: assignments each rank's experts compute
  std::vector<int64_t> sent_rows;     ///< [ep]: dispatch rows each rank sends to other ranks
  std::vector<int64_t> received_rows; ///< [ep]: dispatch rows each rank receives from others

  /// The busiest rank's rows over the mean rank's (1 when no rows).
  double rank_imbalance() const;
  /// The busiest expert's rows over the mean expert's (1 when no rows).
  double expert_imbalance() const;
};

/// The load of `r` on `ep` ranks. Throws UsageError where ep < 1 or does not divide the experts
/// or the tokens.
MoeLoad moe_load(const Routing& r, int ep);

/// max / mean of `counts` (1 when they sum to 0 or are empty).
double imbalance(const std::vector<int64_t>& counts);

} // namespace ridgeline
