// The bookkeeping of an expert-parallel MoE step (see moe_exchange.hpp).
#include "models/moe_exchange.hpp"

#include <numeric>
#include <string>

#include "core/error.hpp"

namespace ridgeline {
namespace {

int64_t sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

std::vector<int64_t> exclusive_scan(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i)
    offsets[i] = offsets[i - 1] + counts[i - 1];
  return offsets;
}

} // namespace

int64_t EpExchange::sent() const {
  return sum(send_counts);
}

int64_t EpExchange::received() const {
  return sum(recv_counts);
}

int64_t EpExchange::sent_off_rank() const {
  return sent() - send_counts[static_cast<size_t>(rank)];
}

int64_t EpExchange::received_off_rank() const {
  return received() - recv_counts[static_cast<size_t>(rank)];
}

std::vector<int64_t> dispatch_counts(const Permutation& p, int ep) {
  const int64_t experts = static_cast<int64_t>(p.offsets.size()) - 1;
  if (ep < 1 || experts % ep != 0)
    throw UsageError(std::to_string(experts) +
                     " experts are not divisible by an expert-parallel "
                     "degree of " +
                     std::to_string(ep));
  std::vector<int64_t> counts(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e)
    counts[static_cast<size_t>(e)] = p.offsets[e + 1] - p.offsets[e];
  return counts;
}

EpExchange plan_exchange(const Permutation& p, int ep, int rank,
                         const std::vector<int64_t>& received_counts) {
  const int64_t experts = static_cast<int64_t>(dispatch_counts(p, ep).size());
  EpExchange x;
  x.ep = ep;
  x.rank = rank;
  x.local_experts = experts / ep;
  const int64_t le = x.local_experts;
  if (rank < 0 || rank >= ep || static_cast<int64_t>(received_counts.size()) != ep * le)
    throw UsageError("plan_exchange: rank outside the group, or counts not [ep x local experts]");
  for (int j = 0; j < ep; ++j) {
    x.send_offsets.push_back(p.offsets[j * le]);
    x.send_counts.push_back(p.offsets[(j + 1) * le] - p.offsets[j * le]);
  }
  x.group_offsets.push_back(0);
  for (int i = 0; i < ep; ++i) {
    int64_t from_i = 0;
    for (int64_t e = 0; e < le; ++e) {
      const int64_t c = received_counts[static_cast<size_t>(i * le + e)];
      from_i += c;
      x.group_offsets.push_back(x.group_offsets.back() + c);
      x.group_expert.push_back(e);
    }
    x.recv_counts.push_back(from_i);
  }
  x.recv_offsets = exclusive_scan(x.recv_counts);
  return x;
}

ExpertGroups group_by_expert(const EpExchange& x) {
  const int64_t le = x.local_experts;
  RIDGELINE_REQUIRE(static_cast<int64_t>(x.group_offsets.size()) == x.ep * le + 1,
                    "group_by_expert: the exchange's groups are not [ep x local experts]");
  ExpertGroups g;
  g.offsets.push_back(0);
  for (int64_t e = 0; e < le; ++e) {
    for (int64_t i = 0; i < x.ep; ++i) {
      const size_t at = static_cast<size_t>(i * le + e);
      for (int64_t r = x.group_offsets[at]; r < x.group_offsets[at + 1]; ++r)
        g.order.push_back(r);
    }
    g.offsets.push_back(static_cast<int64_t>(g.order.size()));
    g.expert.push_back(e);
  }
  g.inverse.resize(g.order.size());
  for (size_t j = 0; j < g.order.size(); ++j)
    g.inverse[static_cast<size_t>(g.order[j])] = static_cast<int64_t>(j);
  return g;
}

MoeLoad ep_load(const std::vector<Routing>& routings) {
  RIDGELINE_REQUIRE(!routings.empty(), "ep_load: no routing");
  // Rank i's tokens are the i-th block of the group's: one routing of them all.
  Routing all = routings.front();
  for (size_t i = 1; i < routings.size(); ++i) {
    RIDGELINE_REQUIRE(routings[i].tokens == routings.front().tokens &&
                          routings[i].experts == all.experts && routings[i].top_k == all.top_k,
                      "ep_load: every rank routes as many tokens over the same experts");
    all.tokens += routings[i].tokens;
    all.expert.insert(all.expert.end(), routings[i].expert.begin(), routings[i].expert.end());
    all.weight.insert(all.weight.end(), routings[i].weight.begin(), routings[i].weight.end());
  }
  return moe_load(all, static_cast<int>(routings.size()));
}

} // namespace ridgeline
