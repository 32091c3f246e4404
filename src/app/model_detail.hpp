// The parts of `ridgeline model` that its driver (model.cpp) and its validation and
// calibration (model_validation.cpp) share: the options, the machine, a configuration placed
// on it, and what measured files give.
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "app/run_data.hpp"
#include "app/sweep.hpp"
#include "models/predictor.hpp"

namespace ridgeline::model_detail {

// The link preset of the roofs' own interconnect rows measured over the host path.
inline constexpr const char* kMeasuredHost = "measured-host";

struct ModelOptions {
  RunConfig base;
  std::string lists[std::size(kSweepAxes)];
  std::string hardware, link = "nvlink", inter_node = "ib-ndr", validate, gap = "auto";
  std::vector<std::string> calibrate;
  std::vector<double> link_gbps, link_alpha_us; ///< what-if links: every collective on each
  int nodes = 1, gpus_per_node = 8;
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
  std::string gap_source; ///< where options.gap_ns comes from
};

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

} // namespace ridgeline::model_detail
