// Which GPU each rank uses, and whether a node's placement is allowed: more ranks on a node than
// GPUs would share GPUs silently (each measuring half a device), so that is refused unless asked
// for. The decision is a pure function of a node's counts; the gathering of those counts across
// a node's ranks lives with the job (app/job.cpp).
#pragma once

#include <string>

namespace ridgeline {

/// One rank's GPU and what its node agreed on (app/job.cpp: bind_gpu fills it).
struct GpuBinding {
  int device = -1;      ///< CUDA ordinal this rank uses; -1 on the host backend
  int gpus_visible = 0; ///< CUDA devices this rank sees
  int node_gpus = 0;    ///< distinct GPUs the ranks of this node use between them
  int shared_by = 0;    ///< ranks of this node on this rank's GPU (0 without a GPU)
  std::string gpu_id;   ///< this rank's GPU: UUID, else PCI bus id ("" without a GPU)
};

/// The CUDA device a rank uses: its rank on the node modulo the devices it sees (-1 when it
/// sees none). Under a launcher that gives each rank its own GPU (CUDA_VISIBLE_DEVICES per
/// task) every rank sees one device and uses device 0.
int device_for_local_rank(int local_rank, int gpus_visible);

/// The verdict on one node's placement.
struct GpuPlacement {
  int ranks_per_gpu = 1; ///< the most ranks on one GPU of the node (ceil(ranks / gpus))
  bool shared = false;   ///< some GPU serves more than one rank
  bool refused = false;  ///< shared without --allow-shared-gpu
  std::string problem;   ///< the message when refused, else ""
};

/// `ranks` ranks on node `host` use `gpus` distinct GPUs between them (the devices they were
/// bound to, across every rank's view); `allow_shared` is --allow-shared-gpu. Pure.
GpuPlacement decide_gpu_placement(int ranks, int gpus, bool allow_shared, const std::string& host);

} // namespace ridgeline
