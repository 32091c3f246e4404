#include "parallel/stage_core.hpp"

#include "core/error.hpp"

namespace ridgeline {

StageCore::StageCore(Backend& backend, Communicator* tp_comm, PeerExchange* exchange, int tp,
                     const Overlap& overlap)
    : m_backend(backend), m_comm(tp_comm), m_exchange(exchange), m_tp(tp),
      m_lanes(backend, tp_comm, tp), m_policy(overlap_policy(overlap)) {
  m_lanes.use(m_policy);
  RIDGELINE_REQUIRE(tp == 1 || (tp_comm && tp_comm->size() == tp),
                    "tensor parallelism needs a communicator of tp ranks");
}

void StageCore::require_exchange_windows(const std::vector<size_t>& need, int tp_rank) const {
  RIDGELINE_REQUIRE(m_exchange->size() == m_tp && m_exchange->rank() == tp_rank,
                    "the peer exchange must span the stage's tensor-parallel group");
  for (size_t w = 0; w < need.size(); ++w)
    RIDGELINE_REQUIRE(m_exchange->window_bytes(w) >= need[w],
                      "the peer exchange's windows are smaller than the stage's");
}

void StageCore::require_exchange(const Overlap& overlap) const {
  if (overlap_policy(overlap).ring && m_tp > 1 && m_exchange == nullptr)
    throw UsageError("--overlap " + overlap.name() + " needs the stage built with a peer exchange");
}

void StageCore::use_overlap(const Overlap& overlap) {
  require_exchange(overlap);
  m_policy = overlap_policy(overlap);
  m_lanes.use(m_policy);
}

Buffer StageCore::alloc(int64_t rows, int64_t cols) {
  Buffer b = m_backend.allocate(rows, cols);
  m_allocated += b.bytes();
  return b;
}

Tensor StageCore::full_view(void* data) const {
  return Tensor{data, m_geo.tokens, m_geo.hidden, m_geo.hidden, m_backend.dtype()};
}

Tensor StageCore::stream_view(void* data) const {
  return Tensor{data, m_geo.stream_tokens, m_geo.hidden, m_geo.hidden, m_backend.dtype()};
}

} // namespace ridgeline
