// The CUDA backend's entry points and the GPU facts recorded in /topology and /stack. Plain C++:
// callers need no CUDA headers, and a build without CUDA provides the same functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "models/backend.hpp"

namespace ridgeline {

/// Number of visible CUDA devices (0 without a CUDA build, a driver or a device).
int cuda_device_count();

/// Creates the CUDA backend on `device` (made current for the calling thread) storing
/// activations and weights as `dtype` (bf16 or fp16; anything else throws UsageError). The
/// comm lane's stream gets the device's greatest priority unless `comm_priority` is false.
std::unique_ptr<Backend> make_cuda_backend(int device, DType dtype, bool comm_priority = true);

/// One GPU as recorded in /topology. Fields NVML could not supply are empty or -1.
struct GpuInfo {
  int device = -1; ///< CUDA ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;
  std::string uuid;       ///< "GPU-..." as nvidia-smi prints it
  std::string pci_bus_id; ///< "0000:19:00.0"
  int sm_count = -1;
  int compute_major = -1;
  int compute_minor = -1;
  int64_t memory_total_bytes = -1;
  int64_t memory_free_bytes = -1;
  int sm_clock_mhz = -1; ///< current
  int sm_clock_max_mhz = -1;
  int mem_clock_mhz = -1; ///< current
  int mem_clock_max_mhz = -1;
  double power_limit_w = -1; ///< enforced limit
  int ecc_enabled = -1;      ///< 1 on, 0 off, -1 unknown
};

/// Facts about `device` from the CUDA runtime and (when loadable) NVML; no side effects.
GpuInfo query_gpu(int device);

/// (component, version) pairs: driver, CUDA runtime, cuBLASLt and NCCL as loaded at run time.
std::vector<std::pair<std::string, std::string>> cuda_stack_versions();

/// Links between the visible GPUs, nvidia-smi topo style: "X" on the diagonal, "NV<n>" for n
/// NVLinks, else the PCIe path class (PIX, PXB, PHB, NODE, SYS). Empty without NVML.
std::vector<std::vector<std::string>> gpu_link_matrix();

} // namespace ridgeline
