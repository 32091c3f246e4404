// The train stage's copy-engine ring (--overlap ce-ring and ce-ring:K): a site's collective as
// puts into the peers' exchange windows, one piece of the microbatch's rows per TP rank, beside
// the GEMMs of the other pieces (see train_stage.hpp). The forward's and the backward's sites
// run the same two functions: a row-parallel GEMM's partial sums reduced (the forward's
// projection and FC2, the backward's input gradients of FC1 and QKV), and under sequence
// parallelism a column-parallel GEMM's rows gathered (the forward's norms, the backward's output
// gradients).
#include <string>

#include "core/error.hpp"
#include "core/ranges.hpp"
#include "parallel/layer_op_index.hpp"
#include "parallel/train_stage_detail.hpp"

namespace ridgeline {
using namespace layer_op;

namespace {
// The exchange's windows: the peers' partial pieces, and the gathered rows.
constexpr size_t kReduceWindow = 0;
constexpr size_t kGatherWindow = 1;
} // namespace

std::vector<size_t> TrainStage::exchange_windows(const TrainSpec& spec, DType dtype) {
  if (spec.shape.tp == 1) return {};
  const LayerGeometry g = layer_geometry(spec.model, spec.shape, spec.tp_rank);
  const size_t full =
      static_cast<size_t>(g.tokens) * static_cast<size_t>(g.hidden) * dtype_size(dtype);
  return {full, full};
}

void TrainStage::ring_begin(Recorder& rec, int op, int64_t layer, RingRecord& record) {
  m_lanes.ring_put(rec, m_op_index.id(op), layer, m_op_index.spec(op).cost, record);
}

void TrainStage::ring_end(Recorder& rec, const RingRecord& record) {
  m_lanes.ring_done(rec, *m_exchange, record.handle);
}

void TrainStage::ring_row_gemm(Recorder& rec, int gemm_op, int reduce_op, int64_t layer,
                               const Tensor& full, const Tensor& rows, const RowGemm& gemm) {
  const int tp = m_spec.shape.tp, r = m_spec.tp_rank, sub = m_policy.ring_subpieces;
  const int64_t n = full.rows / tp, q = n / sub;
  const Tensor own = full.rows_slice(r * n, n);
  const Tensor sum = m_geo.sequence_parallel ? rows : own;
  const size_t bytes = own.bytes(), q_bytes = bytes / static_cast<size_t>(sub);
  const Tensor landed = full_view(m_exchange->window(kReduceWindow));
  const Stream compute = m_backend.stream(Lane::compute), comm = m_backend.stream(Lane::comm);
  const std::string& name = m_op_index.spec(reduce_op).name;
  const double share = 1.0 / (tp * sub);
  auto at = [&](int rank, int k) {
    return static_cast<size_t>(rank) * bytes + static_cast<size_t>(k) * q_bytes;
  };
  RingRecord record;
  // The peers' pieces first, sub-piece by sub-piece, each put to its owner while the next
  // computes. A sender's next put into a window waits for the receiver's release of the one
  // before, so every peer's sub-piece is released on the comm lane as soon as it lands (it sits
  // at its own offset); the last only once consumed, below.
  for (int k = 0; k < sub; ++k) {
    for (int i = 1; i < tp; ++i) {
      const int d = (r + i) % tp;
      {
        const ScopedOp scope = m_op_index.scope(rec, gemm_op, layer, share);
        gemm(d * n + k * q, q);
      }
      const ranges::Scope range(name);
      ring_begin(rec, reduce_op, layer, record);
      m_exchange->put(d, kReduceWindow, at(r, k), full.rows_slice(d * n + k * q, q).data, q_bytes,
                      comm);
    }
    const ranges::Scope range(name);
    for (int i = 1; i < tp; ++i) {
      const int j = (r + tp - i) % tp;
      m_exchange->wait(j, kReduceWindow, at(j, k), q_bytes, comm);
      if (k < sub - 1) m_exchange->release(j, kReduceWindow, comm);
    }
  }
  // This rank's own piece beside the last puts, then the peers' partial pieces added onto it.
  for (int k = 0; k < sub; ++k) {
    const ScopedOp scope = m_op_index.scope(rec, gemm_op, layer, share);
    gemm(r * n + k * q, q);
  }
  m_backend.wait_fence(Lane::compute, m_backend.fence(Lane::comm));
  {
    const ranges::Scope range(name);
    const ScopedOp scope = m_op_index.ring_scope(rec, reduce_op, layer);
    const Tensor* addend = &own;
    for (int i = 1; i < tp; ++i) {
      const int j = (r + i) % tp;
      m_backend.add(*addend, landed.rows_slice(j * n, n), sum);
      addend = &sum;
    }
  }
  for (int j = 0; j < tp; ++j)
    if (j != r) m_exchange->release(j, kReduceWindow, compute);
  if (!m_geo.sequence_parallel) {
    // The all-gather half: the summed piece into every peer, theirs into `full` as they land.
    const Tensor gathered = full_view(m_exchange->window(kGatherWindow));
    {
      const ranges::Scope range(name);
      ring_begin(rec, reduce_op, layer, record);
      m_exchange->put_to_peers(kGatherWindow, static_cast<size_t>(r) * bytes, own.data, bytes,
                               comm);
      for (int i = 1; i < tp; ++i) {
        const int j = (r + tp - i) % tp;
        m_exchange->wait(j, kGatherWindow, static_cast<size_t>(j) * bytes, bytes, compute);
      }
    }
    // The rows the copies overwrite are those the partial puts read.
    ring_end(rec, record);
    const ranges::Scope range(name);
    {
      const ScopedOp scope = m_op_index.ring_scope(rec, reduce_op, layer);
      for (int j = 0; j < tp; ++j)
        if (j != r) m_backend.copy(gathered.rows_slice(j * n, n), full.rows_slice(j * n, n));
    }
    for (int j = 0; j < tp; ++j)
      if (j != r) m_exchange->release(j, kGatherWindow, compute);
    return;
  }
  // The next GEMMs rewrite the pieces the puts read.
  ring_end(rec, record);
}

void TrainStage::ring_column_gemm(Recorder& rec, int gather_op, int gemm_op, int64_t layer,
                                  const Tensor& rows, const Tensor& full, const Tensor& out,
                                  const ColumnGemm& gemm) {
  const int tp = m_spec.shape.tp, r = m_spec.tp_rank;
  const int64_t n = rows.rows;
  RIDGELINE_REQUIRE(n * tp == full.rows, "ce-ring gathers one piece of rows per TP rank");
  const size_t bytes = rows.bytes();
  const Tensor gathered = full_view(m_exchange->window(kGatherWindow));
  const Stream compute = m_backend.stream(Lane::compute), comm = m_backend.stream(Lane::comm);
  const std::string& name = m_op_index.spec(gather_op).name;
  const double share = 1.0 / tp;
  RingRecord record;
  {
    // This rank's rows into every peer, beside the GEMM on them.
    const ranges::Scope range(name);
    ring_begin(rec, gather_op, layer, record);
    m_exchange->put_to_peers(kGatherWindow, static_cast<size_t>(r) * bytes, rows.data, bytes, comm);
    const ScopedOp scope = m_op_index.ring_scope(rec, gather_op, layer);
    m_backend.copy(rows, full.rows_slice(r * n, n));
  }
  {
    const ScopedOp scope = m_op_index.scope(rec, gemm_op, layer, share);
    gemm(full.rows_slice(r * n, n), out.rows_slice(r * n, n));
  }
  // Each peer's rows as they land, nearest peer first.
  for (int i = 1; i < tp; ++i) {
    const int j = (r + tp - i) % tp;
    {
      const ranges::Scope range(name);
      m_exchange->wait(j, kGatherWindow, static_cast<size_t>(j) * bytes, bytes, compute);
      const ScopedOp scope = m_op_index.ring_scope(rec, gather_op, layer);
      m_backend.copy(gathered.rows_slice(j * n, n), full.rows_slice(j * n, n));
    }
    m_exchange->release(j, kGatherWindow, compute);
    const ScopedOp scope = m_op_index.scope(rec, gemm_op, layer, share);
    gemm(full.rows_slice(j * n, n), out.rows_slice(j * n, n));
  }
  // What the puts read is rewritten by the next norm.
  ring_end(rec, record);
}

} // namespace ridgeline
