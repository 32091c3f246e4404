// The bookkeeping of an expert-parallel MoE step, pure arithmetic: which of a rank's permuted
// rows the dispatch sends to which rank, where the rows a rank receives lie and which of its
// experts each block of them is for. The combine sends every row back where it came from.
#pragma once

#include <cstdint>
#include <vector>

#include "models/moe_routing.hpp"

namespace ridgeline {

/// One rank's dispatch and combine on an expert-parallel group of `ep` ranks, rank j holding
/// experts [j x local_experts, (j + 1) x local_experts). Rows are counted in rows of hidden
/// elements. The rows a rank sends are its permuted rows (grouped by expert, so by owning
/// rank); those it receives stay in source order, rank i's block then, inside it, expert by
/// expert: group i x local_experts + e of the received rows is rank i's rows for local expert e.
struct EpExchange {
  int ep = 1;
  int rank = 0;
  int64_t local_experts = 0;
  std::vector<int64_t> send_counts;  ///< [ep]: rows to rank j
  std::vector<int64_t> send_offsets; ///< [ep]: the first permuted row sent to rank j
  std::vector<int64_t> recv_counts;  ///< [ep]: rows from rank i
  std::vector<int64_t> recv_offsets; ///< [ep]: the first received row from rank i
  /// [ep x local_experts + 1]: the received rows' groups, each one local expert's rows from one
  /// rank (empty groups included).
  std::vector<int64_t> group_offsets;
  std::vector<int64_t> group_expert; ///< [ep x local_experts]: each group's local expert

  int64_t sent() const;              ///< rows this rank's tokens send, to itself included
  int64_t received() const;          ///< rows this rank's experts compute
  int64_t sent_off_rank() const;     ///< rows sent to other ranks
  int64_t received_off_rank() const; ///< rows received from other ranks
};

/// The received rows regrouped by local expert, every rank's rows of an expert adjacent (rank
/// 0's first): the expert GEMMs then run one group per expert, a few large GEMMs where the
/// received order has ep times as many small ones (at 128 rows a group a GEMM fills a fraction
/// of the GPU).
struct ExpertGroups {
  std::vector<int64_t> order;   ///< [received]: the received row of regrouped row j
  std::vector<int64_t> inverse; ///< [received]: the regrouped row of received row i
  std::vector<int64_t> offsets; ///< [local_experts + 1]: each expert's regrouped rows
  std::vector<int64_t> expert;  ///< [local_experts]: 0, 1, ... (the groups' local experts)
};

/// The regrouping of an exchange's received rows (see ExpertGroups).
ExpertGroups group_by_expert(const EpExchange& x);

/// The counts a rank sends in the counts exchange before the dispatch: its rows per expert,
/// rank j's block of local_experts first (the permutation's expert counts). Throws UsageError
/// where ep does not divide the experts.
std::vector<int64_t> dispatch_counts(const Permutation& p, int ep);

/// The exchange of rank `rank` from its permutation and what the counts exchange brought it,
/// `received_counts` [ep x local_experts]: rank i's rows for this rank's local expert e at
/// i x local_experts + e.
EpExchange plan_exchange(const Permutation& p, int ep, int rank,
                         const std::vector<int64_t>& received_counts);

/// The group's load from every rank's routing of its own tokens (routings[i]: rank i's), as
/// moe_load() counts it for the tokens of every rank routed at once: the same MoeLoad for the
/// same assignments.
MoeLoad ep_load(const std::vector<Routing>& routings);

} // namespace ridgeline
