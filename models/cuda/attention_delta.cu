// The attention backward's delta = rowsum(dO * O) per (row, head), one warp each, fp32: the
// fused backward's first kernel and the naive backward's.
#include "models/cuda/attention.cuh"
#include "models/cuda/common.cuh"

namespace ridgeline {
namespace cuda {
namespace {

template <typename T>
__global__ void attention_delta_kernel(const T* out, int64_t o_ld, const T* dout, int64_t do_ld,
                                       float* delta, int64_t rows, int seq, int heads,
                                       int head_dim) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x % 32;
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
       w < rows * heads; w += warps) {
    const int64_t r = w / heads;
    const int h = static_cast<int>(w % heads);
    const T* o = out + r * o_ld + static_cast<int64_t>(h) * head_dim;
    const T* d = dout + r * do_ld + static_cast<int64_t>(h) * head_dim;
    float sum = 0.0f;
    for (int x = lane; x < head_dim; x += 32)
      sum += to_float(o[x]) * to_float(d[x]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) delta[(r / seq * heads + h) * seq + r % seq] = sum;
  }
}

} // namespace

template <typename T>
void launch_attention_delta(const Tensor& out, const Tensor& dout, float* delta, int64_t rows,
                            int seq, int heads, int head_dim, cudaStream_t stream) {
  attention_delta_kernel<T><<<grid_for(rows * heads * 32, 256), 256, 0, stream>>>(
      static_cast<const T*>(out.data), out.ld, static_cast<const T*>(dout.data), dout.ld, delta,
      rows, seq, heads, head_dim);
}

template void launch_attention_delta<__nv_bfloat16>(const Tensor&, const Tensor&, float*, int64_t,
                                                    int, int, int, cudaStream_t);
template void launch_attention_delta<__half>(const Tensor&, const Tensor&, float*, int64_t, int,
                                             int, int, cudaStream_t);

void attention_delta(const AttentionShape& s, const Tensor& out, const Tensor& dout, float* delta,
                     cudaStream_t stream) {
  const int64_t rows = s.batch * s.seq;
  if (rows == 0 || s.heads == 0) return;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    launch_attention_delta<T>(out, dout, delta, rows, static_cast<int>(s.seq),
                              static_cast<int>(s.heads), static_cast<int>(s.head_dim), stream);
    RIDGELINE_CHECK(cudaGetLastError());
  };
  if (out.dtype == DType::bf16)
    run(__nv_bfloat16{});
  else
    run(__half{});
}

} // namespace cuda
} // namespace ridgeline
