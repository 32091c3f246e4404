// A scheduled pipeline point: the train phase (forward and backward, data-parallel gradients)
// and prefill under --schedule, run by the stage executor through the program a pipeline
// schedule emits, with non-blocking transfers and a flush every iteration. The gradients (and
// the outputs of a forward-only pipeline) are checked against one rank computing the model.
#pragma once

#include "app/point.hpp"

namespace ridgeline {

/// Whether `cfg` runs through the scheduled executor (train, or prefill with --schedule).
bool scheduled_point(const RunConfig& cfg);

/// Bytes one rank needs for a scheduled point: weights and gradients of its layers, the
/// activations of every microbatch a stage may hold at once, and with `check` the one-rank
/// reference model (every layer, one microbatch's activations).
double scheduled_memory_bytes(const RunConfig& cfg, bool check);

/// run_point() for a scheduled point (collective).
PointResult run_scheduled_point(JobContext& job, const RunConfig& cfg, const Roofs& roofs,
                                Watchdog& watchdog);

} // namespace ridgeline
