// One point (configuration) of a job: validated and sized against memory, its stage built on
// the job's grid, measured by the protocol under each overlap strategy, checked against the
// TP=1 model, summarised and attributed against the roofs. `run` runs one point, `sweep` many:
// a scheduled point (train, prefill with --schedule) through train_point.hpp, the others
// through tp_point.hpp.
#pragma once

#include <string>
#include <vector>

#include "app/point_common.hpp"

namespace ridgeline {

/// Applies the defaults of the job's backend to `cfg` and returns every problem with it for
/// `world_size` ranks, memory included (collective: every rank gets the same list).
std::vector<std::string> resolve_point(JobContext& job, RunConfig& cfg);

/// Runs one resolved, valid point (collective). An allocation that fails on any rank makes the
/// point fail on every rank with the reason, instead of ending the job.
PointResult run_point(JobContext& job, const RunConfig& cfg, const Roofs& roofs,
                      Watchdog& watchdog);

} // namespace ridgeline
