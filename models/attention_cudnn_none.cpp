// cuDNN attention in a build without cuDNN (or without CUDA): every entry point says so.
#include "core/error.hpp"
#include "models/attention_cudnn.hpp"

namespace ridgeline {
namespace {

[[noreturn]] void not_built() {
  throw UsageError("--attention cudnn: this ridgeline was built without cuDNN; install cuDNN 9 "
                   "and its frontend (pip install nvidia-cudnn-cu13 nvidia-cudnn-frontend) and "
                   "build again (CMake finds the wheels, or set CUDNN_ROOT and "
                   "CUDNN_FRONTEND_INCLUDE_DIR)");
}

} // namespace

bool cudnn_compiled() {
  return false;
}

std::string cudnn_build_version() {
  return "";
}

int64_t cudnn_runtime_version() {
  not_built();
}

std::string cudnn_loaded_version() {
  return "";
}

struct CudnnAttention::Impl {};

CudnnAttention::CudnnAttention(void*) {
  not_built();
}

CudnnAttention::~CudnnAttention() = default;

void CudnnAttention::forward(const AttentionShape&, const Tensor&, const Tensor&, const Tensor&,
                             Tensor, void*) {
  not_built();
}

void CudnnAttention::backward(const AttentionShape&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, const Tensor&, const void*, Tensor, Tensor, Tensor) {
  not_built();
}

std::vector<std::string> CudnnAttention::plans() const {
  return {};
}

} // namespace ridgeline
