// The TP group's side of a stage executor, one object that both executors (TpStage, TrainStage)
// hold: a site's collectives issued on the strategy's lane and recorded, the wait that joins the
// comm lane back to the compute and ends the records still open, the record of ce-ring's puts,
// and where the symm: strategies' buffers live. The executors keep what differs between them:
// which op a collective is and what it costs, and which buffers it reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/peer_exchange.hpp"
#include "core/timeline.hpp"
#include "models/backend.hpp"
#include "parallel/overlap_policy.hpp"

namespace ridgeline {

class StageLanes {
public:
  /// `comm` (the TP group) may be null at tp 1, where nothing is issued.
  StageLanes(Backend& backend, Communicator* comm, int tp)
      : m_backend(backend), m_comm(comm), m_tp(tp) {}

  /// The lane the strategy issues its collectives on (OverlapPolicy::queue).
  void use(const OverlapPolicy& policy) { m_queue = policy.queue; }
  Lane queue() const { return m_queue; }

  /// One collective of a site (issue_collective): on the strategy's lane, recorded as `op_id` of
  /// `layer` with `cost`, in a range named `name`; a non-blocking one's record stays open until
  /// join().
  template <class Issue>
  void collective(Recorder& rec, int32_t op_id, int64_t layer, const OpCost& cost,
                  const std::string& name, Issue&& issue) {
    issue_collective(m_backend, *m_comm, rec, m_queue, op_id, static_cast<int32_t>(layer), cost,
                     name, m_open, std::forward<Issue>(issue));
  }
  /// The comm lane's fence after what was issued so far; 0 where there is nothing to join (tp 1,
  /// or collectives on the compute lane).
  size_t fence() const { return joins() ? m_backend.fence(Lane::comm) : 0; }
  /// The compute lane waits for `fence` after the host completed what it started, and the
  /// records of the non-blocking collectives end. Nothing where fence() is 0.
  void join(Recorder& rec, size_t fence);

  /// The record of a ce-ring site's puts: begun by the first put, ended once they completed.
  struct RingRecord {
    size_t handle = 0;
    bool begun = false;
  };
  /// Before each put: the comm lane waits for what the compute lane issued so far; the first
  /// begins the site's record, as `op_id` of `layer` with `cost`.
  void ring_put(Recorder& rec, int32_t op_id, int64_t layer, const OpCost& cost,
                RingRecord& record);
  /// After a site's last put: `exchange`'s puts complete, the record ends, and the compute lane
  /// waits for them (before it rewrites what they read).
  void ring_done(Recorder& rec, PeerExchange& exchange, size_t handle);

  /// The symm: strategies' buffers of `sizes` bytes in the communicator's symmetric memory
  /// (collective over the TP group): the first of `slots` are pointed at their buffers, one
  /// each, where the communicator has such memory; where not, every slot keeps its ordinary
  /// buffer. symmetric_path() says which. Returns the bytes it allocated.
  size_t place_symmetric(const std::vector<size_t>& sizes, std::initializer_list<void**> slots);
  const std::string& symmetric_path() const { return m_symmetric.path; }

private:
  bool joins() const { return m_tp > 1 && m_queue == Lane::comm; }

  Backend& m_backend;
  Communicator* m_comm;
  int m_tp;
  Lane m_queue = Lane::compute;
  std::vector<size_t> m_open; ///< records of non-blocking collectives not yet joined
  SymmetricBuffers m_symmetric;
};

} // namespace ridgeline
