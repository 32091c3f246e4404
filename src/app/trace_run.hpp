// A trace run (`run --phase mixed --trace FILE` or `--trace-gen SPEC`): the trace's requests
// through the continuous-batching scheduler (models/serving.hpp) with every step a real mixed
// step of the point's stage, timed; then the requests' latencies, and /serving in the file.
#pragma once

#include <mpi.h>

#include <ostream>
#include <string>
#include <vector>

#include "app/attribution.hpp"
#include "app/config_mixed.hpp"
#include "app/run_data.hpp"
#include "core/watchdog.hpp"
#include "models/backend.hpp"
#include "models/serving.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {

/// A trace run's steps held against the TP=1 model (check_replay()).
struct ReplayCheck {
  std::string status; ///< passed | failed | skipped: reason
  int64_t steps = 0;  ///< steps compared
  double max_rel_error = 0;
  double tolerance = 0;
  /// Per measured step, on the rank holding the reference: its output's relative L2 error
  /// (NaN elsewhere, and where the steps were not checked).
  std::vector<double> step_error;
};

/// What a trace run measured: the schedule its steps' times made (every step's mix, its start
/// and end on the scheduler's clock; every request's times), each step's time and the host's
/// preparation before it, and the requests' metrics.
struct TraceRunResult {
  ServingSchedule schedule;
  std::vector<double> step_ns;    ///< per step: the slowest rank's forward to device completion
  std::vector<double> prepare_ns; ///< per step: the slowest rank's set_mix() and input fill
  /// Per step: its time split by ceiling in the proportions of its ops' bounds under the roofs
  /// (split_step_by_bounds(); all zero and Ceiling::none without roofs).
  std::vector<StepSplit> split;
  ServingMetrics metrics;
  ReplayCheck check;
};

/// Replays `plan` on `stage` (built at the plan's capacity mix, serving_capacity_mix(), its op
/// ids interned into `ops`), recording no op: every rank runs the same scheduler, each step's
/// cost the slowest rank's time of the step (agreed with one all-reduce over `world` a step), so
/// that every rank decides the same next step; a step whose mix differs between ranks throws
/// Error. Each measured step is split by ceiling under `roofs` (empty: not split) as
/// `attribution` (the stage's layers, grid and transport) prices its ops. Collective over
/// `world`.
TraceRunResult replay_trace(const ServingPlan& plan, TpStage& stage, OpTable& ops, Backend& backend,
                            MPI_Comm world, Watchdog& watchdog, const AttributionInput& attribution,
                            const Roofs& roofs);

/// The check of a trace run: the measured schedule's steps run again in order, untimed, on
/// `stage` from the KV cache it was built with (TpStage::reset_cache()), each step's output
/// held against `reference`'s (the TP=1 stage of every layer built at the same capacity mix
/// with its own op table `reference_ops`, on the one rank that holds it, else null) running
/// the same steps from its own built cache. A step's decode tokens read the cache rows the
/// earlier steps appended, so every step runs on both. The largest relative L2 error over the
/// steps on every rank; `tolerance` decides passed or failed. Collective over `world`.
ReplayCheck check_replay(const ServingSchedule& schedule, TpStage& stage, OpTable& ops,
                         TpStage* reference, OpTable& reference_ops, Backend& backend,
                         MPI_Comm world, Watchdog& watchdog, double tolerance);

/// /serving's attributes (docs/SCHEMA.md).
Attrs serving_attrs(const ServingPlan& plan, const TraceRunResult& run);
/// /serving/steps: a row per step.
Table serving_steps_table(const TraceRunResult& run);
/// /serving/requests: a row per request.
Table serving_requests_table(const ServingPlan& plan, const TraceRunResult& run);

/// The console report: the requests' latency percentiles, goodput and the steps' mixes and
/// times.
void print_serving(std::ostream& out, const ServingPlan& plan, const TraceRunResult& run);

/// A trace run's measured file read back: its requests and scheduler, each step's mix and time,
/// and its metrics (the /serving attributes). The steps' entries are not stored: the scheduler
/// given the steps' times in order makes them again (measured_schedule()). Throws Error where
/// the file has no /serving or a column is missing.
struct MeasuredTrace {
  std::string source;
  std::vector<Request> requests;
  SchedulerConfig scheduler;
  double slo_ttft_s = 0, slo_tpot_s = 0;
  std::vector<MixSummary> steps; ///< each step's mix as stored (its entries are not)
  std::vector<double> step_ns;
  ServingMetrics metrics;
};
bool has_serving(const std::string& path);
MeasuredTrace read_serving(const std::string& path);
/// The schedule the measured steps' times make of the measured requests: the measured one, every
/// step's entries included. Throws Error where it differs from the file's steps (their count or
/// a step's mix).
ServingSchedule measured_schedule(const MeasuredTrace& t);

} // namespace ridgeline
