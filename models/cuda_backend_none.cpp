// The CUDA entry points of a build without CUDA: no devices, no backend, no GPU facts.
#include "core/error.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {

int cuda_device_count() {
  return 0;
}

void use_cuda_device(int) {
  throw UsageError("this ridgeline was built without CUDA");
}

std::unique_ptr<Backend> make_cuda_backend(int, DType, bool) {
  throw UsageError("this ridgeline was built without CUDA");
}

void set_fused_prefill_kernel(const std::string& choice) {
  if (choice != "auto" && choice != "sm80")
    throw UsageError("fused prefill kernel: expected auto or sm80, got '" + choice + "'");
}

std::string fused_prefill_kernel(int, int64_t) {
  return "sm80";
}

GpuInfo query_gpu(int device) {
  GpuInfo info;
  info.device = device;
  return info;
}

std::vector<std::pair<std::string, std::string>> cuda_stack_versions() {
  return {};
}

std::vector<std::vector<std::string>> gpu_link_matrix() {
  return {};
}

struct GpuSampler::Impl {};
GpuSampler::GpuSampler(int, int) {}
GpuSampler::~GpuSampler() = default;
int64_t GpuSampler::now_ns() const {
  return 0;
}
std::vector<GpuSample> GpuSampler::stop() {
  return {};
}

} // namespace ridgeline
