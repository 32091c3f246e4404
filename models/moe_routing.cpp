// Mixture-of-experts routing (see moe_routing.hpp).
#include "models/moe_routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.hpp"

namespace ridgeline {
namespace {

void check_top_k(int64_t experts, int64_t top_k) {
  if (experts < 1) throw UsageError("routing needs at least one expert");
  if (top_k < 1 || top_k > experts)
    throw UsageError("top-k " + std::to_string(top_k) + " is not in [1, " +
                     std::to_string(experts) + "] (each token takes k distinct experts)");
}

Routing empty_routing(int64_t tokens, int64_t experts, int64_t top_k) {
  Routing r;
  r.tokens = tokens;
  r.experts = experts;
  r.top_k = top_k;
  r.expert.resize(static_cast<size_t>(tokens * top_k));
  r.weight.assign(static_cast<size_t>(tokens * top_k), 1.0f / static_cast<float>(top_k));
  return r;
}

// Fixed-point weights of the Zipf draw: 2^40 units spread over the experts. pow() is the one
// libm call; rounding its result to 2^-40 leaves a last-bit difference between platforms'
// pow() without effect unless it lands exactly on a rounding boundary.
constexpr double kZipfUnits = 1099511627776.0; // 2^40

// The high 64 bits of a 64 x 64-bit product: a draw in [0, n) from a raw 64-bit output without
// a modulo's bias.
__extension__ using Uint128 = unsigned __int128;
uint64_t draw_below(uint64_t raw, uint64_t n) {
  return static_cast<uint64_t>((static_cast<Uint128>(raw) * n) >> 64);
}

} // namespace

Routing route_top_k(const std::vector<float>& logits, int64_t tokens, int64_t experts,
                    int64_t top_k, GatingKind gating) {
  check_top_k(experts, top_k);
  RIDGELINE_REQUIRE(static_cast<int64_t>(logits.size()) == tokens * experts,
                    "route_top_k: logits are not tokens x experts");
  Routing r = empty_routing(tokens, experts, top_k);
  std::vector<float> best(static_cast<size_t>(top_k)); // the chosen experts' scores
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * experts;
    int32_t* chosen = r.expert.data() + t * top_k;
    float* weight = r.weight.data() + t * top_k;
    // One pass in expert order keeping the k best sorted (score high to low): an expert enters
    // only by beating the k-th score, and goes after every score at least its own, so an equal
    // score keeps the lower index first. One comparison for most experts, where a sort of every
    // expert took most of a step's routing time at 128 experts.
    int64_t held = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const float score =
          gating == GatingKind::softmax ? row[e] : 1.0f / (1.0f + std::exp(-row[e]));
      if (held == top_k && !(score > best[top_k - 1])) continue;
      int64_t j = held < top_k ? held++ : top_k - 1;
      for (; j > 0 && best[j - 1] < score; --j) {
        best[j] = best[j - 1];
        chosen[j] = chosen[j - 1];
      }
      best[j] = score;
      chosen[j] = static_cast<int32_t>(e);
    }
    if (gating == GatingKind::softmax) {
      // The first chosen logit is the largest: exp of the differences never overflows.
      const float top = best[0];
      float sum = 0.0f;
      for (int64_t j = 0; j < top_k; ++j)
        sum += weight[j] = std::exp(best[j] - top);
      for (int64_t j = 0; j < top_k; ++j)
        weight[j] /= sum;
    } else {
      float sum = 0.0f;
      for (int64_t j = 0; j < top_k; ++j)
        sum += weight[j] = best[j];
      for (int64_t j = 0; j < top_k; ++j)
        weight[j] /= sum;
    }
  }
  return r;
}

const char* routing_mode_name(RoutingMode mode) {
  switch (mode) {
  case RoutingMode::router:
    return "router";
  case RoutingMode::uniform:
    return "uniform";
  case RoutingMode::zipf:
    return "zipf";
  }
  return "router";
}

Routing route_uniform(int64_t tokens, int64_t experts, int64_t top_k) {
  check_top_k(experts, top_k);
  Routing r = empty_routing(tokens, experts, top_k);
  for (int64_t i = 0; i < tokens * top_k; ++i)
    r.expert[i] = static_cast<int32_t>(i % experts);
  return r;
}

