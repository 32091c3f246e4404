// The mixture-of-experts part of a point of an MoE model: the expert-parallel group (ep
// consecutive ranks of the stage, TP innermost: at tp > 1 it may hold the ranks of several TP
// groups, or part of one), this rank's MoE MLPs in place of the stage's dense ones (on its block
// of its TP group's tokens), the one-rank MLPs of every expert the check's reference stage runs,
// the group's load and what the output records of it.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "app/point_common.hpp"
#include "parallel/ep_moe.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {

/// Bytes a rank of an MoE point allocates beyond its stage: its experts, the router and the
/// shared experts of each layer of the stage, the dispatch's buffers, and with `check` every
/// expert of every layer for the reference (0 for a dense model).
double moe_memory_bytes(const PointSpec& point, bool check);

class MoePoint {
public:
  /// Splits the group off the stage's ranks, creates its communicator and this rank's
  /// experts, and with `check` the reference's every expert (of every layer). Every rank calls.
  MoePoint(JobContext& job, const PointSpec& point, const GridComms& comms, Backend& backend,
           OpTable& ops, bool check);
  ~MoePoint();
  MoePoint(const MoePoint&) = delete;
  MoePoint& operator=(const MoePoint&) = delete;

  StageMlp* mlp() { return m_moe.get(); }
  StageMlp* reference() { return m_reference.get(); }
  /// The microbatch index of this rank's input: each TP group (data-parallel replica) its own
  /// tokens.
  int64_t input_index() const { return m_input; }
  /// One untimed forward of `stage` (built with mlp() and the op table `ops`), then the group's
  /// load of its first layer and the ops' costs from it (moe_work). Every rank calls.
  void prime(TpStage& stage, Backend& backend, OpTable& ops);
  /// The layer's ops for attribution (moe_layer_ops under the primed load).
  std::vector<OpSpec> layer_ops(const LayerShape& shape, AttentionImpl attention) const;
  /// Per layer step run so far, the busiest rank's rows over the group's mean (every rank calls).
  std::vector<double> imbalance_steps() const { return m_moe->imbalance_history(); }
  /// The routing, the load and `steps`' (imbalance_steps()) mean and largest; rank 0 prints them
  /// with `print`.
  Attrs attrs(const std::vector<double>& steps, bool print) const;

private:
  const PointSpec& m_point;
  MPI_Comm m_group = MPI_COMM_NULL;
  std::unique_ptr<Communicator> m_comm;
  std::unique_ptr<EpMoe> m_moe, m_reference;
  int64_t m_input = 0;
  MoeLoad m_load;
};

} // namespace ridgeline
