// `ridgeline model --validate` and `--calibrate`: measured files read, the calibration they
// give, and each measured point beside its prediction (see model_detail.hpp).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <utility>

#include "app/config_mixed.hpp"
#include "app/model.hpp"
#include "app/model_detail.hpp"
#include "app/run_file.hpp"
#include "core/error.hpp"
#include "models/op_registry.hpp"

namespace ridgeline::model_detail {

// A measured file for --validate or --calibrate, checked as `ridgeline validate` checks it: a
// damaged file is refused with its first problem; an incomplete one (its job was stopped) is
// used for the points it holds, and said so.
RunData read_measured(const std::string& path) {
  const std::vector<std::string> problems = validate_run_file(path, true);
  if (!problems.empty())
    throw Error(path + ": " + problems.front() +
                (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) +
                                           " more: ridgeline validate " + path + ")"
                                     : std::string()));
  RunData data = read_run_file(path, false);
  data.points = read_points(path);
  if (const std::string note = incomplete_note(data); !note.empty())
    std::cerr << "ridgeline: note: " << path << ": " << note << "\n";
  return data;
}

double stamped_ops_kept(const std::vector<OpAggregate>& ops, double stamps, double gaps,
                        bool collectives_on_path, bool dp_on_path) {
  if (stamps <= gaps) return 1.0;
  double ops_ns = 0;
  for (const OpAggregate& a : ops) {
    const bool dp = a.name == op::dp_allreduce || a.name == op::dp_reducescatter;
    if (a.kind == "collective" ? collectives_on_path && (dp_on_path || !dp)
                               : a.kind != "p2p" && a.lane == "compute")
      ops_ns += a.per_step_p50_ns;
  }
  return ops_ns > stamps - gaps ? (ops_ns - (stamps - gaps)) / ops_ns : 1.0;
}

std::string calibration_phase(const RunConfig& cfg) {
  if (cfg.phase != "mixed" || trace_run(cfg)) return cfg.phase;
  const StepMix mix = mixed_step_of(cfg);
  return mix.prefill_tokens >= mix.decode_tokens ? "prefill" : "decode";
}

// The efficiency of each op kind in the measured ops of `path` (every point with a summary):
// the time its roofs allow, summed, over the time it took; launch-bound ops and collectives are
// left out. Keyed by the phase each point calibrates (calibration_phase). Not capped at 1: the
// roofs are rates measured under a sustained load (on a power-capped GPU, at its sustained clock),
// so ops that ran faster than them, at a higher clock, are a measurement too. And per phase the gap
// between two eager launches: each attributed eager point's launch class (the timed step less its
// ops and its exposed interconnect: the gaps, with the launch-bound ops' own time, which is taken
// out) less what the stamps added to the step (timed p50 - uninstrumented step), summed, over the
// launches of those steps. Replayed graphs are left out: their step is split by the roofs, not
// measured between ops.
Calibration calibrate(const std::vector<std::string>& paths, const ModelOptions& o,
                      const Machine& m, std::ostream& out) {
  std::map<std::string, std::map<std::string, std::pair<double, double>>> sums;
  struct GapSums {
    double stamped_ns = 0, plain_ns = 0, launches = 0;
    int points = 0;
  };
  std::map<std::string, GapSums> gaps;
  for (const std::string& path : paths) {
    RunData d = read_measured(path);
    std::vector<std::pair<Attrs, const RunSummary*>> points;
    if (has_run_layout(d.root) && d.points.empty()) points.emplace_back(d.config, &d.summary);
    for (const RunData::Point& p : d.points)
      if (p.has_summary) points.emplace_back(p.config, &p.summary);
    for (const auto& [config, summary] : points) {
      const RunConfig cfg = config_from_attrs(config);
      const std::string phase = calibration_phase(cfg);
      Placed pl = place(cfg, o, m, {});
      const Roofs roofs = roofs_for(m, o, false);
      // What the event stamps added to the timed step (timed p50 - uninstrumented step), and the
      // gaps between ops they left in it (the launch class less the launch-bound ops' time).
      const AttrValue* launch_class = find_attr(summary->attrs, "step_launch_ns");
      const AttrValue* plain = find_attr(summary->attrs, "uninstrumented_step_ns");
      double stamped = 0, stamps = 0;
      if (launch_class != nullptr) {
        stamped = std::get<double>(*launch_class);
        for (const OpAggregate& a : summary->ops)
          if (a.kind != "collective" && a.kind != "p2p" && a.ceiling == "launch")
            stamped -= a.per_step_p50_ns;
        stamped = std::max(0.0, stamped);
      }
      if (plain != nullptr) stamps = std::max(0.0, summary->step.p50 - std::get<double>(*plain));
      // Stamps beyond those gaps lengthened the ops themselves: each op's time is taken at the
      // share of the step's ops' time the uninstrumented step kept, so that an efficiency holds
      // for the step the model predicts (eager points with both figures).
      const double kept = !cfg.graphs && launch_class != nullptr && plain != nullptr
                              ? stamped_ops_kept(summary->ops, stamps, stamped,
                                                 cfg.overlap == "none", cfg.dp_overlap == "off")
                              : 1.0;
      for (const PredictOp& op : pl.ops) {
        if (op.comm_lane) continue;
        const OpPrediction p = predict_op(op, roofs, pl.options);
        if (p.ceiling == Ceiling::launch) continue;
        for (const OpAggregate& a : summary->ops)
          if (a.name == op.name && a.p50_ns > 0) {
            sums[phase][p.kind].first += std::max(p.compute_ns, p.hbm_ns);
            sums[phase][p.kind].second += a.p50_ns * kept;
          }
      }
      if (cfg.graphs || launch_class == nullptr) continue;
      GapSums& g = gaps[phase];
      g.stamped_ns += stamped;
      g.plain_ns += std::max(0.0, stamped - stamps);
      const double slots = static_cast<double>(cfg.microbatches + cfg.pp - 1);
      for (const PredictOp& op : pl.ops)
        g.launches += op.instances * op.work.kernels * (op.per_step ? 1.0 : slots);
      ++g.points;
    }
  }
  Calibration c;
  for (const auto& [phase, kinds] : sums)
    for (const auto& [kind, s] : kinds) {
      c.efficiency[phase][kind] = s.first / s.second;
      char line[160];
      std::snprintf(line, sizeof(line), "calibration: %-8s %-12s efficiency %.3f\n", phase.c_str(),
                    kind.c_str(), c.efficiency[phase][kind]);
      out << line;
    }
  for (const auto& [phase, g] : gaps) {
    if (g.launches <= 0) continue;
    c.gap_ns[phase] = g.plain_ns / g.launches;
    char line[300];
    std::snprintf(line, sizeof(line),
                  "calibration: %-8s gap between launches %.3f us (%.3f us in the timed, stamped "
                  "steps; %d eager point(s), %.0f launches)\n",
                  phase.c_str(), c.gap_ns[phase] / 1e3, g.stamped_ns / g.launches / 1e3, g.points,
                  g.launches);
    out << line;
  }
  return c;
}