Routing route_zipf(int64_t tokens, int64_t experts, int64_t top_k, double s, uint64_t seed) {
  check_top_k(experts, top_k);
  if (!(s >= 0)) throw UsageError("the Zipf exponent must be >= 0 (got " + std::to_string(s) + ")");
  // Every expert keeps at least one unit, so that k distinct experts can always be drawn.
  std::vector<uint64_t> units(static_cast<size_t>(experts));
  double norm = 0;
  for (int64_t e = 0; e < experts; ++e)
    norm += std::pow(static_cast<double>(e + 1), -s);
  for (int64_t e = 0; e < experts; ++e)
    units[e] =
        std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(
                                  std::pow(static_cast<double>(e + 1), -s) / norm * kZipfUnits)));
  const uint64_t total = std::accumulate(units.begin(), units.end(), uint64_t{0});
  Routing r = empty_routing(tokens, experts, top_k);
  std::mt19937_64 rng(seed);
  std::vector<char> taken(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t* chosen = r.expert.data() + t * top_k;
    uint64_t left = total;
    for (int64_t j = 0; j < top_k; ++j) {
      const uint64_t u = draw_below(rng(), left);
      uint64_t acc = 0;
      int64_t e = 0;
      for (; e < experts; ++e) {
        if (taken[e]) continue;
        acc += units[e];
        if (u < acc) break;
      }
      taken[e] = 1;
      left -= units[e];
      chosen[j] = static_cast<int32_t>(e);
    }
    for (int64_t j = 0; j < top_k; ++j)
      taken[chosen[j]] = 0;
  }
  return r;
}

Permutation permute(const Routing& r) {
  Permutation p;
  const std::vector<int64_t> counts = expert_counts(r);
  p.offsets.assign(static_cast<size_t>(r.experts + 1), 0);
  for (int64_t e = 0; e < r.experts; ++e)
    p.offsets[e + 1] = p.offsets[e] + counts[e];
  const int64_t n = r.tokens * r.top_k;
  p.assignment.resize(static_cast<size_t>(n));
  p.row.resize(static_cast<size_t>(n));
  std::vector<int64_t> next(p.offsets.begin(), p.offsets.end() - 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = next[r.expert[i]]++;
    p.assignment[row] = i;
    p.row[i] = row;
  }
  return p;
}

std::vector<int64_t> expert_counts(const Routing& r) {
  std::vector<int64_t> counts(static_cast<size_t>(r.experts), 0);
  for (int32_t e : r.expert)
    ++counts[e];
  return counts;
}

double imbalance(const std::vector<int64_t>& counts) {
  const int64_t sum = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (sum == 0) return 1.0;
  const int64_t most = *std::max_element(counts.begin(), counts.end());
  return static_cast<double>(most) * static_cast<double>(counts.size()) / static_cast<double>(sum);
}

double MoeLoad::rank_imbalance() const {
  return imbalance(rank_rows);
}

double MoeLoad::expert_imbalance() const {
  return imbalance(expert_rows);
}

MoeLoad moe_load(const Routing& r, int ep) {
  if (ep < 1) throw UsageError("the expert-parallel degree must be >= 1");
  if (r.experts % ep != 0)
    throw UsageError(std::to_string(r.experts) +
                     " experts are not divisible by an expert-parallel "
                     "degree of " +
                     std::to_string(ep));
  if (r.tokens % ep != 0)
    throw UsageError(std::to_string(r.tokens) +
                     " tokens are not divisible by an expert-parallel "
                     "degree of " +
                     std::to_string(ep));
  MoeLoad load;
  load.ep = ep;
  load.expert_rows = expert_counts(r);
  load.rank_rows.assign(static_cast<size_t>(ep), 0);
  load.sent_rows.assign(static_cast<size_t>(ep), 0);
  load.received_rows.assign(static_cast<size_t>(ep), 0);
  const int64_t experts_per_rank = r.experts / ep, tokens_per_rank = r.tokens / ep;
  for (int64_t i = 0; i < r.tokens * r.top_k; ++i) {
    const int64_t src = i / r.top_k / tokens_per_rank, dst = r.expert[i] / experts_per_rank;
    ++load.rank_rows[dst];
    if (src == dst) continue;
    ++load.sent_rows[src];
    ++load.received_rows[dst];
  }
  return load;
}

} // namespace ridgeline
