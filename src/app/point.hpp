// One point (configuration) of a job: validated and sized against memory, its stage built on
// the job's grid, measured by the protocol under each overlap strategy, checked against the
// TP=1 model, summarised and attributed against the roofs. `run` runs one point, `sweep` many:
// a scheduled point (train, prefill with --schedule) through train_point.hpp, the others
// through tp_point.hpp.
#pragma once

#include <string>
#include <vector>

#include "app/config.hpp"
#include "app/point_common.hpp"
#include "app/point_spec.hpp"

namespace ridgeline {

/// A configuration resolved for the job: every problem with it (empty when it can run), and
/// when there is none its typed point.
struct ResolvedPoint {
  std::vector<std::string> problems;
  PointSpec spec;

  bool ok() const { return problems.empty(); }
};

/// Applies the defaults of the job's backend to `cfg`, finds every problem with it for the
/// job's ranks, memory included (collective: every rank gets the same list), and resolves a
/// valid one into its PointSpec: the only place a point's options are parsed.
ResolvedPoint resolve_point(JobContext& job, RunConfig& cfg);

/// Runs one resolved point (collective). An allocation that fails on any rank makes the point
/// fail on every rank with the reason, instead of ending the job.
PointResult run_point(JobContext& job, const PointSpec& spec, const Roofs& roofs,
                      Watchdog& watchdog);

} // namespace ridgeline
