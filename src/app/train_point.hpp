// A scheduled pipeline point: the train phase (forward and backward, data-parallel gradients)
// and prefill under --schedule, run by the pipeline driver (parallel/pipeline.hpp) through the
// program a pipeline schedule emits, with non-blocking transfers and a flush every iteration.
// The gradients (and the outputs of a forward-only pipeline) are checked against one rank
// computing the model.
#pragma once

#include "app/point_common.hpp"

namespace ridgeline {

/// run_point() for a scheduled point (collective).
PointResult run_scheduled_point(JobContext& job, const PointSpec& point, const Roofs& roofs,
                                Watchdog& watchdog);

} // namespace ridgeline
