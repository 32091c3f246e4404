// fp32 rows rounded into a bf16 or fp16 tensor: the fused attention backward's last kernels
// (dQ, and dK and dV when the sm90 kernel split a group's heads).
#include "models/cuda/attention.cuh"
#include "models/cuda/common.cuh"

namespace ridgeline {
namespace cuda {
namespace {

template <typename T>
__global__ void convert_rows_kernel(const float* in, T* out, int64_t ld, int64_t rows,
                                    int64_t cols) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols;
    out[r * ld + (i - r * cols)] = from_float<T>(in[i]);
  }
}

} // namespace

template <typename T>
void launch_convert_rows(const float* in, T* out, int64_t ld, int64_t rows, int64_t cols,
                         cudaStream_t stream) {
  convert_rows_kernel<T><<<grid_for(rows * cols, 256), 256, 0, stream>>>(in, out, ld, rows, cols);
}

template void launch_convert_rows<__nv_bfloat16>(const float*, __nv_bfloat16*, int64_t, int64_t,
                                                 int64_t, cudaStream_t);
template void launch_convert_rows<__half>(const float*, __half*, int64_t, int64_t, int64_t,
                                          cudaStream_t);

} // namespace cuda
} // namespace ridgeline
