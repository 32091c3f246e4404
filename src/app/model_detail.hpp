// The parts of `ridgeline model` that its driver (model.cpp) and its validation and
// calibration (model_validation.cpp) share: the options, the machine, a configuration placed
// on it, and what measured files give.
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "app/config.hpp"
#include "app/run_data.hpp"
#include "app/sweep.hpp"
#include "models/predictor.hpp"
#include "models/serving.hpp"
#include "models/work_model.hpp"
#include "parallel/grid.hpp"

namespace ridgeline::model_detail {

/// The link presets a hardware description holds.
inline constexpr const char* kLinks[] = {"nvlink", "pcie-gen5", "ib-ndr"};
// The link preset of the roofs' own interconnect rows measured over the host path.
inline constexpr const char* kMeasuredHost = "measured-host";

/// --trace or --trace-gen: a serving trace through the continuous-batching scheduler, each of
/// its steps predicted.
struct ServingOptions {
  std::string trace, trace_gen;
  std::string write_trace; ///< where the trace's requests are written ("": nowhere)
  /// --rates: the generated trace predicted at each of these arrival rates (requests/s) in
  /// place of its own; empty: at its own.
  std::vector<double> rates;
  SchedulerConfig scheduler;
  double slo_ttft_ms = 0, slo_tpot_ms = 0; ///< goodput's targets (0: none)
  bool requested() const { return !trace.empty() || !trace_gen.empty() || !rates.empty(); }
};

struct ModelOptions {
  RunConfig base;
  std::string lists[std::size(kSweepAxes)];
  std::string hardware, link = "nvlink", inter_node = "ib-ndr", validate, gap = "auto";
  std::vector<std::string> calibrate;
  std::vector<double> link_gbps, link_alpha_us; ///< what-if links: every collective on each
  int nodes = 1, gpus_per_node = 8;
  /// --routing: how an MoE layer's tokens choose their experts, "uniform" or "zipf:S", drawn
  /// from --routing-seed.
  std::string routing = "uniform";
  uint64_t routing_seed = 1;
  ServingOptions serving;
};

// What a calibration's measured files give, per phase: each op kind's efficiency, and the gap
// between two eager launches that their uninstrumented steps left.
struct Calibration {
  std::map<std::string, std::map<std::string, double>> efficiency;
  std::map<std::string, double> gap_ns;
};

struct Machine {
  Roofs roofs;
  HardwareSpec hw; ///< links (and the description itself with --hardware)
  bool have_links = false;
};

struct Placed {
  PredictOptions options;
  std::vector<PredictOp> ops;
  std::string problem;
  std::string gap_source;    ///< where options.gap_ns comes from
  GridScopes scopes;         ///< where each group of the configuration sits
  double rank_imbalance = 0; ///< an MoE layer's busiest EP rank's rows over the mean (dense: 0)
};

/// An MoE layer's routing of `tokens` tokens (those of every rank of its EP group) by --routing.
Routing moe_routing(const ModelOptions& o, int64_t tokens, const ModelSpec& spec);
/// The exponent S of --routing zipf:S (S >= 0), or nothing where `routing` is not of that form.
std::optional<double> zipf_exponent(const std::string& routing);

/// The predictor's ops of `plan` (one layer's ops on one rank, `layers` instances of each).
std::vector<PredictOp> predict_ops(const std::vector<OpSpec>& plan, int tp, DType dtype,
                                   const GridScopes& scopes, int64_t layers);

/// The ops of one configuration and where its groups run; `what_if`, where given, carries every
/// collective instead of the roofs and presets.
Placed place(const RunConfig& cfg, const ModelOptions& o, const Machine& m, const Calibration& cal,
             const LinkPreset* what_if = nullptr);

/// The roofs the groups of a point see: measured interconnect rows stand only for the
/// transport and the scope they were measured on (--link measured-host: the host path's rows
/// alone; a --link preset other than nvlink replaces the rows within a node); a what-if link
/// replaces them all.
Roofs roofs_for(const Machine& m, const ModelOptions& o, bool what_if);

/// A measured file for --validate or --calibrate, checked as `ridgeline validate` checks it: a
/// damaged file is refused with its first problem (Error); an incomplete one (its job was
/// stopped) is used for the points it holds, and said so on stderr.
RunData read_measured(const std::string& path);

/// The share of its stamped ops' time that an eager point's uninstrumented step kept. The event
/// stamps lengthened the timed step by `stamps` (timed p50 - uninstrumented step), of which
/// `gaps` lay between ops; the rest lengthened the ops on the step's path, and each of those is
/// taken at this share of its stamped time. On the path: the compute lane's ops, and, where
/// `collectives_on_path` (overlap none: each collective runs between two compute ops), the
/// collectives too, whose stamps lengthened them as much; of those, the data-parallel
/// reductions only where `dp_on_path` (--dp-overlap off: they run after the backward, not
/// beside it). 1 where the stamps added nothing beyond the gaps.
double stamped_ops_kept(const std::vector<OpAggregate>& ops, double stamps, double gaps,
                        bool collectives_on_path, bool dp_on_path);

/// The phase whose predictions a measured point calibrates: its own, and for a mixed step the
/// phase holding most of its tokens (as a trace's steps are predicted), so that a decode-only
/// mixed step of ragged contexts calibrates the decode steps a trace runs. A trace run stays
/// "mixed" (its summary is no one step's).
std::string calibration_phase(const RunConfig& cfg);

/// What `paths` (measured files) give, per phase: each op kind's efficiency and the gap between
/// eager launches; each figure printed on `out`.
Calibration calibrate(const std::vector<std::string>& paths, const ModelOptions& o,
                      const Machine& m, std::ostream& out);

inline constexpr const char* kUninstrumentedP50 = "uninstrumented_p50";
inline constexpr const char* kUninstrumentedMean = "uninstrumented_mean";

/// The step a prediction is held to, and which measurement it is (kUninstrumentedP50,
/// kUninstrumentedMean or "instrumented_p50").
struct MeasuredStep {
  double ns = 0;
  std::string source;
};
MeasuredStep measured_step(const RunSummary& sum);

/// One measured point beside its prediction: the step and every op, measured and predicted.
void print_validation_point(std::ostream& out, const std::string& label, double measured,
                            const StepPrediction& s, const RunSummary& summary);

/// A serving trace predicted: its requests, the configuration they run on, the schedule and
/// each step's prediction.
struct TracePrediction {
  std::string source; ///< the trace file, or the generator's specification
  RunConfig cfg;
  std::vector<Request> requests;
  ServingSchedule schedule;
  /// Each scheduled step's prediction, in order: its time by ceiling and its ceiling.
  std::vector<StepSplit> steps;
  ServingMetrics metrics;
  /// --rates: the trace generated at each rate (trace_problems()) and its metrics
  /// (predict_trace_rates()), in the order given.
  struct AtRate {
    double rate_per_s = 0;
    std::vector<Request> requests;
    ServingMetrics metrics;
    int64_t steps = 0;
  };
  std::vector<AtRate> by_rate;
};

/// Every problem of a --trace or --trace-gen job (options that predict something else, the
/// scheduler's limits, the configuration, the trace itself); the requests and configuration
/// into `t` where there is none, with --rates the trace generated at each rate (the
/// generator's seed, so the same lengths and the gaps scaled) into t.by_rate.
std::vector<std::string> trace_problems(const ModelOptions& o, const Machine& m,
                                        TracePrediction& t);

/// `t`'s requests scheduled, each step predicted from its ops (mixed_step_ops) and the metrics.
void predict_trace(TracePrediction& t, const ModelOptions& o, const Machine& m,
                   const Calibration& cal);
/// --rates: each of t.by_rate's traces predicted as predict_trace() does, its metrics and
/// step count into its row; `t` keeps the last rate's requests, schedule and steps.
void predict_trace_rates(TracePrediction& t, const ModelOptions& o, const Machine& m,
                         const Calibration& cal);

/// --validate of a trace run's file (`run --trace`): each measured step beside the prediction
/// of its mix (the steps made again from the file's requests and step times), and the file's
/// requests scheduled on predicted steps: the latency percentiles beside the measured ones.
/// Returns the console text and puts a row per figure (measured, predicted, error) in `table`.
/// Throws Error where the file's steps are not its scheduler's, or its configuration cannot be
/// placed on the machine.
std::string validate_trace(const std::string& path, const RunConfig& measured,
                           const ModelOptions& o, const Machine& m, const Calibration& cal,
                           Table& table);

/// Binds --trace, --trace-gen and the scheduler's and goodput's options to `s`.
void bind_serving_options(CLI::App& cmd, ServingOptions& s);
/// Binds `model`'s own options (machine, links, what-ifs, calibration, validation, EP) to `o`.
void bind_model_options(CLI::App& cmd, ModelOptions& o);

/// --write-trace: the trace's requests written in its file name's format and said so on `out`
/// (rank 0 calls it, after the report: a file that cannot be written throws Error).
void write_trace_file(const TracePrediction& t, const ModelOptions& o, std::ostream& out);

/// The console report of a predicted trace, with `calibration`'s lines (--calibrate's figures).
void print_trace(std::ostream& out, const TracePrediction& t, const ModelOptions& o,
                 const std::string& calibration);

/// What --json and --markdown hold of a predicted trace: the latency percentiles, every request
/// and every step; with --rates, one row per rate (percentiles, goodput, throughput) instead.
std::vector<std::pair<std::string, Table>> trace_tables(const TracePrediction& t);

} // namespace ridgeline::model_detail
