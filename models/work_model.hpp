// The work model: for every op of a tensor-parallel layer, its FLOPs, HBM bytes and
// interconnect bytes on one rank. Timelines, reports and the roofline attribution use it.
#pragma once

#include <string>
#include <vector>

#include "core/timeline.hpp"
#include "models/backend.hpp"
#include "models/model_spec.hpp"
#include "models/moe_routing.hpp"
#include "models/op_registry.hpp"

namespace ridgeline {

/// The grid group a collective runs over (p2p ops run between a pair of neighbouring stages;
/// ep: an MoE layer's expert-parallel group, ep of the data-parallel ranks).
enum class CommGroup : int { tp = 0, pp = 1, dp = 2, ep = 3 };

/// One op of a layer as the work model sees it.
struct OpSpec {
  std::string name;
  Pass pass = Pass::forward;
  OpKind kind = OpKind::other;
  Lane lane = Lane::compute;
  OpCost cost;
  /// For collectives: the collective registry's name of what it runs ("all_reduce", ...);
  /// attribution finds its interconnect roof by it. Empty for compute ops.
  std::string collective;
  /// For collectives: the ranks of its group; 0 for the tensor-parallel group (the layer's
  /// collectives). Data-parallel and pipeline collectives name theirs.
  int64_t group_size = 0;
  /// For collectives: which group of the grid that is (its scope on the nodes picks the roof).
  CommGroup group = CommGroup::tp;
  /// For GEMMs: c[m, n] = a[m, k] * w[n, k]^T on this rank (0 for other ops).
  int64_t m = 0, n = 0, k = 0;
};

/// An op of the registry named `name` with `cost`: its kind, lane, pass and collective are the
/// registry's (throws if `name` is not registered).
OpSpec registered_op(const std::string& name, const OpCost& cost = {});

/// Every op of one layer on one rank, in execution order (collectives only when tp > 1:
/// all-reduces, or all-gathers and reduce-scatters under sequence parallelism).
std::vector<OpSpec> layer_ops(const ModelSpec& m, const LayerShape& s, AttentionImpl attn);
/// The entry of `ops` named `name` (throws if absent).
const OpSpec& find_op(const std::vector<OpSpec>& ops, const std::string& name);

/// c[m, n] = a[m, k] w[n, k]^T with `elem_bytes`-byte elements: 2mnk FLOPs, and each operand
/// read or written once from HBM. The cost of every GEMM op of the layer.
OpCost gemm_cost(double m, double n, double k, double elem_bytes);
/// FLOPs of a causal attention forward on one rank (QK^T and PV, 2 FLOPs per MAC).
double attention_flops(const ModelSpec& m, const LayerShape& s);
/// Weight bytes of one layer on one rank.
double layer_weight_bytes(const ModelSpec& m, int tp, DType dtype);

} // namespace ridgeline

namespace ridgeline {
/// Bytes one rank allocates for `layers` layers of a stage: weights, KV caches (decode) and
/// activation buffers. Used to reject configurations that cannot fit before allocating.
double stage_memory_bytes(const ModelSpec& m, const LayerShape& s, int64_t layers);
} // namespace ridgeline

namespace ridgeline {
/// One mixture-of-experts MLP on an expert-parallel group (the experts unsplit by TP): the
/// costs of the busiest rank, the one whose experts receive the most rows.
struct MoeWork {
  OpCost router; ///< each rank's tokens x the router [experts, hidden]
  /// The busiest rank's grouped GEMMs, gate and up [2f, hidden] then down [hidden, f], one per
  /// expert over its rows; an expert without rows reads no weights.
  OpCost experts;
  OpCost shared; ///< the shared experts' gate and up, then down, on each rank's tokens
  /// The all-to-all before the experts: comm_bytes = the busiest rank's rows sent or received
  /// off-rank (the larger) x hidden x element size.
  OpCost dispatch;
  OpCost combine;                 ///< the rows back: the dispatch's bytes, reversed
  double dispatch_mean_bytes = 0; ///< the same, the mean over the ranks
  int busiest_rank = 0;
  double rank_imbalance = 1;   ///< MoeLoad::rank_imbalance()
  double expert_imbalance = 1; ///< MoeLoad::expert_imbalance()
};

/// The work of one MoE MLP of `m` under `load` (its routing on load.ep ranks) with `dtype`
/// elements. Additive: the dense layer's ops are untouched.
MoeWork moe_work(const ModelSpec& m, const MoeLoad& load, DType dtype);

/// Every op of one MoE layer on the busiest rank of its expert-parallel group (the experts
/// unsplit by TP): layer_ops' attention ops unchanged, then in place of the MLP's GEMMs and
/// collectives the router GEMM, the dispatch all-to-all over load.ep ranks (the busiest rank's
/// bytes), the experts' grouped GEMMs (the busiest rank's rows), the combine all-to-all (both
/// all-to-alls only where load.ep > 1), with shared experts their GEMMs, and at s.tp > 1 without
/// sequence parallelism moe_allgather_op; then the residual add. The costs are moe_work's. At
/// tp > 1 each rank of a TP group routes its block of s.tokens() / s.tp of the group's tokens;
/// `load` routes s.tokens() / s.tp x load.ep tokens: each rank of the EP group its own.
std::vector<OpSpec> moe_layer_ops(const ModelSpec& m, const LayerShape& s, AttentionImpl attn,
                                  const MoeLoad& load);
/// An MoE layer at s.tp > 1 without sequence parallelism: the MLP outputs of each TP rank's
/// block of the tokens all-gathered over the TP group (comm_bytes: the whole [tokens, hidden]
/// output, as the dense all-gathers count).
OpSpec moe_allgather_op(const ModelSpec& m, const LayerShape& s);
} // namespace ridgeline
