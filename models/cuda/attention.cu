// Fused attention on the GPU, the dispatch: by dtype, head dim and phase to the kernels of this
// folder. Prefill (seq > 1, or any seq that must write its log-sum-exp) takes
// attention_prefill_sm90.cu on a Hopper GPU at head dim 128 and attention_prefill_sm80.cu
// otherwise; decode (seq == 1, and ragged decode) attention_decode_split.cu and
// attention_decode_combine.cu. The backward (prefill shapes) runs attention_delta.cu, then
// attention_backward_sm90.cu or attention_backward_sm80.cu, then convert_rows.cu into the dtype
// gradients.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "models/cuda/attention.cuh"
#include "models/cuda/attention_backward.cuh"
#include "models/cuda/attention_prefill.cuh"
#include "models/cuda/common.cuh"
#include "models/cuda_backend.hpp"

namespace ridgeline {
namespace cuda {
namespace {

// The prefill kernel choice: by device unless set_fused_prefill_kernel() forced sm80.
std::atomic<bool> g_force_sm80{false};

/// Whether a prefill of head dim D takes the Hopper kernel on the current device: built for
/// sm_90a, a compute capability 9.0 device (sm_90a code runs there only), head dim 128.
bool takes_sm90(int64_t head_dim, int device) {
#if defined(RIDGELINE_SM90A)
  if (head_dim != kSm90D || g_force_sm80.load()) return false;
  int major = 0, minor = 0;
  RIDGELINE_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  RIDGELINE_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
#else
  (void)head_dim;
  (void)device;
  return false;
#endif
}

template <typename T, int D>
void launch_flash(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& out, float* lse, cudaStream_t stream) {
  int device = 0;
  RIDGELINE_CHECK(cudaGetDevice(&device));
  if (takes_sm90(D, device)) {
    launch_flash_sm90<T>(s, q, k, v, out, lse, stream);
    return;
  }
  launch_flash_sm80<T, D>(s, q, k, v, out, lse, stream);
}

bool aligned_16(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.ld % 8 == 0;
}

template <typename T, int D>
void launch_backward(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& out, const Tensor& dout, const float* lse, const Tensor& dq,
                     const Tensor& dk, const Tensor& dv, const ScratchFn& scratch,
                     cudaStream_t stream) {
  const int64_t rows = s.batch * s.seq;
  const size_t delta_n = static_cast<size_t>(s.batch * s.heads * s.seq);
  const size_t dq_n = static_cast<size_t>(rows * s.heads * D);
  const size_t kv_n = static_cast<size_t>(rows * s.kv_heads * D);
  int device = 0;
  RIDGELINE_CHECK(cudaGetDevice(&device));
  // The Hopper kernel takes whole 64-row query tiles and 16-byte aligned statistics rows. When
  // one CTA per (KV head, 128 keys) leaves the GPU short of two CTAs per SM (grouped-query
  // heads, few KV heads per rank), it splits each group's query heads across CTAs.
  const bool sm90 =
      takes_sm90(D, device) && s.seq % kBwd90M == 0 && reinterpret_cast<uintptr_t>(lse) % 16 == 0;
  const int group = static_cast<int>(s.heads / s.kv_heads);
  int head_splits = 1;
  if (sm90) {
    int sms = 0;
    RIDGELINE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int64_t ctas = s.batch * s.kv_heads * ((s.seq + kBwd90N - 1) / kBwd90N);
    while (group % (2 * head_splits) == 0 && ctas * head_splits < 2 * static_cast<int64_t>(sms))
      head_splits *= 2;
  }
  // dq_acc (and the split dK, dV sums) first: the kernels add 8- and 16-byte vectors into them
  // (every count is a multiple of D).
  const size_t split_n = head_splits > 1 ? 2 * kv_n : 0;
  float* dq_acc = static_cast<float*>(scratch((dq_n + split_n + delta_n) * sizeof(float)));
  float* dkv_acc = dq_acc + dq_n;
  float* delta = dkv_acc + split_n;
  RIDGELINE_CHECK(cudaMemsetAsync(dq_acc, 0, (dq_n + split_n) * sizeof(float), stream));
  launch_attention_delta<T>(out, dout, delta, rows, static_cast<int>(s.seq),
                            static_cast<int>(s.heads), D, stream);
  RIDGELINE_CHECK(cudaGetLastError());

  const BackwardOperands o{&q,  &k,    &v,     &dout,       &dk,     &dv,
                           lse, delta, dq_acc, head_splits, dkv_acc, dkv_acc + kv_n};
  RIDGELINE_REQUIRE((s.seq + kBwdN - 1) / kBwdN <= 65535,
                    "fused attention backward supports at most 65535 * 128 keys per sequence");
  static_assert(kBwd90N == kBwdN, "both backward kernels take 128 keys per CTA");
  const dim3 grid(static_cast<unsigned>(s.batch * s.kv_heads),
                  static_cast<unsigned>((s.seq + kBwdN - 1) / kBwdN),
                  static_cast<unsigned>(head_splits));
  if (sm90) {
    launch_backward_sm90<T>(s, o, grid, stream);
    if (head_splits > 1) {
      const int64_t kv_cols = s.kv_heads * D;
      RIDGELINE_CHECK(cudaGetLastError());
      launch_convert_rows<T>(o.dk_acc, static_cast<T*>(dk.data), dk.ld, rows, kv_cols, stream);
      RIDGELINE_CHECK(cudaGetLastError());
      launch_convert_rows<T>(o.dv_acc, static_cast<T*>(dv.data), dv.ld, rows, kv_cols, stream);
    }
  } else {
    launch_backward_sm80<T, D>(s, o, grid, stream);
  }
  RIDGELINE_CHECK(cudaGetLastError());
  const int64_t cols = s.heads * D;
  launch_convert_rows<T>(dq_acc, static_cast<T*>(dq.data), dq.ld, rows, cols, stream);
  RIDGELINE_CHECK(cudaGetLastError());
}

// Calls f(T{}, std::integral_constant<int, D>{}) for the fused kernels' element type T of `dt`
// and head dim D; other types and head dims are refused.
template <typename F> void dispatch_fused(DType dt, int64_t head_dim, F&& f) {
  auto dims = [&](auto tag) {
    if (head_dim == 64)
      f(tag, std::integral_constant<int, 64>{});
    else if (head_dim == 128)
      f(tag, std::integral_constant<int, 128>{});
    else
      throw Error("fused attention supports head_dim 64 and 128, got " + std::to_string(head_dim) +
                  " (the naive implementation takes any head_dim)");
  };
  if (dt == DType::bf16)
    dims(__nv_bfloat16{});
  else if (dt == DType::f16)
    dims(__half{});
  else
    throw Error("fused attention takes bf16 or fp16 tensors");
}

// The fused kernels' layout rules: 16-byte aligned tensors, and `rows` (the most rows a kernel
// indexes) within 32-bit indices.
void require_fused_layout(std::initializer_list<const Tensor*> tensors, int64_t rows) {
  for (const Tensor* t : tensors)
    RIDGELINE_REQUIRE(aligned_16(*t),
                      "fused attention needs 16-byte aligned tensors with ld a multiple of 8");
  RIDGELINE_REQUIRE(rows < (int64_t{1} << 31),
                    "fused attention: sequence too long for 32-bit row indices");
}

} // namespace

void attention_fused(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& out, int sm_count, const ScratchFn& scratch, Launch where,
                     float* lse) {
  require_fused_layout({&q, &k, &v, &out}, std::max(s.context, s.batch * s.capacity));
  if (s.batch == 0 || s.seq == 0 || s.heads == 0) return;
  // The decode kernels keep no log-sum-exp: a forward that must write it takes the flash kernel.
  const bool decode = s.seq == 1 && lse == nullptr;
  dispatch_fused(q.dtype, s.head_dim, [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    if (decode)
      launch_decode<T, D>(s, q, k, v, out, sm_count, scratch, where);
    else
      launch_flash<T, D>(s, q, k, v, out, lse, where.stream);
  });
}

void attention_fused_decode_ragged(const AttentionShape& s, const std::vector<int64_t>& contexts,
                                   const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, int sm_count, const ScratchFn& scratch,
                                   const UploadFn& upload, cudaStream_t stream) {
  require_fused_layout({&q, &k, &v, &out}, s.batch * s.capacity);
  if (s.batch == 0 || s.heads == 0) return;
  dispatch_fused(q.dtype, s.head_dim, [&](auto tag, auto dim) {
    launch_decode_ragged<decltype(tag), decltype(dim)::value>(s, contexts, q, k, v, out, sm_count,
                                                              scratch, upload, stream);
  });
}

void attention_fused_backward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& dout,
                              const float* lse, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv, const ScratchFn& scratch, cudaStream_t stream) {
  require_fused_layout({&q, &k, &v, &out, &dout, &dq, &dk, &dv}, s.batch * s.seq);
  if (s.batch == 0 || s.seq == 0 || s.heads == 0) return;
  dispatch_fused(q.dtype, s.head_dim, [&](auto tag, auto dim) {
    launch_backward<decltype(tag), decltype(dim)::value>(s, q, k, v, out, dout, lse, dq, dk, dv,
                                                         scratch, stream);
  });
}

} // namespace cuda

void set_fused_prefill_kernel(const std::string& choice) {
  if (choice != "auto" && choice != "sm80")
    throw UsageError("fused prefill kernel: expected auto or sm80, got '" + choice + "'");
  cuda::g_force_sm80.store(choice == "sm80");
}

std::string fused_prefill_kernel(int device, int64_t head_dim) {
  return cuda::takes_sm90(head_dim, device) ? "sm90" : "sm80";
}

} // namespace ridgeline
