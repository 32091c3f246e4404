// TpStage's copy-engine ring (--overlap ce-ring and ce-ring:K): a row-parallel GEMM's pieces
// put into the peers' exchange windows as they are computed, a column-parallel GEMM fed by the
// gathered pieces, and the waits and releases of the windows (see tp_layer.hpp).
#include "parallel/tp_layer.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "parallel/tp_layer_windows.hpp"

namespace ridgeline {

using namespace tp_ring;

void TpStage::ring_column_gemm(Recorder& rec, int gemm_slot, int gather_slot, int64_t layer,
                               const Tensor& w, Tensor out) {
  const NoLaunchChain plain(m_backend);
  const int tp = m_spec.shape.tp, r = m_spec.tp_rank;
  const int64_t n = m_geo.stream_tokens;
  const Tensor shard = stream_view(bufs().ln);
  const Tensor full = full_view(bufs().ln_full);
  const size_t bytes = shard.bytes();
  const Stream compute = m_backend.stream(Lane::compute);
  RingRecord record;
  if (communicating()) {
    // This rank's rows into every peer, beside the GEMM on them.
    const ranges::Scope range(m_op_index.spec(gather_slot).name);
    ring_comm_begin(rec, gather_slot, layer, record);
    put_to_peers(w_gather, static_cast<size_t>(r) * bytes, shard.data, bytes);
  }
  if (computing()) {
    const ScopedOp op = m_op_index.scope(rec, gemm_slot, layer, 1.0 / tp);
    gemm(shard, w, out.rows_slice(r * n, n), communicating());
  }
  // Each peer's rows as they land, nearest peer first.
  for (int i = 1; i < tp; ++i) {
    const int j = (r + tp - i) % tp;
    if (communicating())
      m_exchange->wait(j, w_gather, static_cast<size_t>(j) * bytes, bytes, compute);
    if (computing()) {
      const ScopedOp op = m_op_index.scope(rec, gemm_slot, layer, 1.0 / tp);
      gemm(full.rows_slice(j * n, n), w, out.rows_slice(j * n, n), false);
    }
    if (communicating()) m_exchange->release(j, w_gather, compute);
  }
  if (communicating()) {
    // The next norm rewrites the rows the puts read.
    m_lanes.ring_done(rec, *m_exchange, record.handle);
  }
}

void TpStage::put_to_peers(size_t w, size_t offset, const void* src, size_t bytes) {
  m_exchange->put_to_peers(w, offset, src, bytes, m_backend.stream(Lane::comm));
}

void TpStage::release_pending(PendingPiece& pending) {
  if (pending.peer < 0) return;
  m_exchange->release(pending.peer, pending.window, m_backend.stream(Lane::compute));
  pending = PendingPiece{};
}

void TpStage::ring_comm_begin(Recorder& rec, int slot, int64_t layer, RingRecord& record) {
  m_lanes.ring_put(rec, m_op_index.id(slot), layer, m_op_index.spec(slot).cost, record);
}

void TpStage::ring_row_gemm(Recorder& rec, int gemm_slot, int reduce_slot, int64_t layer,
                            const Tensor& in, const Tensor& w, Tensor out_full, Tensor out_shard,
                            size_t reduce_window, size_t out_window, PendingPiece& pending) {
  if (m_policy.ring_subpieces > 1) {
    ring_row_gemm_subpieces(rec, gemm_slot, reduce_slot, layer, in, w, out_full, out_shard,
                            reduce_window, out_window, pending);
    return;
  }
  const NoLaunchChain plain(m_backend);
  const int tp = m_spec.shape.tp, r = m_spec.tp_rank;
  const int64_t n = m_geo.tokens / tp;
  const Tensor own = m_sp ? out_shard : out_full.rows_slice(r * n, n);
  const size_t bytes = own.bytes();
  const Tensor landed = full_view(m_exchange->window(reduce_window));
  const Stream compute = m_backend.stream(Lane::compute), comm = m_backend.stream(Lane::comm);
  RingRecord record;
  // The collective's profiler ranges cover its own calls only, not the GEMMs between them.
  const std::string& name = m_op_index.spec(reduce_slot).name;
  // The pieces the peers own first, the next rank's first, each put to its owner while the next
  // piece computes; this rank's own piece last.
  for (int i = 1; i < tp; ++i) {
    const int d = (r + i) % tp;
    const Tensor piece = out_full.rows_slice(d * n, n);
    if (computing()) {
      const ScopedOp op = m_op_index.scope(rec, gemm_slot, layer, 1.0 / tp);
      gemm(in.rows_slice(d * n, n), w, piece, true);
    }
    if (communicating()) {
      const ranges::Scope range(name);
      ring_comm_begin(rec, reduce_slot, layer, record);
      m_exchange->put(d, reduce_window, static_cast<size_t>(r) * bytes, piece.data, bytes, comm);
    }
  }
  if (computing()) {
    const ScopedOp op = m_op_index.scope(rec, gemm_slot, layer, 1.0 / tp);
    gemm(in.rows_slice(r * n, n), w, own, communicating());
  }
  if (!communicating()) return;
  const ranges::Scope range(name);
  for (int i = 1; i < tp; ++i) {
    const int j = (r + tp - i) % tp;
    m_exchange->wait(j, reduce_window, static_cast<size_t>(j) * bytes, bytes, compute);
  }
  // Under sequence parallelism the last peer's piece is left for the op that reads the reduced
  // rows next (the residual add, and the norm after the projection), which adds it as it reads
  // them: a pass over the piece fewer (Backend::add_partials). That op releases it.
  const int last = r == tp - 1 ? tp - 2 : tp - 1;
  const bool defer = m_sp && computing();
  if (tp > 2 || !defer) {
    // The reduction of the reduce-scatter: the peers' partial pieces added in rank order. Its
    // bytes are counted once, by the puts' record.
    const ScopedOp op = m_op_index.ring_scope(rec, reduce_slot, layer);
    for (int j = 0; j < tp; ++j)
      if (j != r && !(defer && j == last)) m_backend.add(own, landed.rows_slice(j * n, n), own);
  }
  for (int j = 0; j < tp; ++j)
    if (j != r && !(defer && j == last)) m_exchange->release(j, reduce_window, compute);
  if (defer) pending = {landed.rows_slice(last * n, n), last, reduce_window};
  if (!m_sp) {
    // The all-gather of the summed pieces into every peer's output rows. Released as soon as
    // they land: a peer puts into them again only after this rank's next partial piece for it,
    // which this rank computes after it has consumed them.
    ring_comm_begin(rec, reduce_slot, layer, record);
    put_to_peers(out_window, static_cast<size_t>(r) * bytes, own.data, bytes);
    ring_gather_pending(rec, pending, record.handle, out_window);
    return;
  }
  // The next GEMMs rewrite the pieces the puts read.
  m_lanes.ring_done(rec, *m_exchange, record.handle);
}

void TpStage::ring_gather_pending(Recorder& rec, PendingPiece& pending, size_t handle,
                                  size_t out_window) {
  pending.gathering = true;
  pending.handle = handle;
  pending.gather_window = out_window;
  // The next op runs on this rank's rows while the peers' land; with no compute, nothing does.
  if (!computing()) gathered_pieces(rec, pending, [](int64_t, int64_t) {});
}

void TpStage::ring_row_gemm_subpieces(Recorder& rec, int gemm_slot, int reduce_slot, int64_t layer,
                                      const Tensor& in, const Tensor& w, Tensor out_full,
                                      Tensor out_shard, size_t reduce_window, size_t out_window,
                                      PendingPiece& pending) {
  const NoLaunchChain plain(m_backend);
  const int tp = m_spec.shape.tp, r = m_spec.tp_rank, sub = m_policy.ring_subpieces;
  const int64_t n = m_geo.tokens / tp, q = n / sub;
  const Tensor own = m_sp ? out_shard : out_full.rows_slice(r * n, n);
  const size_t bytes = own.bytes(), q_bytes = bytes / static_cast<size_t>(sub);
  const Tensor landed = full_view(m_exchange->window(reduce_window));
  const Stream compute = m_backend.stream(Lane::compute), comm = m_backend.stream(Lane::comm);
  const std::string& name = m_op_index.spec(reduce_slot).name;
  RingRecord record;
  auto at = [&](int rank, int k) { return static_cast<size_t>(rank) * bytes + k * q_bytes; };
  // The peers' pieces first, sub-piece by sub-piece, each put to its owner while the next
  // computes. A sender's next put into a window waits for the receiver's release of the one
  // before, so each peer's partial sub-piece is released as soon as it lands (it sits at its
  // own offset; the last is released only once consumed, below), on the comm lane; `arrived`
  // marks where every peer's sub-piece k has landed.
  std::vector<size_t> arrived;
  for (int k = 0; k < sub; ++k) {
    for (int i = 1; i < tp; ++i) {
      const int d = (r + i) % tp;
      const Tensor piece = out_full.rows_slice(d * n + k * q, q);
      if (computing()) {
        const ScopedOp op = m_op_index.scope(rec, gemm_slot, layer, 1.0 / (tp * sub));
        gemm(in.rows_slice(d * n + k * q, q), w, piece, true);
      }
      if (communicating()) {
        const ranges::Scope range(name);
        ring_comm_begin(rec, reduce_slot, layer, record);
        m_exchange->put(d, reduce_window, at(r, k), piece.data, q_bytes, comm);
      }
    }
    if (!communicating()) continue;
    const ranges::Scope range(name);
    for (int i = 1; i < tp; ++i) {
      const int j = (r + tp - i) % tp;
      m_exchange->wait(j, reduce_window, at(j, k), q_bytes, comm);
      if (k < sub - 1) m_exchange->release(j, reduce_window, comm);
    }
    arrived.push_back(m_backend.hold_fence(Lane::comm));
  }
  // This rank's own sub-pieces: each GEMM adds the nearest peer's partial sub-piece in its
  // epilogue (the others, at tp > 2, in add kernels recorded as the collective's reduction), and
  // without sequence parallelism each summed sub-piece goes into every peer while the next
  // computes. Every peer's previous summed sub-piece is waited for and released on the comm lane
  // before this rank's next put (it landed while this sub-piece computed); the last is left to
  // the next op.
  const int nearest = (r + tp - 1) % tp;
  for (int k = 0; k < sub; ++k) {
    const Tensor mine = own.rows_slice(k * q, q);
    const Tensor rows = in.rows_slice(r * n + k * q, q);
    if (communicating()) {
      m_backend.wait_fence(Lane::compute, arrived[static_cast<size_t>(k)]);
      m_backend.release_fence(arrived[static_cast<size_t>(k)]);
    }
    if (computing()) {
      const ScopedOp op = m_op_index.scope(rec, gemm_slot, layer, 1.0 / (tp * sub));
      if (communicating()) {
        m_backend.set_gemm_sm_limit(m_spec.overlap_gemm_sms);
        m_backend.gemm_add(rows, w, landed.rows_slice(nearest * n + k * q, q), mine);
      } else {
        gemm(rows, w, mine, false);
      }
    }
    if (!communicating()) continue;
    const ranges::Scope range(name);
    if (tp > 2 || !computing()) {
      const ScopedOp op = m_op_index.ring_scope(rec, reduce_slot, layer);
      for (int j = 0; j < tp; ++j)
        if (j != r && (j != nearest || !computing()))
          m_backend.add(mine, landed.rows_slice(j * n + k * q, q), mine);
    }
    if (k == sub - 1)
      for (int j = 0; j < tp; ++j)
        if (j != r) m_exchange->release(j, reduce_window, compute);
    if (m_sp) continue; // the reduce-scatter ends here
    ring_comm_begin(rec, reduce_slot, layer, record);
    if (k > 0) {
      for (int i = 1; i < tp; ++i) {
        const int j = (r + tp - i) % tp;
        m_exchange->wait(j, out_window, at(j, k - 1), q_bytes, comm);
        m_exchange->release(j, out_window, comm);
      }
      if (k == sub - 1) pending.landed = m_backend.fence(Lane::comm);
    }
    put_to_peers(out_window, at(r, k), mine.data, q_bytes);
  }
  if (!communicating()) return;
  if (m_sp)
    m_lanes.ring_done(rec, *m_exchange,
                      record.handle); // the next GEMMs rewrite the pieces the puts read
  else
    ring_gather_pending(rec, pending, record.handle, out_window);
}

} // namespace ridgeline
