// The device and MPI side of the collective benchmark: one nccl-tests-style sweep of a collective
// on one communicator (timed, checked exactly, fitted). `ridgeline collectives` and `roofs` run it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "collectives/collective_bench.hpp"
#include "collectives/communicator.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/stats.hpp"
#include "core/timeline.hpp"
#include "core/watchdog.hpp"

namespace ridgeline {

/// Samples per size under SweepOptions::graph or ::batch: each times one batch of `iters` calls
/// (one replay of the captured graph, or `iters` eager launches back to back) over `iters`.
inline constexpr int kTimedBatches = 10;

/// Owns the communicator of one group of ranks: MPI_Comm_split(world, color, key), so every rank
/// of `world` constructs one.
class GroupComm {
public:
  GroupComm(MPI_Comm world, int color, int key);
  ~GroupComm();
  GroupComm(const GroupComm&) = delete;
  GroupComm& operator=(const GroupComm&) = delete;
  MPI_Comm get() const { return m_comm; }

private:
  MPI_Comm m_comm = MPI_COMM_NULL;
};

/// What one sweep does: the sizes, the arguments of every call, and how the calls are timed.
struct SweepOptions {
  std::vector<size_t> sizes;   ///< requested sizes in bytes (nccl-tests "size"), ascending
  DType dtype = DType::f32;    ///< element type of the buffers
  ReduceOp op = ReduceOp::sum; ///< of the reducing collectives
  int root = 0;                ///< group rank of broadcast's and reduce's root
  bool in_place = false;       ///< in place where the collective has an in-place form
  int warmup = 5;              ///< untimed calls per size
  int iters = 20;              ///< timed calls per size; with `graph` or `batch`, calls per batch
  bool graph = false;          ///< time kTimedBatches replays of a CUDA graph of `iters` calls
  /// Time kTimedBatches batches of `iters` back-to-back eager launches, stamps only around each
  /// batch (nccl-tests without -G): the host's launch cost is hidden wherever the device is the
  /// slower of the two, as in a real launch stream. Without it (and without `graph`) every call
  /// is stamped alone.
  bool batch = false;
  double timeout_s = 300; ///< seconds one wait for NCCL work may take before it throws
  /// When set, issues each call instead of the communicator (the custom all-reduce of
  /// `collectives --allreduce`); `name` then names the implementation swept.
  std::function<void(const CallBuffers&, const CollectiveShape&, Stream)> issue;
  std::string name; ///< of the result and its messages ("": the collective's name)
};

/// One measured size of one collective (group 0's view, plus the max over all groups).
struct SizeRow {
  CollectiveShape shape;
  SeriesStats time_ns;         ///< of the per-sample max over group 0's ranks
  double time_mean_all_ns = 0; ///< mean of the per-sample max over every rank of every group
  std::vector<double> samples_ns;
  int64_t wrong = 0; ///< summed over every rank
  int64_t iters = 0; ///< timed collective calls the statistics cover
};

/// The sweep of one collective.
struct CollectiveResult {
  const CollectiveSpec* spec = nullptr;
  std::string name;      ///< the spec's name, or SweepOptions::name
  bool in_place = false; ///< whether it ran in place (false where there is no in-place form)
  std::vector<SizeRow> rows;
  /// Whether the roofs below exist: two sizes or more, bytes between ranks, every
  /// time_ns.min > 0.
  bool fitted = false;
  RoofFit fit; ///< least squares on the medians (time_ns.p50)
  /// The lower envelope of the minimum times (envelope_fit()): us and GB/s.
  double floor_alpha_us = 0, floor_beta_gbps = 0;
};

/// The buffers of the sweeps on one communicator: two device buffers of the largest size and
/// host staging of as many bytes, allocated once and reused by every collective swept.
class CollectiveBench {
public:
  /// Allocates the buffers on `device` for sizes up to `max_bytes`. `comm` runs over `group`, one
  /// of the groups of consecutive ranks of `world` (all of it when there is one group).
  CollectiveBench(Device& device, Communicator& comm, MPI_Comm group, MPI_Comm world,
                  size_t max_bytes);
  /// The same over two buffers of at least `max_bytes` the caller placed (symmetric memory).
  CollectiveBench(Device& device, Communicator& comm, MPI_Comm group, MPI_Comm world,
                  size_t max_bytes, Buffer a, Buffer b);

  /// Sweeps `spec` over opts.sizes (sizes that round to nothing or to the previous size are
  /// skipped): per size a barrier over `world`, the warm-up, a barrier, the timed calls (or graph
  /// replays), then one checked call on fresh inputs. Each sample is the max over the group,
  /// #wrong the sum over `world`. Every rank of `world` calls with the same arguments. Rearms
  /// `watchdog` per size; throws Error if a size does not fit the buffers. `on_size`, when given,
  /// is called on every rank after each size with the result so far (its rows, no fit yet).
  CollectiveResult sweep(const CollectiveSpec& spec, const SweepOptions& opts, Watchdog& watchdog,
                         const std::function<void(const CollectiveResult&)>& on_size = {});

private:
  void wait_all(Stream stream, const SweepOptions& opts);
  /// One call: SweepOptions::issue when set, else the communicator's collective.
  void issue(const CollectiveSpec& spec, const CallBuffers& buf, const CollectiveShape& shape,
             const SweepOptions& opts, Stream stream);
  std::vector<double> time_size(const CollectiveSpec& spec, const CallBuffers& buf,
                                const CollectiveShape& shape, const SweepOptions& opts);
  int64_t check_size(const CollectiveSpec& spec, const CallBuffers& buf,
                     const CollectiveShape& shape, const SweepOptions& opts);

  Device& m_device;
  Communicator& m_comm;
  MPI_Comm m_group;
  MPI_Comm m_world;
  bool m_stream_ordered; ///< NCCL: completion follows the stream, waits are bounded
  Lane m_lane;           ///< comm on NCCL; compute on the host, whose null stream makes MPI block
  Buffer m_a;
  Buffer m_b;
  std::vector<unsigned char> m_staging;
};

} // namespace ridgeline
