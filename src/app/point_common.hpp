// What every runner of a point shares: its results, its variants (overlap x attention), the
// check's plan, the memory a scheduled stage needs, the job's grid and backend set up for the
// point, the protocol run over a workload, and the summary attributes of checks and loops.
// point.hpp runs a point through tp_point.hpp or train_point.hpp; both build on this.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "app/job.hpp"
#include "app/point_spec.hpp"
#include "app/protocol.hpp"
#include "app/run_data.hpp"
#include "core/watchdog.hpp"
#include "models/backend.hpp"
#include "models/roofs.hpp"
#include "parallel/stage_reference.hpp"

namespace ridgeline {

struct TraceRunResult;

struct CheckOutcome {
  std::string status; ///< passed | failed | skipped: reason
  double max_rel_error = 0;
  double tolerance = 0;
};

/// Whether a point's check can run (a layout other than one rank), runs (--check on, or auto
/// when the reference fits: 2 GiB of host memory, a quarter of the smallest free GPU memory),
/// and what its one-rank reference model needs.
struct CheckPlan {
  bool possible = false;
  bool enabled = false;
  double ref_bytes = 0;  ///< device (or host backend) memory of the reference model
  double host_bytes = 0; ///< what the reference keeps in host memory for the comparison
};
CheckPlan plan_check(const PointSpec& spec, bool cuda, int64_t free_bytes);

/// One strategy's results: the summary (every rank; its attributes on rank 0) and this rank's
/// own timeline.
struct StrategyResult {
  std::string name;      ///< overlap, attention, or overlap+attention when both are lists
  std::string overlap;   ///< the overlap strategy
  std::string attention; ///< the attention implementation
  RunSummary summary;    ///< with check, loop, overlap, GPU and attribution attributes
  std::vector<TimelineRecord> rows; ///< this rank's timeline
  LoopTimes loops;
  CheckOutcome check;
  std::string output_checksum; ///< rank 0: FNV-1a 64 of the last stage's output (16 hex digits)
};

/// A point's results (every rank: the status, the summaries and its own rows and samples).
struct PointResult {
  std::string status = "ok"; ///< "ok" or "failed: <reason>"
  OpTable ops;
  std::vector<StrategyResult> strategies;
  std::vector<GpuSample> samples;           ///< this rank's NVML samples
  Attrs coords;                             ///< this rank's grid coordinates (for /topology)
  std::vector<std::string> attention_plans; ///< what cuDNN chose (Backend::attention_plans)
  bool check_failed = false;
  double setup_s = 0;   ///< building, checking and gathering, outside the iterations
  double measure_s = 0; ///< the protocol's loops
  /// A trace run's replay (PointSpec::serving), rank 0's; null otherwise.
  std::shared_ptr<const TraceRunResult> serving;

  bool ok() const { return status == "ok"; }
};

/// One way a point runs: an overlap strategy with an attention implementation.
struct Variant {
  std::string name;
  Overlap overlap;
  AttentionImpl attention = AttentionImpl::fused;
};
/// Every --overlap strategy with every --attention implementation, overlap-major. Named by the
/// overlap (one attention), the attention (one overlap) or "overlap+attention".
std::vector<Variant> point_variants(const PointSpec& spec);

/// Bytes one rank needs for a scheduled point's stage: weights and gradients of its layers and
/// the activations of every microbatch a stage may hold at once.
double scheduled_memory_bytes(const PointSpec& spec);
/// What a scheduled point's stage allocates beyond that for its strategies: with a symm:
/// strategy at tp > 1, the symmetric block of its shared collective buffers, and with ce-ring
/// the exchange's windows (TrainStage::overlap_memory_bytes).
double scheduled_overlap_bytes(const PointSpec& spec);
/// Whether any --overlap strategy of the point keeps its buffers in symmetric memory (symm:),
/// or puts through a peer exchange (ce-ring): what a stage must be built with.
bool any_symmetric_overlap(const PointSpec& spec);
bool any_ring_overlap(const PointSpec& spec);
/// The check's one-rank reference model of a scheduled point: the bytes it allocates (every
/// layer's weights and gradients, one microbatch's activations) and what it keeps in host
/// memory (every layer's gradients, each global microbatch's output and input gradient, fp32).
double scheduled_reference_bytes(const PointSpec& spec);
double scheduled_reference_host_bytes(const PointSpec& spec);

/// The point's process grid and communicators (collective; built once per job and shape), with
/// this rank's coordinates put in `result`.
GridComms& point_grid(JobContext& job, const PointSpec& spec, PointResult& result);
/// The NCCL options of the point's communicators.
NcclOptions point_nccl(const PointSpec& spec);
/// The job's backend in the point's dtype, with its GEMM algorithm choice set.
Backend& point_backend(JobContext& job, const PointSpec& spec);

/// Seconds from `t` to now.
double seconds_since(std::chrono::steady_clock::time_point t);
/// A strategy's summary attributes: its check (check, check_max_rel_error, check_tolerance)
/// and its loops (instrumented and uninstrumented step, the instrumentation's overhead).
Attrs check_attrs(const CheckOutcome& check);
Attrs loop_attrs(const LoopTimes& loops);

/// Every rank calls after building its stage (`failure`: this rank's reason, empty when it
/// could): false, with the point marked failed and the reason, when any rank could not.
bool all_built(JobContext& job, const std::string& failure, PointResult& result);

/// The peer exchange a point's stage puts through (ce-ring at tp > 1; stays null otherwise):
/// windows of `window_bytes` over the TP group, which every rank of it maps (the copy engines
/// between GPUs, MPI messages on the host). Collective; false, with result's status, where a
/// rank could not set it up (all_built).
bool ring_exchange(JobContext& job, const PointSpec& point, GridComms& comms,
                   const std::vector<size_t>& window_bytes, Watchdog& watchdog, PointResult& result,
                   std::unique_ptr<PeerExchange>& exchange);

/// The protocol over `workload` with the point's options; the loops' time and this rank's NVML
/// samples go into `result` (collective).
ProtocolResult measure_point(JobContext& job, const PointSpec& spec, Workload& workload,
                             Backend& backend, Watchdog& watchdog, PointResult& result);

/// The summary of one strategy's rows over the job's ranks (summarize_run), with, on a job
/// across nodes, each node's figures on rank 0 (summarize_nodes). Every rank calls.
RunSummary summarize_point(JobContext& job, const OpTable& ops,
                           const std::vector<TimelineRecord>& rows);

/// The overlap metrics of one strategy (serialized: the `none` strategy's time when it ran,
/// else compute-only + comm-only). exposed_comm_ns is max(0, step - compute-only), and 0 (as is
/// overlap_efficiency) for a step that runs no collective or p2p op.
Attrs overlap_attrs(const StrategyResult& r, double serialized_ns);
/// The job's /stack after `point` ran: the fingerprint taken now (so it names a library loaded
/// on first use, such as cuDNN) and the attention plans cuDNN chose (`cudnn_plans`).
Attrs point_stack(const JobContext& job, const PointResult& point);

} // namespace ridgeline
