// A scheduled pipeline point: the train phase (forward and backward, data-parallel gradients)
// and prefill under --schedule, run by the stage executor through the program a pipeline
// schedule emits, with non-blocking transfers and a flush every iteration. The gradients (and
// the outputs of a forward-only pipeline) are checked against one rank computing the model.
#pragma once

#include "app/point.hpp"

namespace ridgeline {

/// Whether `cfg` runs through the scheduled executor (train, or prefill with --schedule).
bool scheduled_point(const RunConfig& cfg);

/// Bytes one rank needs for a scheduled point's stage: weights and gradients of its layers and
/// the activations of every microbatch a stage may hold at once.
double scheduled_memory_bytes(const RunConfig& cfg);
/// The check's one-rank reference model: the bytes it allocates (every layer's weights and
/// gradients, one microbatch's activations) and what it keeps in host memory (every layer's
/// gradients, each global microbatch's output and input gradient, as fp32).
double scheduled_reference_bytes(const RunConfig& cfg);
double scheduled_reference_host_bytes(const RunConfig& cfg);

/// run_point() for a scheduled point (collective).
PointResult run_scheduled_point(JobContext& job, const RunConfig& cfg, const Roofs& roofs,
                                Watchdog& watchdog);

} // namespace ridgeline
