// Fused attention decode, the combine kernel: the partials (max, sum, unnormalised output) of the
// context splits of attention_decode_split.cu merged into each head's output row, every
// sequence split alike or (ragged) each into its own number of splits.
#include "models/cuda/attention.cuh"
#include "models/cuda/common.cuh"

namespace ridgeline {
namespace cuda {
namespace {

// One CTA per (head, sequence) merges that head's splits. Its warps take turns over the splits
// and each lane owns D / 32 of the head's dims, so every load of a warp's splits can be in
// flight at once: a thread walking all splits in turn would wait one L2 round trip per split,
// this waits a few.
constexpr int kCombineWarps = 4;

template <typename T, int D>
__global__ void __launch_bounds__(32 * kCombineWarps)
    decode_combine_kernel(const float* part_o, const float* part_ml, T* out, int64_t o_ld,
                          int heads, int splits, const int* first_split) {
  allow_dependents();
  wait_for_primary();
  static_assert(D % 64 == 0, "two or four dims per lane");
  constexpr int kPer = D / 32;
  __shared__ float x_o[kCombineWarps][D];
  __shared__ float x_f[kCombineWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.x, b = blockIdx.y;
  // Sequence b's partials: split0 * heads + h * splits + s (attention_decode_split.cu).
  int64_t split0 = static_cast<int64_t>(b) * splits;
  if (first_split != nullptr) {
    split0 = first_split[b];
    splits = first_split[b + 1] - first_split[b];
    if (splits == 1) return; // the split kernel wrote this sequence's output; the whole CTA leaves
  }
  const int64_t slot0 = split0 * heads + static_cast<int64_t>(h) * splits;
  const float2* ml = reinterpret_cast<const float2*>(part_ml) + slot0; // (max, sum) per split

  float mx = -INFINITY;
  for (int s = threadIdx.x; s < splits; s += 32 * kCombineWarps)
    mx = fmaxf(mx, ml[s].x);
#pragma unroll
  for (int o = 16; o > 0; o /= 2)
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (lane == 0) x_f[warp] = mx;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kCombineWarps; ++w)
    mx = fmaxf(mx, x_f[w]); // every split has a key: finite
  __syncthreads();          // x_f is reused below

  float num[kPer] = {};
  float den = 0.0f;
#pragma unroll 4
  for (int s = warp; s < splits; s += kCombineWarps) {
    const float2 st = ml[s];
    const float wgt = exp2f(st.x - mx);
    const float* o = part_o + (slot0 + s) * D + lane * kPer;
    if constexpr (kPer == 4) {
      const float4 v = *reinterpret_cast<const float4*>(o);
      num[0] += wgt * v.x;
      num[1] += wgt * v.y;
      num[2] += wgt * v.z;
      num[3] += wgt * v.w;
    } else {
      const float2 v = *reinterpret_cast<const float2*>(o);
      num[0] += wgt * v.x;
      num[1] += wgt * v.y;
    }
    den += wgt * st.y;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    x_o[warp][lane * kPer + i] = num[i];
  if (lane == 0) x_f[warp] = den;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kCombineWarps; ++w)
    total += x_f[w];
  for (int d = threadIdx.x; d < D; d += 32 * kCombineWarps) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kCombineWarps; ++w)
      sum += x_o[w][d];
    out[static_cast<int64_t>(b) * o_ld + static_cast<int64_t>(h) * D + d] =
        from_float<T>(sum / total);
  }
}

} // namespace

template <typename T, int D>
void launch_decode_combine(const float* part_o, const float* part_ml, T* out, int64_t o_ld,
                           int heads, int splits, int64_t batch, cudaStream_t stream,
                           const int* first_split) {
  launch_kernel(
      decode_combine_kernel<T, D>, dim3(static_cast<unsigned>(heads), static_cast<unsigned>(batch)),
      32 * kCombineWarps, 0, stream, part_o, part_ml, out, o_ld, heads, splits, first_split);
}

template void launch_decode_combine<__nv_bfloat16, 64>(const float*, const float*, __nv_bfloat16*,
                                                       int64_t, int, int, int64_t, cudaStream_t,
                                                       const int*);
template void launch_decode_combine<__nv_bfloat16, 128>(const float*, const float*, __nv_bfloat16*,
                                                        int64_t, int, int, int64_t, cudaStream_t,
                                                        const int*);
template void launch_decode_combine<__half, 64>(const float*, const float*, __half*, int64_t, int,
                                                int, int64_t, cudaStream_t, const int*);
template void launch_decode_combine<__half, 128>(const float*, const float*, __half*, int64_t, int,
                                                 int, int64_t, cudaStream_t, const int*);

} // namespace cuda
} // namespace ridgeline
