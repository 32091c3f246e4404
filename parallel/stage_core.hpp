// What both stage executors (TpStage: prefill, decode and mixed steps; TrainStage: forward and
// backward) hold of one TP rank's stage and do the same way: the backend, the TP group's
// communicator and peer exchange, the lanes their collectives run on (StageLanes), the overlap
// policy, the layer geometry, the index of the layer's ops, and the buffers they allocate and
// view. Each executor keeps only its buffers, activations and layer phases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/peer_exchange.hpp"
#include "models/backend.hpp"
#include "models/layer_plan.hpp"
#include "parallel/layer_op_index.hpp"
#include "parallel/overlap.hpp"
#include "parallel/overlap_policy.hpp"
#include "parallel/stage_lanes.hpp"

namespace ridgeline {

class StageCore {
public:
  /// Device memory this stage allocated (weights, caches, activations, buffers).
  size_t allocated_bytes() const { return m_allocated; }

protected:
  ~StageCore() = default; // an executor is never deleted through its base
  /// Throws where tp > 1 without a communicator of tp ranks.
  StageCore(Backend& backend, Communicator* tp_comm, PeerExchange* exchange, int tp,
            const Overlap& overlap);

  /// Throws where the peer exchange does not span the TP group as rank `tp_rank`, or where a
  /// window is smaller than `need` says.
  void require_exchange_windows(const std::vector<size_t>& need, int tp_rank) const;
  /// Throws UsageError where `overlap` puts through a peer exchange (ce-ring at tp > 1) and the
  /// stage was built without one.
  void require_exchange(const Overlap& overlap) const;
  /// Runs the TP sites under `overlap` from now on (its policy, on its lanes), once
  /// require_exchange() has passed.
  void use_overlap(const Overlap& overlap);

  Buffer alloc(int64_t rows, int64_t cols);
  Tensor full_view(void* data) const;   ///< [tokens, hidden]
  Tensor stream_view(void* data) const; ///< [stream tokens, hidden]
  /// Whether the TP sites run as the copy-engine ring (ce-ring, ce-ring:K at tp > 1).
  bool ring() const { return m_policy.ring && m_tp > 1; }

  Backend& m_backend;
  Communicator* m_comm;
  PeerExchange* m_exchange;
  int m_tp;
  StageLanes m_lanes;
  OverlapPolicy m_policy; ///< the stage's overlap's
  /// This rank's shard of a layer (set by the executor once its shape is known).
  LayerGeometry m_geo;
  layer_op::LayerOpIndex m_op_index; ///< the executor's plan by the layer's ops
  size_t m_allocated = 0;
};

} // namespace ridgeline
