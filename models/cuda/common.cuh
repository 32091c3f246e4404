// The kernel library's shared core: element conversions, the programmatic-launch primitives, the
// device-buffer handle, and the kernel launchers (one kernel or op per file of this folder) that
// the CUDA backend calls.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "models/backend.hpp"

namespace ridgeline {
namespace cuda {

/// Owns one cudaMalloc allocation; move-only, freed without throwing.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : m_bytes(bytes) {
    if (bytes > 0) RIDGELINE_CHECK(cudaMalloc(&m_data, bytes));
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept : m_data(other.m_data), m_bytes(other.m_bytes) {
    other.m_data = nullptr;
    other.m_bytes = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      m_data = other.m_data;
      m_bytes = other.m_bytes;
      other.m_data = nullptr;
      other.m_bytes = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  void* data() const { return m_data; }
  size_t bytes() const { return m_bytes; }

private:
  void release() noexcept {
    if (m_data != nullptr) RIDGELINE_CHECK_NOTHROW(cudaFree(m_data));
    m_data = nullptr;
    m_bytes = 0;
  }
  void* m_data = nullptr;
  size_t m_bytes = 0;
};

/// Returns device scratch memory of at least the given bytes, valid until the next call.
using ScratchFn = std::function<void*(size_t)>;
/// Returns a device copy of `bytes` host bytes, ordered before the kernels launched after it on
/// the stream it was made for, valid until the next call.
using UploadFn = std::function<const void*(const void* host, size_t bytes)>;

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <> __device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_float(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half from_float(float v) {
  return __float2half_rn(v);
}

/// The 8 two-byte elements of a 16-byte word as floats (a vector load's conversion).
template <typename T> __device__ __forceinline__ void unpack8(const uint4& raw, float (&v)[8]) {
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    v[i] = to_float(e[i]);
}

/// gelu(x), the tanh approximation (as the host backend): the element-wise kernel's and the
/// skinny GEMM's epilogue's.
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float k = 0.7978845608028654f; // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
/// silu(gate) * up with the fast exponential and division (a few ulp, far below the bf16 or fp16
/// rounding of the result): the full-precision pair sat on the critical path of small decode
/// steps (docs/FINDINGS.md). The element-wise kernel's and the skinny GEMM's epilogue's.
__device__ __forceinline__ float swiglu_of(float gate, float up) {
  return __fdividef(gate, 1.0f + __expf(-gate)) * up;
}

/// Lets a kernel launched after this one as a programmatic dependent (see Launch) start now,
/// while this one runs: the dependent still waits for this kernel to complete before it reads
/// anything this kernel wrote. A no-op before compute capability 9.0 and where no dependent was
/// launched that way. The dependent takes SM room as soon as it launches, so a kernel of a
/// forward step calls it once its grid's work no longer needs that room: the small ones (norms,
/// element-wise maps, the decode combine) first thing, the decode attention after its wait, the
/// skinny GEMMs after their last weights are read.
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/// Waits for the kernel this one was launched as a programmatic dependent of (a no-op
/// otherwise): everything it wrote is visible after this.
__device__ __forceinline__ void wait_for_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/// Where a kernel is launched: its stream, and whether as a programmatic dependent launch
/// (compute capability 9.0 and later), which may start it while the kernel before it in the
/// stream still runs (once every CTA of that one has called allow_dependents() or ended). Such a
/// kernel calls wait_for_primary() before it touches memory that kernel or any before it may
/// write. Three read before it: the skinny GEMM its weights and the norms their parameters,
/// which nothing in a forward step writes, and the decode attention the cache rows written
/// before the step's QKV GEMM (see decode_split_kernel). A stream converts to an ordinary launch.
struct Launch {
  Launch(cudaStream_t s, bool as_dependent = false) : stream(s), programmatic(as_dependent) {}
  cudaStream_t stream;
  bool programmatic;
};

/// Launches `kernel` as `where` says.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Launch where,
                   Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = where.stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  if (where.programmatic) {
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  RIDGELINE_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

/// Whether every row of `t` can be read in 16-byte vectors of 8 two-byte elements.
inline bool rows_vectorisable(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && t.ld % 8 == 0 && t.cols % 8 == 0;
}

/// Blocks for a grid-stride loop over `items` with `threads` per block.
inline unsigned grid_for(int64_t items, int threads) {
  const int64_t blocks = (items + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > (1 << 20) ? (1 << 20) : blocks));
}

/// Element-wise ops on one or two inputs (see map()).
enum class MapOp { gelu, swiglu, add, copy, gelu_backward, axpy };

/// t(r, c) = round(generate(key, row0 + r, col0 + c)).
void fill_random(const Tensor& t, const GenKey& key, int64_t row0, int64_t col0, cudaStream_t s);
/// t(r, c) = round(value).
void fill_value(const Tensor& t, float value, cudaStream_t s);
/// gelu: y = gelu(a); add: y = a + b; swiglu: y = silu(a) * b (a, b: the two halves); copy:
/// y = a; gelu_backward: y = b * gelu'(a); axpy: y = b + alpha * a (y may be b).
void map(MapOp op, const Tensor& a, const Tensor& b, const Tensor& y, Launch where,
         float alpha = 0.0f);
/// out row r = x row index[r] (index: out.rows device entries).
void gather_rows(const Tensor& x, const int64_t* index, const Tensor& out, cudaStream_t s);
/// out row index[r] = rows row r (index: rows.rows device entries, distinct).
void scatter_rows(const Tensor& rows, const int64_t* index, const Tensor& out, cudaStream_t s);
/// For each of `groups` destinations g: y row dest[g] += the sum over j in [offsets[g],
/// offsets[g + 1]) of weight[j] * rows row src[j], in j's order, in fp32, rounded once (device
/// arrays).
void scatter_add_rows(const Tensor& rows, const int64_t* src, const int64_t* dest,
                      const int64_t* offsets, const float* weight, int64_t groups, const Tensor& y,
                      cudaStream_t s);
/// The most experts route_top_k chooses per token.
constexpr int kMaxRouteTopK = 32;
/// For each row t of logits [tokens, experts]: expert[t k + j] = the j-th of the k columns of
/// highest score (the logit, or with `sigmoid` its sigmoid; ties to the lower column) and
/// weight[t k + j] its combine weight (the softmax over the k chosen logits, or the k sigmoids
/// over their sum). k <= kMaxRouteTopK; expert and weight: device arrays of tokens x k.
void route_top_k(const Tensor& logits, int top_k, bool sigmoid, int32_t* expert, float* weight,
                 cudaStream_t s);
/// y = a + round(b + c): b and c two partial sums (add(b, c) then add(a, .) in one pass).
void add_partials(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& y, Launch where);
/// Layer norm when beta is non-null, RMS norm otherwise; one block per row, fp32 sums. With
/// `residual` (and `sum`), the row normalised is x + residual, which is also stored in `sum`
/// (may be x): the residual add fused with the norm after it. With `residual2` too, x +
/// round(residual + residual2): two partial sums added first, as add_partials() adds them.
void norm(const Tensor& x, const Tensor& gamma, const Tensor* beta, const Tensor& y, float eps,
          Launch where, const Tensor* residual = nullptr, const Tensor* sum = nullptr,
          const Tensor* residual2 = nullptr);
/// Layer norm backward when dbeta is non-null, RMS norm backward otherwise (see
/// Backend::layer_norm_backward()): dx one block per row, dgamma/dbeta as fp32 partial column
/// sums over chunks of rows in `scratch`, then summed per column into the dtype gradients.
void norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, const Tensor& dx,
                   const Tensor& dgamma, const Tensor* dbeta, float eps, bool accumulate,
                   const ScratchFn& scratch, cudaStream_t s);
/// d_gate_up [m, 2f] of swiglu(gate_up) from dy [m, f].
void swiglu_backward(const Tensor& gate_up, const Tensor& dy, const Tensor& d_gate_up,
                     cudaStream_t s);
/// Rotate-half rotary embedding in place (see Backend::rotary()); `inverse` rotates back. With
/// `positions` (x.rows device entries) row r is at positions[r] and seq_len, pos0 are not read.
void rotary(const Tensor& x, int64_t heads, int64_t head_dim, int64_t seq_len, int64_t pos0,
            float theta, bool inverse, Launch where, const int64_t* positions = nullptr);
/// probs(r, j) = softmax_j(scale * scores(r, j)) over the keys row r sees (causal: j <= context -
/// seq + r % seq; otherwise all), zero beyond; `rows` rows of `context` fp32 scores in, `dtype`
/// probabilities out (same layout). With `lse`, row r's natural log-sum-exp of the scaled scores
/// goes to lse[(r / seq) * lse_stride + r % seq].
void causal_softmax(const float* scores, void* probs, DType dtype, int64_t rows, int64_t seq,
                    int64_t context, bool causal, float scale, float* lse, int64_t lse_stride,
                    cudaStream_t s);
/// probs(r, j) = exp(scale * scores(r, j) - lse_r) over the keys row r sees, zero beyond (lse
/// indexed as in causal_softmax()).
void probs_from_lse(const float* scores, void* probs, DType dtype, int64_t rows, int64_t seq,
                    int64_t context, bool causal, float scale, const float* lse, int64_t lse_stride,
                    cudaStream_t s);
/// probs(r, j) = probs(r, j) * (dprobs(r, j) - delta_r) * scale in place (the softmax backward;
/// delta indexed as lse in causal_softmax()).
void softmax_grad(void* probs, const float* dprobs, DType dtype, int64_t rows, int64_t seq,
                  int64_t context, float scale, const float* delta, int64_t delta_stride,
                  cudaStream_t s);
/// delta[(b * heads + h) * seq + i] = sum over the head's columns of dout * out, row b * seq + i
/// (fp32 [batch, heads, seq]: the attention backward's rowsum(dO * O)).
void attention_delta(const AttentionShape& shape, const Tensor& out, const Tensor& dout,
                     float* delta, cudaStream_t s);
/// Fused attention: flash-style tiled kernel for seq > 1, split-context decode for seq == 1.
/// With `lse` (fp32 [batch, heads, seq]) the flash kernel runs for every seq and also writes
/// each query row's natural log-sum-exp of the scaled scores (attention_train). Only the decode
/// split kernel takes a programmatic launch (`where`); the others launch as usual on its stream.
void attention_fused(const AttentionShape& shape, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& out, int sm_count, const ScratchFn& scratch, Launch where,
                     float* lse = nullptr);
/// Fused decode attention of sequences of different contexts (Backend::attention_decode_ragged())
/// in one launch of the decode split kernel over a work list of every sequence's context splits
/// (its device copy from `upload`, made for `s`), then the combine where a sequence was split.
/// Ordinary launches on `s`.
void attention_fused_decode_ragged(const AttentionShape& shape,
                                   const std::vector<int64_t>& contexts, const Tensor& q,
                                   const Tensor& k, const Tensor& v, const Tensor& out,
                                   int sm_count, const ScratchFn& scratch, const UploadFn& upload,
                                   cudaStream_t s);
/// Fused attention backward (prefill shapes): FlashAttention-2 style on tensor cores, one CTA per
/// (sequence, KV head, 64-key block) looping over the group's query heads and query blocks,
/// P recomputed from `lse`; dK, dV summed in registers, dQ in an fp32 scratch by atomics.
void attention_fused_backward(const AttentionShape& shape, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& dout,
                              const float* lse, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv, const ScratchFn& scratch, cudaStream_t s);
/// The memory-roof kernels of memory_roofs.cu (see Backend::memory_pass()) over `bytes`, a
/// multiple of 16, of 16-byte-aligned buffers in uint4 words, a word per thread. Read stores into
/// `sink` only when its XOR of the words hits one fixed pattern; the store keeps the loads alive.
void memory_pass(Backend::MemoryPass kind, const void* src, void* dst, size_t bytes, uint4* sink,
                 cudaStream_t s);
/// The skinny GEMM of decode (skinny_gemm.cu): c[m, n] = sum_k a[m, k] * w[n, k], the
/// weights row-major [n, k] (Backend::gemm(a, w, c)), at most kMaxRows activation rows.
/// What the CUDA-core skinny kernel (at most kGemvRows rows) does with its sums instead of
/// storing them: decode's small op after a GEMM, folded into the GEMM's kernel. Sums are fp32;
/// each is rounded to the element type once, where the op's result is stored.
struct GemvEpilogue {
  enum class Kind : uint8_t {
    store,         ///< c[i, j] = sum
    gelu,          ///< c[i, j] = gelu(sum) (the tanh approximation)
    residual,      ///< c[i, j] += sum (c is the residual stream)
    swiglu,        ///< c[i, j] = silu(sum_j) * sum_{j + n/2}: n/2 columns (gate rows, then up rows)
    rotary_append, ///< heads of head_dim columns; see below
  };
  Kind kind = Kind::store;
  /// rotary_append: the first `rotated_heads` heads rotate (NeoX halves, as Backend::rotary) at
  /// position `pos` (base 2^log2_theta); every column goes to c, and column j >= `cache_col0` also
  /// to cache[(i * cache_seq_rows + pos) * cache_ld + j - cache_col0] (row i's sequence's slot).
  int64_t head_dim = 0, rotated_heads = 0, pos = 0;
  double log2_theta = 0.0; ///< log2 of the rotary base
  void* cache = nullptr;
  int64_t cache_ld = 0, cache_seq_rows = 0, cache_col0 = 0;
  /// The RMS norm of the input folded in front (any kind above, at most SkinnyGemm::kNormRows
  /// rows), when set: the kernel multiplies w by a * norm_gamma and scales each sum by its row's
  /// 1 / sqrt(mean(a^2) + norm_eps), so the norm of a is never written.
  const void* norm_gamma = nullptr;
  float norm_eps = 0.0f;
  /// Pairs of columns meet in one thread: (j, j + n/2) for swiglu, a head's (i, i + d/2) for
  /// rotary_append.
  __host__ __device__ bool paired() const {
    return kind == Kind::swiglu || kind == Kind::rotary_append;
  }
  const char* name() const;
};

struct SkinnyGemm {
  static constexpr int64_t kMaxRows = 16;
  /// At most this many rows take the CUDA-core kernel (one to eight warps per weight row), more
  /// the MMA one.
  static constexpr int64_t kGemvRows = 4;
  /// At most this many rows take an RMS norm folded in front (GemvEpilogue::norm_gamma).
  static constexpr int64_t kNormRows = 2;
  DType dtype = DType::bf16; ///< of a, w and c
  const void* a = nullptr;
  int64_t lda = 0;
  const void* w = nullptr;
  int64_t ldw = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t m = 0, n = 0, k = 0;
  GemvEpilogue epilogue; ///< anything but store: at most kGemvRows rows
  /// Whether the kernel takes it: bf16/fp16, 1 <= m <= 16, k and both input strides multiples of
  /// 8 elements, a and w 16-byte aligned; an epilogue other than store at most kGemvRows rows,
  /// swiglu an even n, rotary_append whole heads of an even head_dim; a norm folded in front at
  /// most kNormRows rows, its gamma 16-byte aligned.
  bool fits() const;
  /// 8-column tiles per warp of the MMA kernel: the widest that still gives every SM two CTAs.
  int tiles_per_warp(int sm_count) const;
  /// The kernel configuration in words, for the record of GEMM choices.
  std::string describe(int sm_count) const;
};
/// Launches the skinny GEMM (p.fits() must hold). As a programmatic dependent launch it loads
/// its first weights before it waits for the kernel before it.
void skinny_gemm(const SkinnyGemm& p, int sm_count, Launch where);

/// `count` launches of an empty <<<1, 1>>> kernel on `s` (the launch floor).
void empty_kernels(int count, cudaStream_t s);

} // namespace cuda
} // namespace ridgeline
