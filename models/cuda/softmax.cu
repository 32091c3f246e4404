// The naive attention's softmax kernels over materialised fp32 scores: the causal softmax (with
// each row's log-sum-exp for training), and for the backward the probabilities recomputed from
// the log-sum-exp and the softmax gradient.
#include <cmath>

#include "models/cuda/block_reduce.cuh"
#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"

namespace ridgeline {
namespace cuda {
namespace {

template <typename T>
__global__ void causal_softmax_kernel(const float* scores, T* probs, int64_t seq, int64_t context,
                                      bool causal, float scale, float* lse, int64_t lse_stride) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const float* in = scores + row * context;
  T* out = probs + row * context;
  const int64_t last = causal ? context - seq + row % seq : context - 1; // last visible key
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x)
    mx = fmaxf(mx, in[j] * scale);
  mx = block_max(mx, shared);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j <= last; j += blockDim.x)
    sum += expf(in[j] * scale - mx);
  sum = block_sum(sum, shared);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < context; j += blockDim.x)
    out[j] = from_float<T>(j <= last ? expf(in[j] * scale - mx) * inv : 0.0f);
  if (lse != nullptr && threadIdx.x == 0)
    lse[(row / seq) * lse_stride + row % seq] = mx + logf(sum);
}

// The backward's probabilities, recomputed from the forward's log-sum-exp: no row reductions.
template <typename T>
__global__ void probs_from_lse_kernel(const float* scores, T* probs, int64_t rows, int64_t seq,
                                      int64_t context, bool causal, float scale, const float* lse,
                                      int64_t lse_stride) {
  const int64_t total = rows * context;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / context, j = i - r * context;
    const int64_t last = causal ? context - seq + r % seq : context - 1;
    const float l = lse[(r / seq) * lse_stride + r % seq];
    probs[i] = from_float<T>(j <= last ? expf(scores[i] * scale - l) : 0.0f);
  }
}

// dS = P * (dP - delta) * scale, in place over P (masked entries stay zero since P is).
template <typename T>
__global__ void softmax_grad_kernel(T* probs, const float* dprobs, int64_t rows, int64_t seq,
                                    int64_t context, float scale, const float* delta,
                                    int64_t delta_stride) {
  const int64_t total = rows * context;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / context;
    const float d = delta[(r / seq) * delta_stride + r % seq];
    probs[i] = from_float<T>(to_float(probs[i]) * (dprobs[i] - d) * scale);
  }
}

} // namespace

void causal_softmax(const float* scores, void* probs, DType dtype, int64_t rows, int64_t seq,
                    int64_t context, bool causal, float scale, float* lse, int64_t lse_stride,
                    cudaStream_t s) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    causal_softmax_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
        scores, static_cast<T*>(probs), seq, context, causal, scale, lse, lse_stride);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

void probs_from_lse(const float* scores, void* probs, DType dtype, int64_t rows, int64_t seq,
                    int64_t context, bool causal, float scale, const float* lse, int64_t lse_stride,
                    cudaStream_t s) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    probs_from_lse_kernel<T><<<grid_for(rows * context, kThreads), kThreads, 0, s>>>(
        scores, static_cast<T*>(probs), rows, seq, context, causal, scale, lse, lse_stride);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

void softmax_grad(void* probs, const float* dprobs, DType dtype, int64_t rows, int64_t seq,
                  int64_t context, float scale, const float* delta, int64_t delta_stride,
                  cudaStream_t s) {
  if (rows == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_grad_kernel<T><<<grid_for(rows * context, kThreads), kThreads, 0, s>>>(
        static_cast<T*>(probs), dprobs, rows, seq, context, scale, delta, delta_stride);
    RIDGELINE_CHECK(cudaGetLastError());
  });
}

} // namespace cuda
} // namespace ridgeline
