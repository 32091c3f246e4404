// GPU placement decisions (see gpu_binding.hpp).
#include "gpu_binding.hpp"

namespace ridgeline {

int device_for_local_rank(int local_rank, int gpus_visible) {
  return gpus_visible > 0 ? local_rank % gpus_visible : -1;
}

GpuPlacement decide_gpu_placement(int ranks, int gpus, bool allow_shared, const std::string& host) {
  GpuPlacement p;
  if (gpus <= 0 || ranks <= gpus) return p;
  p.ranks_per_gpu = (ranks + gpus - 1) / gpus;
  p.shared = true;
  if (allow_shared) return p;
  p.refused = true;
  p.problem = std::to_string(ranks) + " ranks on host " + host + " share " + std::to_string(gpus) +
              (gpus == 1 ? " GPU" : " GPUs") + " (up to " + std::to_string(p.ranks_per_gpu) +
              " ranks on one GPU, each timing a fraction of it): launch at most " +
              std::to_string(gpus) + " ranks per node, or pass --allow-shared-gpu to run anyway";
  return p;
}

} // namespace ridgeline
