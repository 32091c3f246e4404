// A tensor-parallel point: prefill or decode of a stage of TP-sharded layers (TpStage), one
// step per microbatch with pipeline transfers between stages or the replay of the stage's
// CUDA graph, under each overlap strategy, checked against the TP=1 model.
#pragma once

#include "app/point_common.hpp"

namespace ridgeline {

/// What a point's stage allocates for its overlap strategies beyond its stage estimate:
/// ce-ring's exchange windows, the symm: strategies' symmetric block
/// (TpStage::overlap_memory_bytes()); part of the memory check of resolve_point().
double overlap_memory_bytes(const PointSpec& point);

/// run_point() for a point that is not scheduled (collective).
PointResult run_tp_point(JobContext& job, const PointSpec& point, const Roofs& roofs,
                         Watchdog& watchdog);

} // namespace ridgeline
