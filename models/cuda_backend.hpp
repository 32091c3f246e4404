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

/// Makes `device` the calling thread's current CUDA device (what NCCL binds a communicator to);
/// throws without a CUDA build.
void use_cuda_device(int device);

/// Creates the CUDA backend on `device` (made current for the calling thread) storing
/// activations and weights as `dtype` (bf16 or fp16; anything else throws UsageError). The
/// comm lane's stream gets the device's greatest priority unless `comm_priority` is false.
std::unique_ptr<Backend> make_cuda_backend(int device, DType dtype, bool comm_priority = true);

/// The kernels the fused attention runs for prefill and its backward: "sm90" (warpgroup MMA fed
/// by TMA with warp-specialised producer and consumers; a Hopper GPU, a build for sm_90a, head
/// dim 128; the backward also needs a sequence that is a multiple of 64) or "sm80" (mma.sync and
/// cp.async; every other case). set_fused_prefill_kernel("sm80") makes every later prefill and
/// backward of this process take the sm80 kernels, for A/B runs; "auto" (the default) chooses by
/// device. Anything else throws UsageError.
void set_fused_prefill_kernel(const std::string& choice);
/// The kernel a fused prefill of head dim `head_dim` takes on `device` now: "sm90" or "sm80".
std::string fused_prefill_kernel(int device, int64_t head_dim);

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

/// One NVML reading of a GPU (a /ranks/<r>/samples row); -1 where NVML could not say.
struct GpuSample {
  int64_t t_ns = 0; ///< steady clock, since the sampler started
  int64_t sm_clock_mhz = -1;
  int64_t mem_clock_mhz = -1;
  double power_w = -1;     ///< instantaneous board power
  double power_avg_w = -1; ///< board power as the driver averages it (1 s on Ampere and newer)
  double temp_c = -1;
  /// NVML's clocks-event (throttle) reason bits, e.g. 0x4 software power cap, 0x20 thermal.
  int64_t clock_event_reasons = -1;
};

/// Bit of GpuSample::clock_event_reasons set while the software power cap holds clocks down.
inline constexpr int64_t kClockEventPowerCap = 0x4;

/// Reads `device` through NVML every `period_ms` on a background thread from construction to
/// stop() (or destruction). Without NVML, or in a build without CUDA, it records nothing.
class GpuSampler {
public:
  GpuSampler(int device, int period_ms);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;
  /// Now on the samples' time base (ns since construction).
  int64_t now_ns() const;
  /// Stops sampling and returns every sample, oldest first (empty after the first call).
  std::vector<GpuSample> stop();

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// Links between the visible GPUs, nvidia-smi topo style: "X" on the diagonal, "NV<n>" for n
/// NVLinks, else the PCIe path class (PIX, PXB, PHB, NODE, SYS). Empty without NVML.
std::vector<std::vector<std::string>> gpu_link_matrix();

} // namespace ridgeline
