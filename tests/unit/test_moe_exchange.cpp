// The bookkeeping of an expert-parallel MoE step: the counts, offsets and groups of the
// dispatch on a hand case, and the dispatch and combine of every rank simulated in one process
// (each row reaching its expert's rank, in its expert's group, and coming back to where it left).
#include <gtest/gtest.h>

#include <vector>

#include "core/error.hpp"
#include "models/moe_exchange.hpp"

namespace ridgeline {
namespace {

Routing hand_routing(std::vector<int32_t> experts) {
  Routing r;
  r.tokens = 2;
  r.experts = 4;
  r.top_k = 2;
  r.expert = std::move(experts);
  r.weight.assign(4, 0.5f);
  return r;
}

TEST(EpExchange, CountsOffsetsAndGroupsOnAHandCase) {
  // Two ranks of two experts each; rank 0's tokens go to experts {0, 2} and {3, 0}, rank 1's
  // to {1, 2} and {1, 3}.
  const Permutation p0 = permute(hand_routing({0, 2, 3, 0}));
  const Permutation p1 = permute(hand_routing({1, 2, 1, 3}));
  EXPECT_EQ(dispatch_counts(p0, 2), (std::vector<int64_t>{2, 0, 1, 1}));
  EXPECT_EQ(dispatch_counts(p1, 2), (std::vector<int64_t>{0, 2, 1, 1}));
  // Rank 0 receives its experts' counts from rank 0 ({2, 0}) and rank 1 ({0, 2}).
  const EpExchange x0 = plan_exchange(p0, 2, 0, {2, 0, 0, 2});
  EXPECT_EQ(x0.local_experts, 2);
  EXPECT_EQ(x0.send_counts, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(x0.send_offsets, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(x0.recv_counts, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(x0.recv_offsets, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(x0.group_offsets, (std::vector<int64_t>{0, 2, 2, 2, 4}));
  EXPECT_EQ(x0.group_expert, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(x0.sent_off_rank(), 2);
  EXPECT_EQ(x0.received_off_rank(), 2);
  const EpExchange x1 = plan_exchange(p1, 2, 1, {1, 1, 1, 1});
  EXPECT_EQ(x1.send_counts, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(x1.group_offsets, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(x1.received(), 4);
  EXPECT_EQ(x1.sent(), 4);
  // One rank: everything stays.
  const EpExchange one = plan_exchange(p0, 1, 0, dispatch_counts(p0, 1));
  EXPECT_EQ(one.send_counts, (std::vector<int64_t>{4}));
  EXPECT_EQ(one.group_offsets, (std::vector<int64_t>{0, 2, 2, 3, 4}));
  EXPECT_EQ(one.sent_off_rank(), 0);
  EXPECT_THROW(dispatch_counts(p0, 3), UsageError);
  EXPECT_THROW(plan_exchange(p0, 2, 0, {1, 2, 3}), UsageError);
}

// The received rows regrouped by expert: rank 0's rows of an expert, then rank 1's, and back.
TEST(EpExchange, GroupByExpertOnAHandCase) {
  // Two ranks of two local experts; received groups (rank 0: 1 and 2 rows, rank 1: 3 and 0).
  EpExchange x;
  x.ep = 2;
  x.local_experts = 2;
  x.group_offsets = {0, 1, 3, 6, 6};
  x.group_expert = {0, 1, 0, 1};
  const ExpertGroups g = group_by_expert(x);
  EXPECT_EQ(g.order, (std::vector<int64_t>{0, 3, 4, 5, 1, 2}));
  EXPECT_EQ(g.inverse, (std::vector<int64_t>{0, 4, 5, 1, 2, 3}));
  EXPECT_EQ(g.offsets, (std::vector<int64_t>{0, 4, 6}));
  EXPECT_EQ(g.expert, (std::vector<int64_t>{0, 1}));
  for (size_t j = 0; j < g.order.size(); ++j)
    EXPECT_EQ(g.inverse[static_cast<size_t>(g.order[j])], static_cast<int64_t>(j));
  x.group_offsets.pop_back();
  EXPECT_THROW(group_by_expert(x), std::exception);
}

// Every rank's dispatch and combine on tags (a row's global assignment index): each received
// row is one of its group's expert, the counts agree pairwise, the combine returns every rank
// its rows in the order it sent them, and the load is moe_load's of every token at once.
TEST(EpExchange, DispatchThenCombineIsTheIdentityOnEveryRank) {
  const int64_t experts = 6, tokens = 5, k = 2;
  for (int ep : {1, 2, 3, 6}) {
    const int64_t le = experts / ep;
    std::vector<Routing> routings;
    std::vector<Permutation> perms;
    std::vector<std::vector<int64_t>> sent(static_cast<size_t>(ep));
    for (int r = 0; r < ep; ++r) {
      routings.push_back(route_zipf(tokens, experts, k, 1.3, 40 + static_cast<uint64_t>(r)));
      perms.push_back(permute(routings.back()));
      for (int64_t a : perms.back().assignment)
        sent[static_cast<size_t>(r)].push_back(r * tokens * k + a);
    }
    std::vector<EpExchange> plans;
    for (int j = 0; j < ep; ++j) {
      std::vector<int64_t> received;
      for (int i = 0; i < ep; ++i) {
        const std::vector<int64_t> c = dispatch_counts(perms[static_cast<size_t>(i)], ep);
        received.insert(received.end(), c.begin() + j * le, c.begin() + (j + 1) * le);
      }
      plans.push_back(plan_exchange(perms[static_cast<size_t>(j)], ep, j, received));
    }
    // The dispatch.
    std::vector<std::vector<int64_t>> recv(static_cast<size_t>(ep));
    for (int j = 0; j < ep; ++j) {
      const EpExchange& x = plans[static_cast<size_t>(j)];
      recv[static_cast<size_t>(j)].assign(static_cast<size_t>(x.received()), -1);
      for (int i = 0; i < ep; ++i) {
        const EpExchange& from = plans[static_cast<size_t>(i)];
        ASSERT_EQ(from.send_counts[static_cast<size_t>(j)], x.recv_counts[static_cast<size_t>(i)]);
        for (int64_t n = 0; n < x.recv_counts[static_cast<size_t>(i)]; ++n)
          recv[static_cast<size_t>(j)]
              [static_cast<size_t>(x.recv_offsets[static_cast<size_t>(i)] + n)] =
                  sent[static_cast<size_t>(i)]
                      [static_cast<size_t>(from.send_offsets[static_cast<size_t>(j)] + n)];
      }
      for (size_t g = 0; g + 1 < x.group_offsets.size(); ++g)
        for (int64_t row = x.group_offsets[g]; row < x.group_offsets[g + 1]; ++row) {
          const int64_t tag = recv[static_cast<size_t>(j)][static_cast<size_t>(row)];
          const int64_t src = tag / (tokens * k);
          EXPECT_EQ(
              routings[static_cast<size_t>(src)].expert[static_cast<size_t>(tag % (tokens * k))],
              j * le + x.group_expert[g])
              << "ep " << ep << " rank " << j << " row " << row;
          EXPECT_EQ(src, static_cast<int64_t>(g) / le);
        }
    }
    // The combine: the reverse exchange.
    for (int i = 0; i < ep; ++i) {
      const EpExchange& x = plans[static_cast<size_t>(i)];
      std::vector<int64_t> back(static_cast<size_t>(x.sent()), -1);
      for (int j = 0; j < ep; ++j) {
        const EpExchange& at = plans[static_cast<size_t>(j)];
        for (int64_t n = 0; n < x.send_counts[static_cast<size_t>(j)]; ++n)
          back[static_cast<size_t>(x.send_offsets[static_cast<size_t>(j)] + n)] =
              recv[static_cast<size_t>(j)]
                  [static_cast<size_t>(at.recv_offsets[static_cast<size_t>(i)] + n)];
      }
      EXPECT_EQ(back, sent[static_cast<size_t>(i)]) << "ep " << ep << " rank " << i;
    }
    const MoeLoad load = ep_load(routings);
    for (int r = 0; r < ep; ++r) {
      EXPECT_EQ(load.rank_rows[static_cast<size_t>(r)], plans[static_cast<size_t>(r)].received());
      EXPECT_EQ(load.sent_rows[static_cast<size_t>(r)],
                plans[static_cast<size_t>(r)].sent_off_rank());
      EXPECT_EQ(load.received_rows[static_cast<size_t>(r)],
                plans[static_cast<size_t>(r)].received_off_rank());
    }
  }
}

} // namespace
} // namespace ridgeline
