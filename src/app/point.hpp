// One point (configuration) of a job: validated and sized against memory, its stage built on
// the job's grid, measured by the protocol under each overlap strategy, checked against the
// TP=1 model, summarised and attributed against the roofs. `run` runs one point, `sweep` many.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "app/job.hpp"
#include "app/protocol.hpp"
#include "app/run_data.hpp"
#include "core/watchdog.hpp"
#include "models/backend.hpp"
#include "models/roofs.hpp"

namespace ridgeline {

/// The profiler range around the TP=1 reference computation (its ops' ranges nest in it).
inline constexpr const char* kReferenceRange = "check: TP=1 reference";

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
CheckPlan plan_check(const RunConfig& cfg, bool cuda, int64_t free_bytes);

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

  bool ok() const { return status == "ok"; }
};

/// One way a point runs: an overlap strategy with an attention implementation.
struct Variant {
  std::string name;
  std::string overlap;
  AttentionImpl attention = AttentionImpl::fused;
};
/// Every --overlap strategy with every --attention implementation, overlap-major. Named by the
/// overlap (one attention), the attention (one overlap) or "overlap+attention".
std::vector<Variant> point_variants(const RunConfig& cfg);

/// What a point's stage allocates for its overlap strategies beyond its stage estimate: ce-ring's
/// exchange windows, the symm: strategies' symmetric block (TpStage::overlap_memory_bytes());
/// part of the memory check of resolve_point().
double overlap_memory_bytes(const RunConfig& cfg);
/// Applies the defaults of the job's backend to `cfg` and returns every problem with it for
/// `world_size` ranks, memory included (collective: every rank gets the same list).
std::vector<std::string> resolve_point(JobContext& job, RunConfig& cfg);

/// The point's process grid and communicators (collective; built once per job and shape), with
/// this rank's coordinates put in `result`.
GridComms& point_grid(JobContext& job, const RunConfig& cfg, PointResult& result);
/// The job's backend in the point's dtype, with its GEMM algorithm choice set.
Backend& point_backend(JobContext& job, const RunConfig& cfg);

/// Seconds from `t` to now.
double seconds_since(std::chrono::steady_clock::time_point t);
/// A strategy's summary attributes: its check (check, check_max_rel_error, check_tolerance)
/// and its loops (instrumented and uninstrumented step, the instrumentation's overhead).
Attrs check_attrs(const CheckOutcome& check);
Attrs loop_attrs(const LoopTimes& loops);

/// Every rank calls after building its stage (`failure`: this rank's reason, empty when it
/// could): false, with the point marked failed and the reason, when any rank could not.
bool all_built(JobContext& job, const std::string& failure, PointResult& result);

/// The protocol over `workload` with the point's options; the loops' time and this rank's NVML
/// samples go into `result` (collective).
ProtocolResult measure_point(JobContext& job, const RunConfig& cfg, Workload& workload,
                             Backend& backend, Watchdog& watchdog, PointResult& result);

/// Runs one resolved, valid point (collective). An allocation that fails on any rank makes the
/// point fail on every rank with the reason, instead of ending the job.
PointResult run_point(JobContext& job, const RunConfig& cfg, const Roofs& roofs,
                      Watchdog& watchdog);

/// The job's /stack after `point` ran: the fingerprint taken now (so it names a library loaded
/// on first use, such as cuDNN) and the attention plans cuDNN chose (`cudnn_plans`).
Attrs point_stack(const JobContext& job, const PointResult& point);
/// The overlap metrics of one strategy (serialized: the `none` strategy's time when it ran,
/// else compute-only + comm-only). exposed_comm_ns is max(0, step - compute-only), and 0 (as is
/// overlap_efficiency) for a step that runs no collective or p2p op.
Attrs overlap_attrs(const StrategyResult& r, double serialized_ns);

} // namespace ridgeline
