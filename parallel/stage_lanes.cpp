// The TP group's side of a stage executor (see stage_lanes.hpp).
#include "parallel/stage_lanes.hpp"

#include "core/error.hpp"

namespace ridgeline {

void StageLanes::join(Recorder& rec, size_t fence) {
  if (!joins()) return;
  m_comm->complete(m_backend.stream(Lane::comm));
  for (size_t handle : m_open)
    rec.end(handle);
  m_open.clear();
  m_backend.wait_fence(Lane::compute, fence);
}

void StageLanes::ring_put(Recorder& rec, int32_t op_id, int64_t layer, const OpCost& cost,
                          RingRecord& record) {
  m_backend.wait_fence(Lane::comm, m_backend.fence(Lane::compute));
  if (record.begun) return;
  record.begun = true;
  record.handle = rec.begin(op_id, static_cast<int32_t>(layer), Lane::comm, cost, Lane::comm);
}

void StageLanes::ring_done(Recorder& rec, PeerExchange& exchange, size_t handle) {
  exchange.complete();
  rec.end(handle);
  m_backend.wait_fence(Lane::compute, m_backend.fence(Lane::comm));
}

size_t StageLanes::place_symmetric(const std::vector<size_t>& sizes,
                                   std::initializer_list<void**> slots) {
  RIDGELINE_REQUIRE(sizes.size() <= slots.size(), "a slot for every symmetric buffer");
  if (m_tp == 1) {
    m_symmetric.path = "none: at tp 1 the stage has no collective";
    return 0;
  }
  m_symmetric = ridgeline::place_symmetric(*m_comm, sizes);
  if (!m_symmetric.memory) return 0;
  // The first slots, one per buffer.
  auto slot = slots.begin();
  for (void* buffer : m_symmetric.buffers)
    **slot++ = buffer;
  return m_symmetric.memory->bytes();
}

} // namespace ridgeline
