// What an overlap strategy makes of a layer's collective + GEMM sites (an all-gather before a
// column-parallel GEMM, or the reduction after a row-parallel one): the parts the microbatch is
// cut into, the units each part's sites pipeline, the lane the collectives run on and the
// fences that join it to the compute, and where the collectives' buffers live. Each strategy's
// maker and its problems live in a file of their own (overlap_<strategy>.cpp), reached through
// its registry row (overlap.cpp); both executors (TpStage, TrainStage) run the sites below.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "core/ranges.hpp"
#include "core/timeline.hpp"
#include "models/backend.hpp"
#include "models/model_spec.hpp"
#include "parallel/overlap.hpp"

namespace ridgeline {

/// A strategy as the executors run it. The default is `none`.
struct OverlapPolicy {
  Overlap overlap;
  /// Parts of the microbatch whose layers interleave phase by phase, so that one part's
  /// collective runs under another part's compute (split:N).
  int parts = 1;
  /// Units of each part that a site pipelines: unit u's collective beside unit u + 1's GEMM
  /// (chunked:K).
  int chunks = 1;
  /// Where the collectives are issued: the compute lane (serialized; on the host a blocking MPI
  /// call), or the comm lane behind a fence on the compute that produced their input, the
  /// compute waiting on a fence after them.
  Lane queue = Lane::compute;
  /// The collectives' buffers in the communicator's symmetric memory (symm:).
  bool symmetric = false;
  /// The collectives as puts through a PeerExchange (ce-ring), with each row-parallel piece in
  /// ring_subpieces sub-pieces.
  bool ring = false;
  int ring_subpieces = 1;

  /// Row blocks of a microbatch the sites work on: chunks of every part.
  int units() const { return parts * chunks; }
  /// Unit u of t's rows (of units() equal blocks), in either executor's [tokens, ...] or
  /// [stream tokens, ...] buffers.
  Tensor unit(const Tensor& t, int u) const {
    const int64_t n = t.rows / units();
    return t.rows_slice(u * n, n);
  }
  /// Part p of t's rows (of `parts` equal blocks).
  Tensor part(const Tensor& t, int p) const {
    const int64_t n = t.rows / parts;
    return t.rows_slice(p * n, n);
  }
};

/// The policy of `overlap`: its registry row's maker.
OverlapPolicy overlap_policy(const Overlap& overlap);

/// The problems that keep `executor` from running `overlap` on `shape` (empty = fine): the
/// executor runs it at all, the batch or the tokens divide into its parts, units and pieces.
std::vector<std::string> policy_problems(const Overlap& overlap, const LayerShape& shape,
                                         StageExecutor executor);

/// A row-parallel site of part `part`, unit by unit: unit u's GEMM, then its reduction issued
/// (on the policy's lane), so that unit u's reduction runs beside unit u + 1's GEMM.
/// gemm(unit, beside_comm) says whether a collective is in flight beside that GEMM.
template <class Gemm, class Reduce>
void row_site(const OverlapPolicy& p, int part, Gemm&& gemm, Reduce&& reduce) {
  const int k = p.chunks, first = part * k;
  for (int u = first; u < first + k; ++u) {
    gemm(u, p.parts > 1 || u > first);
    reduce(u);
  }
}

/// A column-parallel site of part `part` under sequence parallelism: the first unit's
/// all-gather, then per unit a wait for what was gathered so far, the next unit's all-gather
/// issued, and the unit's GEMM beside it.
template <class Gather, class Wait, class Gemm>
void column_site(const OverlapPolicy& p, int part, Gather&& gather, Wait&& wait, Gemm&& gemm) {
  const int k = p.chunks, first = part * k;
  gather(first);
  for (int u = first; u < first + k; ++u) {
    wait();
    if (u + 1 < first + k) gather(u + 1);
    gemm(u, p.parts > 1 || u + 1 < first + k);
  }
}

/// One collective of a site as both executors issue it: on `queue` (on its own lane it first
/// waits for the compute that produced its input), in a range named `name`, recorded as `op_id`
/// of `layer` with `cost`. issue(stream) launches it. Stream-ordered (NCCL) or blocking (MPI on a
/// null stream), it ends where the next stamp lands; a non-blocking MPI request's handle goes to
/// `open`, for the executor's wait to end it once complete. The range covers the issue only: a
/// non-blocking collective's end is recorded where the compute it overlaps has run.
template <class Issue>
void issue_collective(Backend& backend, const Communicator& comm, Recorder& rec, Lane queue,
                      int32_t op_id, int32_t layer, const OpCost& cost, const std::string& name,
                      std::vector<size_t>& open, Issue&& issue) {
  if (queue == Lane::comm) backend.wait_fence(Lane::comm, backend.fence(Lane::compute));
  const ranges::Scope range(name);
  const size_t handle = rec.begin(op_id, layer, Lane::comm, cost, queue);
  const Stream stream = backend.stream(queue);
  issue(stream);
  if (comm.stream_ordered() || stream == nullptr)
    rec.end(handle);
  else
    open.push_back(handle);
}

/// symm:'s block: every buffer of `sizes` bytes at a 4 KiB boundary, in order (the same sizes
/// in the same order on every rank give the same offsets, what NCCL_WIN_COLL_SYMMETRIC asks).
size_t symmetric_aligned(size_t bytes);
size_t symmetric_block_bytes(const std::vector<size_t>& sizes);
/// The collectives' buffers of a stage placed in `comm`'s symmetric memory (collective over the
/// group): `buffers` holds one pointer per size, or stays empty where the communicator has
/// none, and `path` says which (SymmetricMemory::describe(), or "none: " and why).
struct SymmetricBuffers {
  std::unique_ptr<SymmetricMemory> memory;
  std::vector<void*> buffers;
  std::string path;
};
SymmetricBuffers place_symmetric(Communicator& comm, const std::vector<size_t>& sizes);

} // namespace ridgeline
