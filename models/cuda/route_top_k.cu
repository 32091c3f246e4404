// The router's top-k on the device: one warp per token picks the token's k experts in k rounds
// of a warp-wide argmax over the experts not yet chosen, then its lane 0 turns their scores into
// the combine weights (the rule of route_top_k in models/moe_routing.hpp).
#include "models/cuda/common.cuh"
#include "models/cuda/elementwise.cuh"

namespace ridgeline {
namespace cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// The better of two (score, expert) candidates: the higher score, an equal one to the lower
// expert; an expert of -1 (none) loses to any.
__device__ __forceinline__ bool better(float s, int e, float bs, int be) {
  if (be < 0) return e >= 0;
  if (e < 0) return false;
  return s > bs || (s == bs && e < be);
}

template <typename T>
__global__ void route_top_k_kernel(const T* logits, int64_t ld, int64_t tokens, int experts,
                                   int top_k, bool sigmoid, int32_t* expert, float* weight) {
  __shared__ int chosen[kWarpsPerBlock][kMaxRouteTopK];
  __shared__ float score_of[kWarpsPerBlock][kMaxRouteTopK];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (t >= tokens) return;
  const T* row = logits + t * ld;
  for (int j = 0; j < top_k; ++j) {
    float bs = 0.0f;
    int be = -1;
    for (int e = lane; e < experts; e += 32) {
      bool taken = false;
      for (int i = 0; i < j; ++i)
        taken = taken || chosen[warp][i] == e;
      if (taken) continue;
      const float l = to_float(row[e]);
      const float s = sigmoid ? 1.0f / (1.0f + expf(-l)) : l;
      if (better(s, e, bs, be)) bs = s, be = e;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float os = __shfl_xor_sync(0xffffffffu, bs, offset);
      const int oe = __shfl_xor_sync(0xffffffffu, be, offset);
      if (better(os, oe, bs, be)) bs = os, be = oe;
    }
    if (lane == 0) chosen[warp][j] = be, score_of[warp][j] = bs;
    __syncwarp();
  }
  if (lane != 0) return;
  float sum = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    // softmax over the chosen logits (the first is the largest), or the sigmoids normalised.
    const float w = sigmoid ? score_of[warp][j] : expf(score_of[warp][j] - score_of[warp][0]);
    weight[t * top_k + j] = w;
    expert[t * top_k + j] = chosen[warp][j];
    sum += w;
  }
  for (int j = 0; j < top_k; ++j)
    weight[t * top_k + j] /= sum;
}

} // namespace

void route_top_k(const Tensor& logits, int top_k, bool sigmoid, int32_t* expert, float* weight,
                 cudaStream_t s) {
  if (logits.rows == 0) return;
  dispatch(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>((logits.rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
    launch_kernel(route_top_k_kernel<T>, grid, kWarpsPerBlock * 32, 0, s,
                  static_cast<const T*>(logits.data), logits.ld, logits.rows,
                  static_cast<int>(logits.cols), top_k, sigmoid, expert, weight);
  });
}

} // namespace cuda
} // namespace ridgeline
