// What tp_layer.cpp and tp_layer_ring.cpp share of the copy-engine ring: the exchange's windows
// and the launch mode around its stream memory operations. Internal to TpStage's sources.
#pragma once

#include "models/backend.hpp"

namespace ridgeline::tp_ring {

// The exchange's windows: where the all-gathers land (sequence parallelism), the row-parallel
// outputs of the projection and FC2 (the summed pieces land there without it), and where the
// peers' partial pieces of each land for the reduce-scatter.
enum Window { w_gather, w_proj_out, w_fc2_out, w_proj_reduce, w_fc2_reduce, w_count };

// Kernels between the exchange's stream memory operations launch as ordinary launches: a
// programmatic launch relaxes its wait on the kernel before it, not on a memory operation.
struct NoLaunchChain {
  Backend& backend;
  explicit NoLaunchChain(Backend& b) : backend(b) { backend.set_launch_chain(false); }
  ~NoLaunchChain() { backend.set_launch_chain(true); }
};

} // namespace ridgeline::tp_ring