/// The step a prediction is held to: the point's uninstrumented loop (no event stamps between
/// ops, the step the model predicts; the median of its sub-batches' per-iteration means, the
/// largest over the ranks). A file written before the loop was timed in sub-batches holds only
/// its mean (or the median of the rounds' means where strategies took turns): it is still taken,
/// and said so, as the stamps of the timed iterations lengthen a decode step far more (up to a
/// third at TP4 on 4 x H100) than one stall moves a mean; a file without the loop: the p50 of
/// the timed iterations.
MeasuredStep measured_step(const RunSummary& sum) {
  const AttrValue* plain = find_attr(sum.attrs, "uninstrumented_step_ns");
  if (plain != nullptr) {
    const double* ns = std::get_if<double>(plain);
    const bool sub_batches = find_attr(sum.attrs, "uninstrumented_sub_batches") != nullptr;
    if (ns != nullptr && *ns > 0)
      return {*ns, sub_batches ? kUninstrumentedP50 : kUninstrumentedMean};
  }
  const AttrValue* p50 = find_attr(sum.attrs, "p50_ns");
  return {p50 != nullptr ? std::get<double>(*p50) : sum.step.p50, "instrumented_p50"};
}

void print_validation_point(std::ostream& out, const std::string& label, double measured,
                            const StepPrediction& s, const RunSummary& summary) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "\n%s: step measured %.4f ms, predicted %.4f ms, error %+.1f %%\n", label.c_str(),
                measured / 1e6, s.step_ns / 1e6, 100.0 * (s.step_ns - measured) / measured);
  out << line;
  std::snprintf(line, sizeof(line), "  %-20s %12s %12s %8s  %-12s %s\n", "op", "measured us",
                "predicted us", "error", "ceiling", "efficiency");
  out << line;
  for (const OpPrediction& p : s.ops) {
    double m = -1;
    for (const OpAggregate& a : summary.ops)
      if (a.name == p.name) m = a.per_step_p50_ns;
    const double pred = p.time_ns * p.instances;
    // An op the file does not have (a file of another version's ops): no measured time.
    if (m < 0)
      std::snprintf(line, sizeof(line), "  %-20s %12s %12.2f %8s  %-12s %.3f\n", p.name.c_str(),
                    "absent", pred / 1e3, "-", ceiling_name(p.ceiling), p.efficiency);
    else
      std::snprintf(line, sizeof(line), "  %-20s %12.2f %12.2f %+7.1f%%  %-12s %.3f\n",
                    p.name.c_str(), m / 1e3, pred / 1e3, m > 0 ? 100.0 * (pred - m) / m : 0.0,
                    ceiling_name(p.ceiling), p.efficiency);
    out << line;
  }
  // Measured ops the model no longer predicts by that name (e.g. residual1 and norm2 of files
  // from before the fused residual1_norm2): their time is in the step, not in any op row.
  for (const OpAggregate& a : summary.ops) {
    bool predicted = false;
    for (const OpPrediction& p : s.ops)
      predicted = predicted || p.name == a.name;
    if (predicted || a.per_step_p50_ns <= 0) continue;
    std::snprintf(line, sizeof(line), "  %-20s %12.2f %12s %8s  (not an op of this version)\n",
                  a.name.c_str(), a.per_step_p50_ns / 1e3, "-", "-");
    out << line;
  }
}

} // namespace ridgeline::model_detail
