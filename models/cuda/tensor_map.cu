// The driver entry point that encodes TMA descriptors (tensor_map.cuh).
#include "models/cuda/tensor_map.cuh"

namespace ridgeline {
namespace cuda {

#if defined(RIDGELINE_SM90A)
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    RIDGELINE_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                     cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr)
      throw Error("the CUDA driver has no cuTensorMapEncodeTiled (TMA needs driver 525 or newer)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}
#endif

} // namespace cuda
} // namespace ridgeline
