// The mixture-of-experts MLP of a stage on an expert-parallel group: each rank routes its own
// tokens (at tp > 1 its block of its TP group's), sends each row to the rank holding its expert
// (the dispatch, an all-to-all-v), runs its experts' grouped GEMMs on the rows it received and
// sends them back (the combine), then adds them to their tokens with their weights.
// Backend-generic: the rows move through the Communicator, the GEMMs through Backend::grouped_gemm.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "collectives/communicator.hpp"
#include "models/moe_exchange.hpp"
#include "models/moe_layer.hpp"
#include "models/work_model.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {

/// What one rank's MoE MLPs compute.
struct EpMoeSpec {
  ModelSpec model;
  RoutingControl routing;
  int ep = 1; ///< ranks of the expert-parallel group; rank r holds experts / ep experts
  int ep_rank = 0;
  int64_t first_layer = 0; ///< global index of the stage's first layer
  int64_t num_layers = 1;
  int64_t tokens = 0; ///< this rank's tokens per forward
  uint64_t seed = 0;
  /// ep 1 only: the tokens routed in blocks.size() equal blocks, block i with the routing seed
  /// blocks[i], as the ranks of an EP x TP layout route theirs (the reference of such a
  /// layout). Empty: one block, routing.seed.
  std::vector<uint64_t> block_seeds;
};

class EpMoe final : public StageMlp {
public:
  /// Allocates and generates this rank's experts (and the router and shared experts, whole) of
  /// every layer. `ep_comm` moves the rows (null at ep 1); `counts` is the same group's MPI
  /// communicator, over which each step's row counts are exchanged on the host (the routing is
  /// on the host already). Every rank of the group constructs it. Its ops are found (or added)
  /// by name in the table of the Recorder forward() is given.
  EpMoe(Backend& backend, Communicator* ep_comm, MPI_Comm counts, const EpMoeSpec& spec);

  /// router, shared experts, dispatch, experts, combine (the last three one op at ep 1: the
  /// local experts). Synchronises at the routing. Every rank of the group calls.
  void forward(Recorder& rec, int64_t layer, const Tensor& x, Tensor y) override;

  /// The costs each op records (moe_work's, of the busiest rank).
  void set_costs(const MoeWork& work) { m_work = work; }
  /// The last forward's routing of this rank's tokens, per layer of the stage.
  const std::vector<Routing>& routings() const { return m_routings; }
  /// The group's load of the last forward's `local_layer` (collective over the group).
  MoeLoad group_load(size_t local_layer) const;
  /// Per forward of a layer, in order: the rows this rank's experts computed.
  const std::vector<int64_t>& rows_history() const { return m_rows; }
  /// Per forward of a layer: the busiest rank's rows over the mean rank's (collective).
  std::vector<double> imbalance_history() const;

private:
  // forward() of the stage's layer l (weights w) routed in spec.block_seeds' blocks (one rank,
  // every expert), recorded as the op `experts_op`.
  void forward_blocks(Recorder& rec, int32_t experts_op, size_t l, const MoeWeights& w,
                      const Tensor& x, Tensor y);

  Backend& m_backend;
  Communicator* m_comm;
  MPI_Comm m_counts;
  EpMoeSpec m_spec;
  MoeWork m_work;
  std::vector<MoeWeights> m_weights;
  Buffer m_send, m_recv; ///< [tokens x top_k, hidden], [ep x tokens x top_k, hidden]
  MoeScratch m_scratch;  ///< the router's logits and the experts' intermediates, reused
  std::vector<Routing> m_routings;
  std::vector<int64_t> m_rows;
};

} // namespace ridgeline
