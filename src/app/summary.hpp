// Reduction of all ranks' timelines into the run summary.
#pragma once

#include <vector>

#include "app/run_data.hpp"

namespace ridgeline {

/// Step times and per-op aggregates over the timed (non-warm-up) iterations of every rank.
/// A step's time is the longest rank's span of that iteration; a collective instance's time
/// is its maximum over ranks; compute instances count once per rank.
RunSummary summarize_run(const OpTable& ops, const std::vector<std::vector<TimelineRecord>>& timelines);

}  // namespace ridgeline
