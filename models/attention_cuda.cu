// Fused attention on the GPU. Prefill (seq > 1): a flash-attention-style kernel, one CTA per
// 128 query rows of one head, K/V streamed through shared memory in 64-key tiles (cp.async,
// double-buffered), S = QK^T and O += PV on tensor cores (mma.sync m16n8k16, fp32 accumulate),
// online softmax in registers: the seq x context score matrix never exists; for training it also
// writes each row's log-sum-exp. Decode (seq == 1): the query heads of one KV head are the rows
// of a tensor-core tile, so each K/V element is read once for its whole group, and the context
// is split across CTAs so that even batch * kv_heads = 1 fills every SM (see
// decode_split_kernel). Backward (prefill): a FlashAttention-2 style tensor-core kernel per
// 128-key block (see flash_backward_kernel).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "models/cuda/common.cuh"
#include "models/cuda/hopper.cuh"
#include "models/cuda/mma_sm80.cuh"

namespace ridgeline {
namespace cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// PTX wrappers (sm_80+; the MMA is in mma_sm80.cuh): ldmatrix and asynchronous global -> shared
// copies.

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// 16-byte copy; `valid` false zero-fills the destination (rows past the context or the tile).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
/// 4-byte copy through L1; `valid` false zero-fills the destination.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::);
}

template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    r = *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    r = *reinterpret_cast<uint32_t*>(&v);
  }
  return r;
}

/// The A fragment of a 16 x 16 product from two 16 x 8 fp32 accumulator tiles (columns 0-7
/// and 8-15): an m16n8k16 accumulator holds exactly the elements its A fragment needs.
template <typename T>
__device__ __forceinline__ void pack_a(uint32_t (&a)[4], const float (&lo)[4],
                                       const float (&hi)[4]) {
  a[0] = pack2<T>(lo[0], lo[1]);
  a[1] = pack2<T>(lo[2], lo[3]);
  a[2] = pack2<T>(hi[0], hi[1]);
  a[3] = pack2<T>(hi[2], hi[3]);
}

// Shared-memory tiles are [rows][D] with 16-byte chunks XOR-swizzled by (row % 8): the 8 rows
// an ldmatrix reads at one logical chunk land in 8 different bank groups.
template <int D> __device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

/// Online softmax over one key tile of a warp's 16-row MMA tile (this thread's rows g and g + 8
/// as half 0 and 1). `s` holds raw scores (-inf where masked); `scale` takes them to log2 units,
/// fused into the exponent's FMA. Updates the running max (log2 units, reduced over the quad
/// that shares a row) and the running sum, exponentiates the tile in place, and gives `alpha`,
/// the factor the output accumulators must be rescaled by. A row with no visible key yet keeps
/// max -inf and contributes nothing.
template <int kNTiles>
__device__ __forceinline__ void softmax_tile(float (&s)[kNTiles][4], float (&row_max)[2],
                                             float (&row_sum)[2], float (&alpha)[2], float scale) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float raw = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
      raw = fmaxf(raw, fmaxf(s[nt][2 * half], s[nt][2 * half + 1]));
    raw = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 1));
    raw = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 2));
    const float mx = fmaxf(row_max[half], raw * scale); // scale > 0 keeps the order
    const float base = mx == -INFINITY ? 0.0f : mx;
    alpha[half] = exp2f(row_max[half] - base);
    row_max[half] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      s[nt][2 * half] = exp2f(fmaf(s[nt][2 * half], scale, -base));
      s[nt][2 * half + 1] = exp2f(fmaf(s[nt][2 * half + 1], scale, -base));
      sum += s[nt][2 * half] + s[nt][2 * half + 1];
    }
    row_sum[half] = row_sum[half] * alpha[half] + sum;
  }
}

/// Multiplies this thread's two output rows by their softmax rescale factors.
template <int kDTiles>
__device__ __forceinline__ void rescale_rows(float (&o_acc)[kDTiles][4], const float (&alpha)[2]) {
#pragma unroll
  for (int dt = 0; dt < kDTiles; ++dt) {
    o_acc[dt][0] *= alpha[0];
    o_acc[dt][1] *= alpha[0];
    o_acc[dt][2] *= alpha[1];
    o_acc[dt][3] *= alpha[1];
  }
}

/// softmax_tile() with the output rescaled at once (kernels with no MMA still reading O).
template <int kNTiles, int kDTiles>
__device__ __forceinline__ void online_softmax(float (&s)[kNTiles][4], float (&row_max)[2],
                                               float (&row_sum)[2], float (&o_acc)[kDTiles][4],
                                               float scale) {
  float alpha[2];
  softmax_tile<kNTiles>(s, row_max, row_sum, alpha, scale);
  rescale_rows<kDTiles>(o_acc, alpha);
}

struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  int64_t q_ld, k_ld, v_ld, o_ld;
  int seq, context, capacity, heads, group;
  int offset;       ///< query i sees keys j <= offset + i (causal: context - seq; else context - 1)
  float scale_log2; ///< log2(e) / sqrt(head_dim): the softmax runs on exp2
  float* lse;       ///< [batch, heads, seq] natural log-sum-exp of the scaled scores, or null
};

/// Masks the keys (n0..) of a warp's 16-row score tile that a row may not see: past the row's
/// diagonal or past the context. Only tiles that reach past the warp's first row's last visible
/// key, or past the context, pay for it.
template <int kNTiles>
__device__ __forceinline__ void mask_tile(float (&s)[kNTiles][4], const FlashParams& p, int n0,
                                          int warp_row0, int row_lo, int t) {
  if (n0 + kNTiles * 8 - 1 <= p.offset + warp_row0 && n0 + kNTiles * 8 <= p.context) return;
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = n0 + nt * 8 + 2 * t + (e & 1);
      const int row = e < 2 ? row_lo : row_lo + 8;
      if (key > p.offset + row || key >= p.context) s[nt][e] = -INFINITY;
    }
  }
}

/// Finishes the row sums over the quad, normalises, and stores this thread's rows that exist
/// (row_lo and row_lo + 8 of head h of sequence b), with their log-sum-exp when asked.
template <typename T, int kDTiles>
__device__ __forceinline__ void store_rows(const FlashParams& p, const float (&o_acc)[kDTiles][4],
                                           const float (&row_max)[2], const float (&row_sum)[2],
                                           int row_lo, int b, int h, int t) {
  constexpr int D = kDTiles * 8;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.0f / sum;
    const int row = row_lo + 8 * half;
    if (row >= p.seq) continue;
    if (p.lse != nullptr && t == 0) // row_max is in log2 units of the scaled scores
      p.lse[(static_cast<int64_t>(b) * p.heads + h) * p.seq + row] =
          (row_max[half] + log2f(sum)) * 0.6931471805599453f;
    T* out = static_cast<T*>(p.o) + (static_cast<int64_t>(b) * p.seq + row) * p.o_ld +
             static_cast<int64_t>(h) * D;
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      *reinterpret_cast<uint32_t*>(out + dt * 8 + 2 * t) =
          pack2<T>(o_acc[dt][2 * half] * inv, o_acc[dt][2 * half + 1] * inv);
    }
  }
}

constexpr int kFlashWarps = 8;
constexpr int kFlashM = 16 * kFlashWarps; // query rows per CTA, 16 per warp
constexpr int kFlashN = 64;               // keys per tile
constexpr int kFlashThreads = 32 * kFlashWarps;

template <int D> constexpr int flash_smem_bytes() {
  return (kFlashM * D + 4 * kFlashN * D) * 2; // Q, then K and V double-buffered
}

/// Issues cp.async loads of `rows` x D elements starting at logical row `row0` of a head.
template <typename T, int D, int kRows, int kThreads = kFlashThreads>
__device__ __forceinline__ void load_tile(T* smem, const T* base, int64_t ld, int row0,
                                          int valid_rows) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < valid_rows;
    const T* src = base + (valid ? (static_cast<int64_t>(row0 + r) * ld + c * 8) : 0);
    cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(smem + swizzle<D>(r, c))), src,
                valid);
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kFlashThreads, 1) flash_prefill_kernel(FlashParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + kFlashM * D;     // [2][kFlashN][D]
  T* v_s = k_s + 2 * kFlashN * D; // [2][kFlashN][D]

  const int m_blocks = (p.seq + kFlashM - 1) / kFlashM;
  // The longest (last) query tiles go first so that the causal tail does not straggle.
  const int m_block = m_blocks - 1 - static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.x) / p.heads;
  const int h = static_cast<int>(blockIdx.x) % p.heads;
  const int kvh = h / p.group;
  const int m0 = m_block * kFlashM;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int offset = p.offset;

  const T* q_base = static_cast<const T*>(p.q) + (static_cast<int64_t>(b) * p.seq) * p.q_ld +
                    static_cast<int64_t>(h) * D;
  const T* k_base = static_cast<const T*>(p.k) + (static_cast<int64_t>(b) * p.capacity) * p.k_ld +
                    static_cast<int64_t>(kvh) * D;
  const T* v_base = static_cast<const T*>(p.v) + (static_cast<int64_t>(b) * p.capacity) * p.v_ld +
                    static_cast<int64_t>(kvh) * D;

  const int last_row = min(m0 + kFlashM, p.seq) - 1;
  const int keys = min(p.context, offset + last_row + 1);
  const int n_blocks = (keys + kFlashN - 1) / kFlashN;

  load_tile<T, D, kFlashM>(q_s, q_base, p.q_ld, m0, p.seq);
  cp_async_commit();
  load_tile<T, D, kFlashN>(k_s, k_base, p.k_ld, 0, p.context);
  load_tile<T, D, kFlashN>(v_s, v_base, p.v_ld, 0, p.context);
  cp_async_commit();

  constexpr int kSteps = D / 16;       // k-steps of QK^T
  constexpr int kNTiles = kFlashN / 8; // 8-key tiles of S
  constexpr int kDTiles = D / 8;       // 8-column tiles of O
  uint32_t q_frag[kSteps][4];
  float o_acc[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i)
    o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f}; // per-thread partial sums, reduced over the quad at the end

  const int g = lane / 4, t = lane % 4;
  const int row_lo = m0 + warp * 16 + g; // this thread's two query rows

  for (int n = 0; n < n_blocks; ++n) {
    cp_async_wait_all();
    __syncthreads(); // tile n is in; every warp is done with the buffer tile n + 1 will use
    if (n == 0) {
#pragma unroll
      for (int ks = 0; ks < kSteps; ++ks) {
        const int r = warp * 16 + (lane % 16);
        const int c = ks * 2 + lane / 16;
        ldmatrix_x4(q_frag[ks],
                    static_cast<uint32_t>(__cvta_generic_to_shared(q_s + swizzle<D>(r, c))));
      }
    }
    if (n + 1 < n_blocks) {
      const int buf = (n + 1) & 1;
      load_tile<T, D, kFlashN>(k_s + buf * kFlashN * D, k_base, p.k_ld, (n + 1) * kFlashN,
                               p.context);
      load_tile<T, D, kFlashN>(v_s + buf * kFlashN * D, v_base, p.v_ld, (n + 1) * kFlashN,
                               p.context);
      cp_async_commit();
    }
    const T* kt = k_s + (n & 1) * kFlashN * D;
    const T* vt = v_s + (n & 1) * kFlashN * D;
    const uint32_t k_addr = static_cast<uint32_t>(__cvta_generic_to_shared(kt));
    const uint32_t v_addr = static_cast<uint32_t>(__cvta_generic_to_shared(vt));

    // S = Q K^T for this warp's 16 rows x 64 keys.
    float s[kNTiles][4];
#pragma unroll
    for (int i = 0; i < kNTiles; ++i)
      s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
#pragma unroll
      for (int nt = 0; nt < kNTiles; nt += 2) {
        uint32_t kb[4];
        const int r = nt * 8 + (lane / 16) * 8 + (lane % 8);
        const int c = ks * 2 + (lane / 8) % 2;
        ldmatrix_x4(kb, k_addr + 2 * swizzle<D>(r, c));
        mma_16816<T>(s[nt], q_frag[ks], kb[0], kb[1]);
        mma_16816<T>(s[nt + 1], q_frag[ks], kb[2], kb[3]);
      }
    }

    mask_tile<kNTiles>(s, p, n * kFlashN, m0 + warp * 16, row_lo, t);
    online_softmax<kNTiles, kDTiles>(s, row_max, row_sum, o_acc, p.scale_log2);

    // O += P V: the S accumulators are exactly the A fragments of P once packed to 16 bits.
#pragma unroll
    for (int kk = 0; kk < kFlashN / 16; ++kk) {
      uint32_t pa[4];
      pack_a<T>(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int dt = 0; dt < kDTiles; dt += 2) {
        uint32_t vb[4];
        const int r = kk * 16 + (lane % 16);
        const int c = dt + lane / 16;
        ldmatrix_x4_trans(vb, v_addr + 2 * swizzle<D>(r, c));
        mma_16816<T>(o_acc[dt], pa, vb[0], vb[1]);
        mma_16816<T>(o_acc[dt + 1], pa, vb[2], vb[3]);
      }
    }
  }

  store_rows<T, kDTiles>(p, o_acc, row_max, row_sum, row_lo, b, h, t);
}

// ---------------------------------------------------------------------------------------------
// Prefill on Hopper (sm_90a), FlashAttention-3 style. One CTA of three warpgroups per 128
// query rows of one head:
//   - a producer warpgroup, whose one thread loads Q once and streams 128-key K and V tiles
//     through a two-stage ring by TMA (128-byte swizzled boxes of 64 columns, out-of-range rows
//     zero-filled by the hardware), each stage with a "full" and an "empty" mbarrier;
//   - two consumer warpgroups of 64 query rows each, which compute S = Q K^T from shared memory
//     and O += P V with P in registers on warpgroup MMA (wgmma m64n128k16, fp32 accumulate).
// A consumer overlaps its softmax with its tensor cores: it issues tile n's S = Q K^T and tile
// n - 1's O += P V together, waits for S alone, and runs tile n's softmax while P V is still in
// flight; O is rescaled once that product has landed. The producer gives its registers to the
// consumers (setmaxnreg), which hold S, O and P (about 160 registers a thread). Tiles past a
// causal CTA's diagonal are never loaded; only the tiles a row's diagonal or the context end cut
// are masked.

// [[maybe_unused]]: a build without sm_90a code compiles the kernels' bodies out.
constexpr int kSm90M = 128;                         // query rows per CTA, 64 per consumer warpgroup
constexpr int kSm90N = 128;                         // keys per K/V tile
constexpr int kSm90D = 128;                         // head dimension (two 64-column swizzle atoms)
constexpr int kSm90Threads = 3 * 128;               // producer + 2 consumer warpgroups
constexpr int kSm90Stages = 2;                      // K/V ring depth
constexpr int kSm90TileBytes = kSm90N * kSm90D * 2; // one Q, K or V tile: 32 KiB
[[maybe_unused]] constexpr int kSm90HalfBytes =
    kSm90TileBytes / 2; // its 64-column half, 128-byte rows
constexpr int kSm90BarrierOffset = (1 + 2 * kSm90Stages) * kSm90TileBytes;
[[maybe_unused]] constexpr int kSm90SmemBytes =
    kSm90BarrierOffset + 128 + 1024; // + barriers + alignment slack
static_assert(kSm90M == kSm90N, "Q and K/V tiles share one box shape");

struct Sm90Barriers {
  uint64_t q_full;
  uint64_t k_full[kSm90Stages], v_full[kSm90Stages];
  uint64_t k_empty[kSm90Stages], v_empty[kSm90Stages];
};

template <typename T>
__global__ void __launch_bounds__(kSm90Threads, 1)
    flash_prefill_sm90_kernel(const __grid_constant__ CUtensorMap tq,
                              const __grid_constant__ CUtensorMap tk,
                              const __grid_constant__ CUtensorMap tv, FlashParams p) {
#if RIDGELINE_SM90A_DEVICE
  using namespace hopper;
  constexpr int D = kSm90D;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* const smem = align_1024(smem_raw);
  const uint32_t base = smem_addr(smem);
  const uint32_t q_s = base;
  auto k_s = [&](int stage) { return base + (1 + stage) * kSm90TileBytes; };
  auto v_s = [&](int stage) { return base + (1 + kSm90Stages + stage) * kSm90TileBytes; };
  auto* bars = reinterpret_cast<Sm90Barriers*>(smem + kSm90BarrierOffset);
  auto bar = [](uint64_t& b) { return smem_addr(&b); };

  const int m_blocks = (p.seq + kSm90M - 1) / kSm90M;
  const int m_block = m_blocks - 1 - static_cast<int>(blockIdx.y); // longest tiles first
  const int b = static_cast<int>(blockIdx.x) / p.heads;
  const int h = static_cast<int>(blockIdx.x) % p.heads;
  const int kvh = h / p.group;
  const int m0 = m_block * kSm90M;
  const int last_row = min(m0 + kSm90M, p.seq) - 1;
  const int keys = min(p.context, p.offset + last_row + 1);
  const int n_blocks = (keys + kSm90N - 1) / kSm90N;

  if (threadIdx.x == 0) {
    prefetch_tensor_map(&tq);
    prefetch_tensor_map(&tk);
    prefetch_tensor_map(&tv);
    mbarrier_init(bar(bars->q_full), 1);
    for (int s = 0; s < kSm90Stages; ++s) {
      mbarrier_init(bar(bars->k_full[s]), 1);
      mbarrier_init(bar(bars->v_full[s]), 1);
      mbarrier_init(bar(bars->k_empty[s]), 2 * 128); // every consumer thread releases
      mbarrier_init(bar(bars->v_empty[s]), 2 * 128);
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    warpgroup_registers_dec<24>();
    if (threadIdx.x != 0) return;
    mbarrier_arrive_expect_tx(bar(bars->q_full), kSm90TileBytes);
    for (int half = 0; half < 2; ++half)
      tma_load_3d(q_s + half * kSm90HalfBytes, &tq, bar(bars->q_full), h * D + half * 64, m0, b);
    for (int n = 0; n < n_blocks; ++n) {
      const int s = n % kSm90Stages;
      const uint32_t empty_parity = ((n / kSm90Stages) & 1) ^ 1;
      mbarrier_wait(bar(bars->k_empty[s]), empty_parity);
      mbarrier_arrive_expect_tx(bar(bars->k_full[s]), kSm90TileBytes);
      for (int half = 0; half < 2; ++half)
        tma_load_3d(k_s(s) + half * kSm90HalfBytes, &tk, bar(bars->k_full[s]), kvh * D + half * 64,
                    n * kSm90N, b);
      mbarrier_wait(bar(bars->v_empty[s]), empty_parity);
      mbarrier_arrive_expect_tx(bar(bars->v_full[s]), kSm90TileBytes);
      for (int half = 0; half < 2; ++half)
        tma_load_3d(v_s(s) + half * kSm90HalfBytes, &tv, bar(bars->v_full[s]), kvh * D + half * 64,
                    n * kSm90N, b);
    }
    return;
  }
  warpgroup_registers_inc<240>();

  const int consumer = warpgroup - 1;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int t = lane % 4;
  const int warp_row0 = m0 + consumer * 64 + warp * 16;
  const int row_lo = warp_row0 + lane / 4;
  // This warpgroup's 64 Q rows: 64 x 128 bytes into each 64-column half.
  const uint32_t q_rows = q_s + consumer * 64 * 128;

  constexpr int kNTiles = kSm90N / 8; // S: 16 n8 tiles per warp
  constexpr int kDTiles = D / 8;      // O: 16 n8 tiles per warp
  float s_acc[kNTiles][4];
  float o_acc[kDTiles][4];
  uint32_t pa[kSm90N / 16][4]; // P as the A fragments of 8 k16 steps
#pragma unroll
  for (int i = 0; i < kDTiles; ++i)
    o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};
  float alpha[2];

  // S = Q K^T: 8 k16 steps, 4 inside each 128-byte swizzle atom (32 bytes apart).
  auto issue_qk = [&](int s) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t koff = (ks / 4) * kSm90HalfBytes + (ks % 4) * 32;
      wgmma_m64n128k16_ss<T>(s_acc, smem_desc_sw128(q_rows + koff, 16, 1024),
                             smem_desc_sw128(k_s(s) + koff, 16, 1024), ks > 0);
    }
  };
  // O += P V: 8 k16 steps of 16 keys (2048 bytes of V rows each); V is MN-major, its two
  // 64-column halves one lbo apart.
  auto issue_pv = [&](int s) {
#pragma unroll
    for (int kk = 0; kk < kSm90N / 16; ++kk)
      wgmma_m64n128k16_rs_mn<T>(o_acc, pa[kk],
                                smem_desc_sw128(v_s(s) + kk * 16 * 128, kSm90HalfBytes, 1024));
  };
  auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < kSm90N / 16; ++kk)
      pack_a<T>(pa[kk], s_acc[2 * kk], s_acc[2 * kk + 1]);
  };

  // The two consumers take turns on the tensor cores (named barriers 1 and 2: "consumer c may
  // issue"), so that one's softmax runs while the other's products do. Consumer 0 goes first;
  // every issue phase hands the turn over, but consumer 1's last (nothing would take it).
  const int phases = n_blocks + 1; // Q K^T of tile 0, then n_blocks - 1 pairs, then the last P V
  int phase = 0;
  auto my_turn = [&] { named_barrier_sync(1 + consumer, 256); };
  auto their_turn = [&] {
    if (consumer == 0 || ++phase < phases) named_barrier_arrive(2 - consumer, 256);
  };
  if (consumer == 1) named_barrier_arrive(1, 256);

  mbarrier_wait(bar(bars->q_full), 0);
  mbarrier_wait(bar(bars->k_full[0]), 0);
  my_turn();
  wgmma_fence();
  issue_qk(0);
  wgmma_commit();
  their_turn();
  wgmma_wait<0>();
  fence_registers(s_acc);
  mbarrier_arrive(bar(bars->k_empty[0]));
  mask_tile<kNTiles>(s_acc, p, 0, warp_row0, row_lo, t);
  softmax_tile<kNTiles>(s_acc, row_max, row_sum, alpha, p.scale_log2);
  pack_p();

  for (int n = 1; n < n_blocks; ++n) {
    const int s = n % kSm90Stages, sp = (n - 1) % kSm90Stages;
    mbarrier_wait(bar(bars->k_full[s]), (n / kSm90Stages) & 1);
    mbarrier_wait(bar(bars->v_full[sp]), ((n - 1) / kSm90Stages) & 1);
    my_turn();
    wgmma_fence();
    issue_qk(s);
    wgmma_commit();
    issue_pv(sp);
    wgmma_commit();
    their_turn();
    wgmma_wait<1>(); // S of tile n is in; P V of tile n - 1 may still run
    fence_registers(s_acc);
    mbarrier_arrive(bar(bars->k_empty[s]));
    mask_tile<kNTiles>(s_acc, p, n * kSm90N, warp_row0, row_lo, t);
    softmax_tile<kNTiles>(s_acc, row_max, row_sum, alpha, p.scale_log2);
    wgmma_wait<0>();
    fence_registers(o_acc);
    fence_registers(pa);
    mbarrier_arrive(bar(bars->v_empty[sp]));
    rescale_rows<kDTiles>(o_acc, alpha);
    pack_p();
  }
  const int s_last = (n_blocks - 1) % kSm90Stages;
  mbarrier_wait(bar(bars->v_full[s_last]), ((n_blocks - 1) / kSm90Stages) & 1);
  my_turn();
  wgmma_fence();
  issue_pv(s_last);
  wgmma_commit();
  their_turn();
  wgmma_wait<0>();
  fence_registers(o_acc);

  store_rows<T, kDTiles>(p, o_acc, row_max, row_sum, row_lo, b, h, t);
#else
  __trap(); // launched only where the sm_90a build of this kernel runs
#endif
}

// ---------------------------------------------------------------------------------------------
// Backward (FlashAttention-2 style). One CTA of 8 warps owns 128 keys of one KV head; each warp
// owns 16 of them and keeps their dK and dV rows in registers while the CTA walks every query
// block of every query head of the group that sees those keys (causal: the blocks before the
// diagonal are skipped), Q and dO double-buffered through shared memory by cp.async. 128 keys
// per CTA rather than 64 halve the Q and dO loads and the dQ additions per key. Per block,
// on tensor cores (mma.sync m16n8k16, fp32 accumulate), in the keys-major orientation that
// makes each warp's products row-local:
//   S^T = K Q^T, P^T = exp2(S^T log2(e) / sqrt(d) - lse), dP^T = V dO^T,
//   dS^T = P^T (dP^T - delta) / sqrt(d), dV += P^T dO, dK += dS^T Q,
// then dS^T goes through shared memory so that each warp computes 16 query rows and half the
// columns of dQ = dS K over all 128 keys and adds them to an fp32 scratch with 16-byte atomics.
// delta = rowsum(dO * O) comes from a small kernel first; a last kernel rounds the fp32 dQ into dq.

/// acc += A B^T for 16 rows of shared-memory tile A (from row a0) and kTiles * 8 rows of tile B
/// (from row b0), both [rows][D] swizzled: one warp, D / 16 k-steps of m16n8k16.
template <typename T, int D, int kTiles>
__device__ __forceinline__ void rows_times_rows_t(float (&acc)[kTiles][4], uint32_t a_addr, int a0,
                                                  uint32_t b_addr, int b0, int lane) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t a[4];
    ldmatrix_x4(a, a_addr + 2 * swizzle<D>(a0 + (lane % 16), ks * 2 + lane / 16));
#pragma unroll
    for (int nt = 0; nt < kTiles; nt += 2) {
      uint32_t b[4];
      const int r = b0 + nt * 8 + (lane / 16) * 8 + (lane % 8);
      ldmatrix_x4(b, b_addr + 2 * swizzle<D>(r, ks * 2 + (lane / 8) % 2));
      mma_16816<T>(acc[nt], a, b[0], b[1]);
      mma_16816<T>(acc[nt + 1], a, b[2], b[3]);
    }
  }
}

struct FlashBwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* dout;
  const float* lse;   ///< [batch, heads, seq], natural log
  const float* delta; ///< [batch, heads, seq]
  float* dq_acc;      ///< [batch * seq, heads * D], zeroed
  void* dk;
  void* dv;
  int64_t q_ld, k_ld, v_ld, do_ld, dk_ld, dv_ld;
  int seq, heads, kv_heads, group, offset;
  float scale_log2; ///< log2(e) / sqrt(D)
  float scale;      ///< 1 / sqrt(D)
  /// sm90 kernel: the CTAs a KV head's query heads are split across (gridDim.z); above 1 each
  /// adds its dK and dV into dk_acc and dv_acc ([batch * seq, kv_heads * D] fp32, zeroed).
  int head_splits;
  float* dk_acc;
  float* dv_acc;
};

/// Stores this thread's rows of dK and dV (keys key_lo and key_lo + 8 of KV head kvh of sequence
/// b, the m16n8 accumulator layout) as T, keys past the sequence left out.
template <typename T, int kDTiles>
__device__ __forceinline__ void
store_dk_dv(const FlashBwdParams& p, const float (&dk_acc)[kDTiles][4],
            const float (&dv_acc)[kDTiles][4], int key_lo, int b, int kvh, int t) {
  constexpr int D = kDTiles * 8;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int key = key_lo + 8 * half;
    if (key >= p.seq) continue;
    T* dk = static_cast<T*>(p.dk) + (static_cast<int64_t>(b) * p.seq + key) * p.dk_ld +
            static_cast<int64_t>(kvh) * D + 2 * t;
    T* dv = static_cast<T*>(p.dv) + (static_cast<int64_t>(b) * p.seq + key) * p.dv_ld +
            static_cast<int64_t>(kvh) * D + 2 * t;
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      *reinterpret_cast<uint32_t*>(dk + dt * 8) =
          pack2<T>(dk_acc[dt][2 * half], dk_acc[dt][2 * half + 1]);
      *reinterpret_cast<uint32_t*>(dv + dt * 8) =
          pack2<T>(dv_acc[dt][2 * half], dv_acc[dt][2 * half + 1]);
    }
  }
}

constexpr int kBwdWarps = 8;
constexpr int kBwdN = 16 * kBwdWarps; // keys per CTA, 16 per warp
constexpr int kBwdM = 64;             // query rows per step
constexpr int kBwdThreads = 32 * kBwdWarps;
constexpr int kBwdQGroups = kBwdM / 16;             // dQ: warps per 16-query-row group...
constexpr int kBwdDSplit = kBwdWarps / kBwdQGroups; // ...and head-dimension slices per row group
static_assert(kBwdWarps % kBwdQGroups == 0, "dQ splits the head dimension evenly across warps");

/// dq_acc[row][0..3] += {v0, v1, v2, v3}: one vector reduction on sm_90, four scalar ones before.
__device__ __forceinline__ void atomic_add_f4(float* dst, float v0, float v1, float v2, float v3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float4*>(dst), make_float4(v0, v1, v2, v3));
#else
  atomicAdd(dst, v0);
  atomicAdd(dst + 1, v1);
  atomicAdd(dst + 2, v2);
  atomicAdd(dst + 3, v3);
#endif
}

template <int D> constexpr int flash_bwd_smem_bytes() {
  // K, V; Q and dO double-buffered; dS^T; lse and delta double-buffered.
  return (2 * kBwdN * D + 4 * kBwdM * D + kBwdN * kBwdM) * 2 + 4 * kBwdM * 4;
}

template <typename T, int D>
__global__ void __launch_bounds__(kBwdThreads, 1) flash_backward_kernel(FlashBwdParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* k_s = reinterpret_cast<T*>(smem_raw);
  T* v_s = k_s + kBwdN * D;
  T* q_s = v_s + kBwdN * D;                                      // [2][kBwdM][D]
  T* do_s = q_s + 2 * kBwdM * D;                                 // [2][kBwdM][D]
  T* ds_s = do_s + 2 * kBwdM * D;                                // [kBwdN][kBwdM]: dS^T
  float* lse_s = reinterpret_cast<float*>(ds_s + kBwdN * kBwdM); // [2][kBwdM]
  float* delta_s = lse_s + 2 * kBwdM;                            // [2][kBwdM]

  // blockIdx.x runs over (sequence, KV head) fastest, so that under a causal mask the key
  // blocks with the most query blocks to visit (the first ones) are all started first.
  const int b = static_cast<int>(blockIdx.x) / p.kv_heads;
  const int kvh = static_cast<int>(blockIdx.x) % p.kv_heads;
  const int n0 = static_cast<int>(blockIdx.y) * kBwdN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;

  // Query i sees key j when j <= offset + i: queries before n0 - offset see none of these keys.
  const int m_blocks = (p.seq + kBwdM - 1) / kBwdM;
  const int m_first = max(0, n0 - p.offset) / kBwdM;
  const int per_head = max(0, m_blocks - m_first);
  const int steps = per_head * p.group;

  const T* k_base = static_cast<const T*>(p.k) + (static_cast<int64_t>(b) * p.seq) * p.k_ld +
                    static_cast<int64_t>(kvh) * D;
  const T* v_base = static_cast<const T*>(p.v) + (static_cast<int64_t>(b) * p.seq) * p.v_ld +
                    static_cast<int64_t>(kvh) * D;
  load_tile<T, D, kBwdN, kBwdThreads>(k_s, k_base, p.k_ld, n0, p.seq);
  load_tile<T, D, kBwdN, kBwdThreads>(v_s, v_base, p.v_ld, n0, p.seq);

  // Step i: query head kvh * group + i / per_head, query block m_first + i % per_head.
  auto issue = [&](int step, int buf) {
    const int h = kvh * p.group + step / per_head;
    const int m0 = (m_first + step % per_head) * kBwdM;
    const T* q_base = static_cast<const T*>(p.q) + (static_cast<int64_t>(b) * p.seq) * p.q_ld +
                      static_cast<int64_t>(h) * D;
    const T* do_base = static_cast<const T*>(p.dout) + (static_cast<int64_t>(b) * p.seq) * p.do_ld +
                       static_cast<int64_t>(h) * D;
    load_tile<T, D, kBwdM, kBwdThreads>(q_s + buf * kBwdM * D, q_base, p.q_ld, m0, p.seq);
    load_tile<T, D, kBwdM, kBwdThreads>(do_s + buf * kBwdM * D, do_base, p.do_ld, m0, p.seq);
    // lse and delta ride in the same cp.async group as the tiles: no thread waits on a global
    // load here while the others start the step.
    for (int i = threadIdx.x; i < 2 * kBwdM; i += kBwdThreads) {
      const int row = m0 + i % kBwdM;
      const bool valid = row < p.seq;
      const int64_t idx = valid ? (static_cast<int64_t>(b) * p.heads + h) * p.seq + row : 0;
      float* dst = (i < kBwdM ? lse_s : delta_s) + buf * kBwdM + i % kBwdM;
      cp_async_4(static_cast<uint32_t>(__cvta_generic_to_shared(dst)),
                 (i < kBwdM ? p.lse : p.delta) + idx, valid);
    }
  };
  if (steps > 0) issue(0, 0);
  cp_async_commit();

  // Queries of S^T and dP^T held at a time: half the block at D = 128 (see below).
  constexpr int kQHalf = D > 64 ? kBwdM / 2 : kBwdM;
  constexpr int kQTiles = kQHalf / 8; // their 8-query tiles
  constexpr int kDTiles = D / 8;      // 8-column tiles of dK, dV, dQ
  float dk_acc[kDTiles][4], dv_acc[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dk_acc[i][e] = dv_acc[i][e] = 0.0f;
  const uint32_t k_addr = static_cast<uint32_t>(__cvta_generic_to_shared(k_s));
  const uint32_t v_addr = static_cast<uint32_t>(__cvta_generic_to_shared(v_s));
  const uint32_t ds_addr = static_cast<uint32_t>(__cvta_generic_to_shared(ds_s));

  for (int step = 0; step < steps; ++step) {
    cp_async_wait_all();
    __syncthreads(); // step's tiles are in; every warp is done with the previous step's buffers
    if (step + 1 < steps) {
      issue(step + 1, (step + 1) & 1);
      cp_async_commit();
    }
    const int buf = step & 1;
    const int h = kvh * p.group + step / per_head;
    const int m0 = (m_first + step % per_head) * kBwdM;
    const uint32_t q_addr = static_cast<uint32_t>(__cvta_generic_to_shared(q_s + buf * kBwdM * D));
    const uint32_t do_addr =
        static_cast<uint32_t>(__cvta_generic_to_shared(do_s + buf * kBwdM * D));
    const float* lse_b = lse_s + buf * kBwdM;
    const float* delta_b = delta_s + buf * kBwdM;

    // At D = 128 the 64 queries go in two halves of 32: S^T and dP^T of one half (32 registers
    // each rather than 64) leave room for the dK and dV accumulators without spilling, for the
    // price of reading this warp's K and V fragments twice.
#pragma unroll 1
    for (int qh = 0; qh < kBwdM / kQHalf; ++qh) {
      const int q0 = qh * kQHalf;
      // S^T = K_w Q^T and dP^T = V_w dO^T: this warp's 16 keys x kQHalf queries each.
      float st[kQTiles][4], dpt[kQTiles][4];
#pragma unroll
      for (int i = 0; i < kQTiles; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          st[i][e] = dpt[i][e] = 0.0f;
      rows_times_rows_t<T, D>(st, k_addr, warp * 16, q_addr, q0, lane);
      rows_times_rows_t<T, D>(dpt, v_addr, warp * 16, do_addr, q0, lane);

      // P^T from the saved log-sum-exp; dS^T = P^T (dP^T - delta) / sqrt(d). Masked: keys a
      // query does not see, queries past the sequence, keys past it.
      const bool needs_mask =
          n0 + kBwdN - 1 > p.offset + m0 || m0 + kBwdM > p.seq || n0 + kBwdN > p.seq;
#pragma unroll
      for (int nt = 0; nt < kQTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ql = q0 + nt * 8 + 2 * t + (e & 1);
          float pv = exp2f(st[nt][e] * p.scale_log2 - lse_b[ql] * 1.4426950408889634f);
          if (needs_mask) {
            const int key = n0 + warp * 16 + g + (e >= 2 ? 8 : 0);
            const int row = m0 + ql;
            if (key > p.offset + row || row >= p.seq || key >= p.seq) pv = 0.0f;
          }
          st[nt][e] = pv;
          dpt[nt][e] = pv * (dpt[nt][e] - delta_b[ql]) * p.scale;
        }
      }

      // dV_w += P^T dO and dK_w += dS^T Q: the accumulators are the A fragments once packed.
#pragma unroll
      for (int kk = 0; kk < kQHalf / 16; ++kk) {
        uint32_t pa[4], da[4];
        pack_a<T>(pa, st[2 * kk], st[2 * kk + 1]);
        pack_a<T>(da, dpt[2 * kk], dpt[2 * kk + 1]);
#pragma unroll
        for (int dt = 0; dt < kDTiles; dt += 2) {
          uint32_t ob[4], qb[4];
          const int r = q0 + kk * 16 + (lane % 16);
          const int c = dt + lane / 16;
          ldmatrix_x4_trans(ob, do_addr + 2 * swizzle<D>(r, c));
          ldmatrix_x4_trans(qb, q_addr + 2 * swizzle<D>(r, c));
          mma_16816<T>(dv_acc[dt], pa, ob[0], ob[1]);
          mma_16816<T>(dv_acc[dt + 1], pa, ob[2], ob[3]);
          mma_16816<T>(dk_acc[dt], da, qb[0], qb[1]);
          mma_16816<T>(dk_acc[dt + 1], da, qb[2], qb[3]);
        }
      }

      // dS^T to shared memory: dQ needs dS with queries as rows, across all the warps' keys.
#pragma unroll
      for (int nt = 0; nt < kQTiles; ++nt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int kr = warp * 16 + g + 8 * half;
          const int ql = q0 + nt * 8 + 2 * t;
          *reinterpret_cast<uint32_t*>(ds_s + swizzle<kBwdM>(kr, ql / 8) + ql % 8) =
              pack2<T>(dpt[nt][2 * half], dpt[nt][2 * half + 1]);
        }
      }
    }
    __syncthreads();

    // dQ for this warp's 16 query rows and D / kBwdDSplit columns = dS [16 x kBwdN keys]
    // K [kBwdN keys x D]; A is read transposed out of dS^T, B transposed out of K (as V in the
    // forward).
    constexpr int kDqTiles = kDTiles / kBwdDSplit;
    const int qg = warp % kBwdQGroups;
    const int dt0 = (warp / kBwdQGroups) * kDqTiles;
    float dq[kDqTiles][4];
#pragma unroll
    for (int i = 0; i < kDqTiles; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dq[i][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kBwdN / 16; ++kk) {
      uint32_t a[4];
      const int kr = kk * 16 + (lane % 8) + 8 * (lane / 16);
      const int qc = qg * 2 + (lane / 8) % 2;
      ldmatrix_x4_trans(a, ds_addr + 2 * swizzle<kBwdM>(kr, qc));
#pragma unroll
      for (int dt = 0; dt < kDqTiles; dt += 2) {
        uint32_t kb[4];
        const int r = kk * 16 + (lane % 16);
        const int c = dt0 + dt + lane / 16;
        ldmatrix_x4_trans(kb, k_addr + 2 * swizzle<D>(r, c));
        mma_16816<T>(dq[dt], a, kb[0], kb[1]);
        mma_16816<T>(dq[dt + 1], a, kb[2], kb[3]);
      }
    }
    // Lanes t and t ^ 1 hold adjacent column pairs of rows g and g + 8: each trades one row's
    // pair with the other, so that the even lane holds four columns of row g and the odd lane
    // four of row g + 8, added to the scratch as one 16-byte vector each.
    {
      const bool odd = (t & 1) != 0;
      const int row = m0 + qg * 16 + g + (odd ? 8 : 0);
      float* dst = p.dq_acc + (static_cast<int64_t>(b) * p.seq + row) * (p.heads * D) +
                   static_cast<int64_t>(h) * D + dt0 * 8 + 4 * (t / 2);
#pragma unroll
      for (int dt = 0; dt < kDqTiles; ++dt) {
        const float s0 = odd ? dq[dt][0] : dq[dt][2];
        const float s1 = odd ? dq[dt][1] : dq[dt][3];
        const float r0 = __shfl_xor_sync(0xffffffffu, s0, 1);
        const float r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
        if (row < p.seq) {
          if (odd)
            atomic_add_f4(dst + dt * 8, r0, r1, dq[dt][2], dq[dt][3]);
          else
            atomic_add_f4(dst + dt * 8, dq[dt][0], dq[dt][1], r0, r1);
        }
      }
    }
  }

  cp_async_wait_all(); // nothing may stay in flight at exit (the K, V loads when steps == 0)

  // This CTA's keys: dK and dV summed over the group's heads, stored once.
  store_dk_dv<T, kDTiles>(p, dk_acc, dv_acc, n0 + warp * 16 + g, b, kvh, t);
}

// delta = rowsum(dO * O) per (row, head): one warp each, fp32.
// ---------------------------------------------------------------------------------------------
// Backward on Hopper (sm_90a), the layout of flash_backward_kernel on warpgroup MMA. One CTA of
// three warpgroups per 128 keys of one KV head:
//   - a producer warpgroup, one thread of it issuing, loads K and V once by TMA and streams the
//     64-row Q and dO tiles of every query block of every head of the group (with their
//     log-sum-exp and delta rows, as bulk copies) through a two-stage ring;
//   - two consumer warpgroups of 64 keys each. Per query block, on wgmma: S^T = K_w Q^T and
//     dP^T = V_w dO^T from shared memory (m64n64k16), P^T and dS^T in registers, then
//     dV_w += P^T dO and dK_w += dS^T Q with P^T and dS^T as register A operands (m64n128k16),
//     while dS^T also goes to shared memory; once both consumers' halves are there, each computes
//     half the columns of dQ = dS K over all 128 keys (m64n64k16, A read transposed from dS^T,
//     B from K) and adds it to the fp32 scratch.
// It takes sequences that are a multiple of 64 (whole query tiles; the row copies of the
// log-sum-exp and delta stay 16-byte aligned); others take flash_backward_kernel.

constexpr int kBwd90N = 128;                         // keys per CTA, 64 per consumer warpgroup
constexpr int kBwd90M = 64;                          // query rows per step
constexpr int kBwd90D = 128;                         // head dimension
constexpr int kBwd90Threads = 384;                   // producer + 2 consumer warpgroups
constexpr int kBwd90KvBytes = kBwd90N * kBwd90D * 2; // K or V: 32 KiB
[[maybe_unused]] constexpr int kBwd90KvHalf =
    kBwd90KvBytes / 2;                              // one 64-column half: 128 rows of 128 B
constexpr int kBwd90QBytes = kBwd90M * kBwd90D * 2; // a Q or dO tile: 16 KiB
[[maybe_unused]] constexpr int kBwd90QHalf = kBwd90QBytes / 2; // 64 rows of 128 B
constexpr int kBwd90DsBytes = kBwd90N * kBwd90M * 2;           // dS^T: 128 key rows of 64 queries
// Layout: K, V, Q[2], dO[2], dS^T[2], lse[2], delta[2], barriers.
constexpr int kBwd90QOffset = 2 * kBwd90KvBytes;
constexpr int kBwd90DoOffset = kBwd90QOffset + 2 * kBwd90QBytes;
constexpr int kBwd90DsOffset = kBwd90DoOffset + 2 * kBwd90QBytes;
constexpr int kBwd90StatsOffset = kBwd90DsOffset + 2 * kBwd90DsBytes;
constexpr int kBwd90BarOffset = kBwd90StatsOffset + 2 * 2 * kBwd90M * 4;
[[maybe_unused]] constexpr int kBwd90SmemBytes = kBwd90BarOffset + 64 + 1024;

struct Bwd90Barriers {
  uint64_t kv_full;
  uint64_t q_full[2], q_empty[2];
};

template <typename T>
__global__ void __launch_bounds__(kBwd90Threads, 1)
    flash_backward_sm90_kernel(const __grid_constant__ CUtensorMap tq,
                               const __grid_constant__ CUtensorMap tk,
                               const __grid_constant__ CUtensorMap tv,
                               const __grid_constant__ CUtensorMap tdo, FlashBwdParams p) {
#if RIDGELINE_SM90A_DEVICE
  using namespace hopper;
  constexpr int D = kBwd90D;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* const smem = align_1024(smem_raw);
  const uint32_t base = smem_addr(smem);
  const uint32_t k_s = base, v_s = base + kBwd90KvBytes;
  auto q_s = [&](int s) { return base + kBwd90QOffset + s * kBwd90QBytes; };
  auto do_s = [&](int s) { return base + kBwd90DoOffset + s * kBwd90QBytes; };
  auto ds_s = [&](int s) { return base + kBwd90DsOffset + s * kBwd90DsBytes; };
  auto lse_s = [&](int s) {
    return reinterpret_cast<float*>(smem + kBwd90StatsOffset + s * 2 * kBwd90M * 4);
  };
  auto delta_s = [&](int s) { return lse_s(s) + kBwd90M; };
  auto* bars = reinterpret_cast<Bwd90Barriers*>(smem + kBwd90BarOffset);
  auto bar = [](uint64_t& b) { return smem_addr(&b); };

  const int b = static_cast<int>(blockIdx.x) / p.kv_heads;
  const int kvh = static_cast<int>(blockIdx.x) % p.kv_heads;
  const int n0 = static_cast<int>(blockIdx.y) * kBwd90N;
  // Query i sees key j when j <= offset + i: queries before n0 - offset see none of these keys.
  const int m_blocks = p.seq / kBwd90M;
  const int m_first = max(0, n0 - p.offset) / kBwd90M;
  const int per_head = max(0, m_blocks - m_first);
  // This CTA's share of the group's query heads (all of them unless the group is split).
  const int split_heads = p.group / p.head_splits;
  const int head0 = kvh * p.group + static_cast<int>(blockIdx.z) * split_heads;
  const int steps = per_head * split_heads;
  auto step_head = [&](int step) { return head0 + step / per_head; };
  auto step_row = [&](int step) { return (m_first + step % per_head) * kBwd90M; };

  if (threadIdx.x == 0) {
    prefetch_tensor_map(&tq);
    prefetch_tensor_map(&tk);
    prefetch_tensor_map(&tv);
    prefetch_tensor_map(&tdo);
    mbarrier_init(bar(bars->kv_full), 1);
    for (int s = 0; s < 2; ++s) {
      mbarrier_init(bar(bars->q_full[s]), 1);
      mbarrier_init(bar(bars->q_empty[s]), 2 * 128);
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    warpgroup_registers_dec<24>();
    if (threadIdx.x != 0) return;
    mbarrier_arrive_expect_tx(bar(bars->kv_full), 2 * kBwd90KvBytes);
    for (int half = 0; half < 2; ++half) {
      tma_load_3d(k_s + half * kBwd90KvHalf, &tk, bar(bars->kv_full), kvh * D + half * 64, n0, b);
      tma_load_3d(v_s + half * kBwd90KvHalf, &tv, bar(bars->kv_full), kvh * D + half * 64, n0, b);
    }
    for (int step = 0; step < steps; ++step) {
      const int s = step & 1;
      mbarrier_wait(bar(bars->q_empty[s]), ((step >> 1) & 1) ^ 1);
      const int h = step_head(step), m0 = step_row(step);
      const uint32_t full = bar(bars->q_full[s]);
      mbarrier_arrive_expect_tx(full, 2 * kBwd90QBytes + 2 * kBwd90M * 4);
      for (int half = 0; half < 2; ++half) {
        tma_load_3d(q_s(s) + half * kBwd90QHalf, &tq, full, h * D + half * 64, m0, b);
        tma_load_3d(do_s(s) + half * kBwd90QHalf, &tdo, full, h * D + half * 64, m0, b);
      }
      const int64_t row = (static_cast<int64_t>(b) * p.heads + h) * p.seq + m0;
      bulk_load(smem_addr(lse_s(s)), p.lse + row, kBwd90M * 4, full);
      bulk_load(smem_addr(delta_s(s)), p.delta + row, kBwd90M * 4, full);
    }
    return;
  }
  warpgroup_registers_inc<240>();

  const int consumer = warpgroup - 1;
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int key_lo = n0 + consumer * 64 + warp * 16 + g; // this thread's keys: key_lo, key_lo + 8
  const uint32_t k_rows = k_s + consumer * 64 * 128;     // this warpgroup's 64 K rows
  const uint32_t v_rows = v_s + consumer * 64 * 128;

  constexpr int kDTiles = D / 8;       // dK, dV: 16 n8 tiles
  constexpr int kQTiles = kBwd90M / 8; // S^T, dP^T: 8 n8 tiles of queries
  float dk_acc[kDTiles][4], dv_acc[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dk_acc[i][e] = dv_acc[i][e] = 0.0f;

  mbarrier_wait(bar(bars->kv_full), 0);
  for (int step = 0; step < steps; ++step) {
    const int s = step & 1;
    const int h = step_head(step), m0 = step_row(step);
    mbarrier_wait(bar(bars->q_full[s]), (step >> 1) & 1);

    // S^T = K_w Q^T and dP^T = V_w dO^T: 8 k16 steps each, both operands K-major.
    float st[kQTiles][4], dpt[kQTiles][4];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t ko = (ks / 4) * kBwd90KvHalf + (ks % 4) * 32;
      const uint32_t qo = (ks / 4) * kBwd90QHalf + (ks % 4) * 32;
      wgmma_m64n64k16_ss<T, 0, 0>(st, smem_desc_sw128(k_rows + ko, 16, 1024),
                                  smem_desc_sw128(q_s(s) + qo, 16, 1024), ks > 0);
    }
    wgmma_commit();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t ko = (ks / 4) * kBwd90KvHalf + (ks % 4) * 32;
      const uint32_t qo = (ks / 4) * kBwd90QHalf + (ks % 4) * 32;
      wgmma_m64n64k16_ss<T, 0, 0>(dpt, smem_desc_sw128(v_rows + ko, 16, 1024),
                                  smem_desc_sw128(do_s(s) + qo, 16, 1024), ks > 0);
    }
    wgmma_commit();

    // P^T from the saved log-sum-exp (masked: keys a query does not see, keys past the
    // sequence), then dS^T = P^T (dP^T - delta) / sqrt(d).
    const float* lse_b = lse_s(s);
    const float* delta_b = delta_s(s);
    const bool needs_mask = n0 + consumer * 64 + warp * 16 + 15 > p.offset + m0 ||
                            n0 + consumer * 64 + warp * 16 + 16 > p.seq;
    wgmma_wait<1>();
    fence_registers(st);
#pragma unroll
    for (int nt = 0; nt < kQTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ql = nt * 8 + 2 * t + (e & 1);
        float pv = exp2f(st[nt][e] * p.scale_log2 - lse_b[ql] * 1.4426950408889634f);
        if (needs_mask) {
          const int key = key_lo + (e >= 2 ? 8 : 0);
          if (key > p.offset + m0 + ql || key >= p.seq) pv = 0.0f;
        }
        st[nt][e] = pv;
      }
    wgmma_wait<0>();
    fence_registers(dpt);
#pragma unroll
    for (int nt = 0; nt < kQTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ql = nt * 8 + 2 * t + (e & 1);
        dpt[nt][e] = st[nt][e] * (dpt[nt][e] - delta_b[ql]) * p.scale;
      }

    // The A fragments of P^T and dS^T (keys x queries), and dS^T into shared memory for dQ:
    // row = key (128 bytes of 64 queries), 16-byte chunks swizzled as wgmma reads them.
    uint32_t pa[kBwd90M / 16][4], da[kBwd90M / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBwd90M / 16; ++kk) {
      pack_a<T>(pa[kk], st[2 * kk], st[2 * kk + 1]);
      pack_a<T>(da[kk], dpt[2 * kk], dpt[2 * kk + 1]);
    }
    unsigned char* ds = smem + (ds_s(s) - base);
#pragma unroll
    for (int nt = 0; nt < kQTiles; ++nt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = consumer * 64 + warp * 16 + g + 8 * half;
        const int q = nt * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(ds + r * 128 + (((q / 8) ^ (r % 8)) << 4) + (q % 8) * 2) =
            pack2<T>(dpt[nt][2 * half], dpt[nt][2 * half + 1]);
      }
    fence_proxy_async_shared();

    // dV_w += P^T dO and dK_w += dS^T Q: 4 k16 steps of 16 queries, B MN-major (the tiles'
    // 64-column halves one lbo apart).
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBwd90M / 16; ++kk)
      wgmma_m64n128k16_rs_mn<T>(dv_acc, pa[kk],
                                smem_desc_sw128(do_s(s) + kk * 16 * 128, kBwd90QHalf, 1024));
#pragma unroll
    for (int kk = 0; kk < kBwd90M / 16; ++kk)
      wgmma_m64n128k16_rs_mn<T>(dk_acc, da[kk],
                                smem_desc_sw128(q_s(s) + kk * 16 * 128, kBwd90QHalf, 1024));
    wgmma_commit();

    // Both consumers' dS^T rows are in: dQ (64 queries x this consumer's 64 columns) = dS K
    // over the 128 keys, A read transposed out of dS^T, B out of K's column half.
    named_barrier_sync(1, 256);
    float dq[8][4];
#pragma unroll
    for (int kk = 0; kk < kBwd90N / 16; ++kk)
      wgmma_m64n64k16_ss<T, 1, 1>(
          dq, smem_desc_sw128(ds_s(s) + kk * 16 * 128, 16, 1024),
          smem_desc_sw128(k_s + consumer * kBwd90KvHalf + kk * 16 * 128, 16, 1024), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_registers(dv_acc);
    fence_registers(dk_acc);
    fence_registers(dq);
    mbarrier_arrive(bar(bars->q_empty[s])); // Q, dO, lse and delta of this stage are read

    // dQ rows m0 + warp * 16 + g (+ 8), columns consumer * 64 + 8 j + 2 t (+ 1).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float* dst =
          p.dq_acc +
          (static_cast<int64_t>(b) * p.seq + m0 + warp * 16 + g + 8 * half) * (p.heads * D) +
          static_cast<int64_t>(h) * D + consumer * 64 + 2 * t;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        atomicAdd(reinterpret_cast<float2*>(dst + j * 8),
                  make_float2(dq[j][2 * half], dq[j][2 * half + 1]));
    }
  }

  // This warpgroup's 64 keys: dK and dV summed over the group's heads, stored once, or over
  // this CTA's share of them and added to the fp32 sums.
  if (p.head_splits == 1) {
    store_dk_dv<T, kDTiles>(p, dk_acc, dv_acc, key_lo, b, kvh, t);
  } else {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = key_lo + 8 * half;
      if (key >= p.seq) continue;
      const int64_t at = (static_cast<int64_t>(b) * p.seq + key) * (p.kv_heads * D) +
                         static_cast<int64_t>(kvh) * D + 2 * t;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        atomicAdd(reinterpret_cast<float2*>(p.dk_acc + at + dt * 8),
                  make_float2(dk_acc[dt][2 * half], dk_acc[dt][2 * half + 1]));
        atomicAdd(reinterpret_cast<float2*>(p.dv_acc + at + dt * 8),
                  make_float2(dv_acc[dt][2 * half], dv_acc[dt][2 * half + 1]));
      }
    }
  }
#else
  __trap(); // launched only where the sm_90a build of this kernel runs
#endif
}

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

// dq = round(dq_acc), [rows, cols] fp32 (contiguous) into the dtype tensor.
template <typename T>
__global__ void convert_rows_kernel(const float* in, T* out, int64_t ld, int64_t rows,
                                    int64_t cols) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols;
    out[r * ld + (i - r * cols)] = from_float<T>(in[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Decode: one query row per (sequence, head), so a KV head's query heads (its group) form the
// rows of one tensor-core tile and each K/V element is read once per step for all of them. The
// context is split across CTAs so that even batch * kv_heads = 1 fills every SM. A CTA owns one
// (sequence, KV head, chunk of up to 16 query heads, split); its warps take turns over 16-key
// steps of the split, each warp streaming its own K/V steps through a private cp.async pipeline
// (no block barrier in the loop) and keeping its own online softmax. The warps' partials meet
// in shared memory at the end: a CTA with the whole context writes the output, otherwise it
// writes a partial (max, sum, unnormalised output) that a second kernel combines. Grouped-query
// decode does 2 * group FLOPs per K/V element and direction, more than the SIMT lanes sustain at
// the HBM roof for group 8; the tensor cores have room to spare.

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = 32 * kDecodeWarps;
constexpr int kDecodeKeys = 16;                         // keys per warp step
constexpr int kDecodeStages = 3;                        // cp.async stages per warp
constexpr int kDecodeRows = 16;                         // query heads per CTA: the MMA's M
constexpr int kDecodeTile = kDecodeWarps * kDecodeKeys; // keys per round of the CTA's warps

struct DecodeParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;      ///< written directly when splits == 1
  float* part_o;  ///< [batch][heads][splits][D], unnormalised
  float* part_ml; ///< [batch][heads][splits][2]: max (log2 units) and sum
  int64_t q_ld, k_ld, v_ld, o_ld;
  int context, capacity, heads, group, head_chunks, splits, split_len;
  float scale_log2;
};

template <int D> constexpr int decode_smem_bytes() {
  // Per warp: the K and V stages; the end-of-split exchange reuses them.
  constexpr int stages = kDecodeStages * 2 * kDecodeKeys * D * 2;
  constexpr int exchange = kDecodeRows * (D + 2) * 4;
  return kDecodeWarps * (stages > exchange ? stages : exchange);
}

template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <typename T, int D>
__global__ void __launch_bounds__(kDecodeThreads) decode_split_kernel(DecodeParams p) {
  constexpr int kChunks = D / 8;
  constexpr int kStageElems = kDecodeKeys * D; // one K (or V) step
  constexpr int kWarpBytes = decode_smem_bytes<D>() / kDecodeWarps;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  T* k_s = reinterpret_cast<T*>(smem_raw + warp * kWarpBytes); // [stages][keys][D]
  T* v_s = k_s + kDecodeStages * kStageElems;                  // [stages][keys][D]

  const int split = blockIdx.x;
  const int kvh = blockIdx.y / p.head_chunks;
  const int g0 = (blockIdx.y % p.head_chunks) * kDecodeRows;
  const int nh = min(kDecodeRows, p.group - g0);
  const int b = blockIdx.z;
  const int begin = split * p.split_len;
  const int end = min(p.context, begin + p.split_len);
  const int h0 = kvh * p.group + g0; // first query head of this CTA

  const T* k_base = static_cast<const T*>(p.k) + static_cast<int64_t>(b) * p.capacity * p.k_ld +
                    static_cast<int64_t>(kvh) * D;
  const T* v_base = static_cast<const T*>(p.v) + static_cast<int64_t>(b) * p.capacity * p.v_ld +
                    static_cast<int64_t>(kvh) * D;
  // This warp's steps start at begin + (warp + i * warps) * keys.
  const int first = begin + warp * kDecodeKeys;
  constexpr int kStride = kDecodeTile;
  const int steps = first < end ? (end - first + kStride - 1) / kStride : 0;

  auto load_step = [&](int i) {
    if (i < steps) {
      const int j0 = first + i * kStride;
      T* ks = k_s + (i % kDecodeStages) * kStageElems;
      T* vs = v_s + (i % kDecodeStages) * kStageElems;
#pragma unroll
      for (int x = lane; x < kDecodeKeys * kChunks; x += 32) {
        const int r = x / kChunks, c = x % kChunks;
        const bool valid = j0 + r < end;
        const int64_t row = valid ? j0 + r : first; // a valid address even when zero-filled
        cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(ks + swizzle<D>(r, c))),
                    k_base + row * p.k_ld + c * 8, valid);
        cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(vs + swizzle<D>(r, c))),
                    v_base + row * p.v_ld + c * 8, valid);
      }
    }
    cp_async_commit(); // empty groups keep the wait counts uniform
  };
  // The first steps' keys and values load before the wait, all but the newest key's: that one
  // the kernels just before this one write (the copy of the step's keys and values into the
  // cache), like the queries. The older rows were written before this step's QKV GEMM, which
  // is an ordinary launch or a skinny GEMM that lets the kernels after it launch only after its
  // own wait: either way they are complete once this grid runs. The kernel after this one may
  // launch once every CTA here is past its wait (not at once: its waiting CTAs would hold SMs this
  // grid's later CTAs need).
  int loaded = 0;
  for (; loaded < kDecodeStages - 1; ++loaded) {
    if (loaded < steps && first + loaded * kStride + kDecodeKeys >= p.context) break;
    load_step(loaded);
  }
  wait_for_primary();
  allow_dependents();
  for (; loaded < kDecodeStages - 1; ++loaded)
    load_step(loaded);

  // Q as A fragments straight from global memory: rows past the group are zero.
  constexpr int kSteps = D / 16;
  const int g = lane / 4, t = lane % 4;
  uint32_t q_frag[kSteps][4];
  {
    const T* q_base = static_cast<const T*>(p.q) + static_cast<int64_t>(b) * p.q_ld +
                      static_cast<int64_t>(h0) * D;
    const uint32_t* lo = reinterpret_cast<const uint32_t*>(q_base + static_cast<int64_t>(g) * D);
    const uint32_t* hi =
        reinterpret_cast<const uint32_t*>(q_base + static_cast<int64_t>(g + 8) * D);
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      const int c = ks * 8 + t; // 32-bit column pairs
      q_frag[ks][0] = g < nh ? lo[c] : 0u;
      q_frag[ks][1] = g + 8 < nh ? hi[c] : 0u;
      q_frag[ks][2] = g < nh ? lo[c + 4] : 0u;
      q_frag[ks][3] = g + 8 < nh ? hi[c + 4] : 0u;
    }
  }

  constexpr int kDTiles = D / 8;
  float o_acc[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i)
    o_acc[i][0] = o_acc[i][1] = o_acc[i][2] = o_acc[i][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f}; // per-thread partial sums, reduced over the quad at the end

  for (int i = 0; i < steps; ++i) {
    cp_async_wait<kDecodeStages - 2>();
    __syncwarp(); // step i is in for every lane; every lane is done with step i - 1's buffer
    load_step(i + kDecodeStages - 1);
    const uint32_t k_addr =
        static_cast<uint32_t>(__cvta_generic_to_shared(k_s + (i % kDecodeStages) * kStageElems));
    const uint32_t v_addr =
        static_cast<uint32_t>(__cvta_generic_to_shared(v_s + (i % kDecodeStages) * kStageElems));

    float s[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      uint32_t kb[4];
      const int r = (lane / 16) * 8 + (lane % 8);
      const int c = ks * 2 + (lane / 8) % 2;
      ldmatrix_x4(kb, k_addr + 2 * swizzle<D>(r, c));
      mma_16816<T>(s[0], q_frag[ks], kb[0], kb[1]);
      mma_16816<T>(s[1], q_frag[ks], kb[2], kb[3]);
    }
    const int j0 = first + i * kStride;
    const bool tail = j0 + kDecodeKeys > end;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (tail && j0 + nt * 8 + 2 * t + (e & 1) >= end) s[nt][e] = -INFINITY;
      }
    online_softmax<2, kDTiles>(s, row_max, row_sum, o_acc, p.scale_log2); // every step has a key
    uint32_t pa[4];
    pack_a<T>(pa, s[0], s[1]);
#pragma unroll
    for (int dt = 0; dt < kDTiles; dt += 2) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, v_addr + 2 * swizzle<D>(lane % 16, dt + lane / 16));
      mma_16816<T>(o_acc[dt], pa, vb[0], vb[1]);
      mma_16816<T>(o_acc[dt + 1], pa, vb[2], vb[3]);
    }
  }
  cp_async_wait<0>();
  __syncwarp(); // this warp's stages are free: its exchange rows go there

  // Exchange: [rows][D] unnormalised output, then [rows] max and [rows] sum, per warp.
  float* x_o = reinterpret_cast<float*>(smem_raw + warp * kWarpBytes);
  float* x_m = x_o + kDecodeRows * D;
  float* x_l = x_m + kDecodeRows;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = g + 8 * half;
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      x_o[row * D + dt * 8 + 2 * t] = o_acc[dt][2 * half];
      x_o[row * D + dt * 8 + 2 * t + 1] = o_acc[dt][2 * half + 1];
    }
    if (t == 0) {
      x_m[row] = row_max[half]; // -inf for a warp that had no step
      x_l[row] = sum;
    }
  }
  __syncthreads();
  auto warp_o = [&](int w) { return reinterpret_cast<const float*>(smem_raw + w * kWarpBytes); };
  const int64_t slot0 = (static_cast<int64_t>(b) * p.heads + h0) * p.splits + split;
  for (int x = threadIdx.x; x < nh * D; x += kDecodeThreads) {
    const int row = x / D, d = x % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w)
      mx = fmaxf(mx, warp_o(w)[kDecodeRows * D + row]); // warp 0 always has a step
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float* xo = warp_o(w);
      const float wgt = exp2f(xo[kDecodeRows * D + row] - mx);
      num += wgt * xo[row * D + d];
      den += wgt * xo[kDecodeRows * D + kDecodeRows + row];
    }
    if (p.splits == 1) {
      static_cast<T*>(
          p.out)[static_cast<int64_t>(b) * p.o_ld + static_cast<int64_t>(h0 + row) * D + d] =
          from_float<T>(num / den);
    } else {
      const int64_t slot = slot0 + static_cast<int64_t>(row) * p.splits;
      p.part_o[slot * D + d] = num;
      if (d == 0) {
        p.part_ml[slot * 2] = mx;
        p.part_ml[slot * 2 + 1] = den;
      }
    }
  }
}

// One CTA per (head, sequence) merges that head's splits. Its warps take turns over the splits
// and each lane owns D / 32 of the head's dims, so every load of a warp's splits can be in
// flight at once: a thread walking all splits in turn waits one L2 round trip per split (4.5-6.3
// us for 16-33 splits on an H200), this takes a few.
constexpr int kCombineWarps = 4;

template <typename T, int D>
__global__ void __launch_bounds__(32 * kCombineWarps)
    decode_combine_kernel(const float* part_o, const float* part_ml, T* out, int64_t o_ld,
                          int heads, int splits) {
  allow_dependents();
  wait_for_primary();
  static_assert(D % 64 == 0, "two or four dims per lane");
  constexpr int kPer = D / 32;
  __shared__ float x_o[kCombineWarps][D];
  __shared__ float x_f[kCombineWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.x, b = blockIdx.y;
  const int64_t slot0 = (static_cast<int64_t>(b) * heads + h) * splits;
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

// ---------------------------------------------------------------------------------------------
// Host side.

// The prefill kernel choice: by device unless set_fused_prefill_kernel() forced sm80.
std::atomic<bool> g_force_sm80{false};

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

/// A TMA map of one attention operand as [batch][rows][cols] with `batch_rows` rows between
/// sequences: 64-column x `box_rows`-row boxes, 128-byte swizzle, rows from `rows` on read as
/// zeros.
template <typename T>
CUtensorMap operand_map(const Tensor& t, int64_t rows, int64_t batch, int64_t batch_rows,
                        uint32_t box_rows = kSm90N) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(t.cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(t.ld) * sizeof(T),
                                 static_cast<cuuint64_t>(batch_rows * t.ld) * sizeof(T)};
  const cuuint32_t box[3] = {64, box_rows, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r =
      tensor_map_encoder()(&map,
                           std::is_same_v<T, __nv_bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                           3, t.data, dims, strides, box, element_strides,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error("fused attention: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) +
                ")");
  return map;
}

template <typename T>
void launch_flash_sm90(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       const FlashParams& p, cudaStream_t stream) {
  RIDGELINE_CHECK(cudaFuncSetAttribute(
      flash_prefill_sm90_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSm90SmemBytes));
  const CUtensorMap tq = operand_map<T>(q, s.seq, s.batch, s.seq);
  const CUtensorMap tk = operand_map<T>(k, s.context, s.batch, s.capacity);
  const CUtensorMap tv = operand_map<T>(v, s.context, s.batch, s.capacity);
  const dim3 grid(static_cast<unsigned>(s.batch * s.heads),
                  static_cast<unsigned>((s.seq + kSm90M - 1) / kSm90M));
  flash_prefill_sm90_kernel<T><<<grid, kSm90Threads, kSm90SmemBytes, stream>>>(tq, tk, tv, p);
  RIDGELINE_CHECK(cudaGetLastError());
}

template <typename T>
void launch_backward_sm90(const AttentionShape& s, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& dout, const FlashBwdParams& p,
                          const dim3& grid, cudaStream_t stream) {
  RIDGELINE_CHECK(cudaFuncSetAttribute(
      flash_backward_sm90_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBwd90SmemBytes));
  const CUtensorMap tq = operand_map<T>(q, s.seq, s.batch, s.seq, kBwd90M);
  const CUtensorMap tdo = operand_map<T>(dout, s.seq, s.batch, s.seq, kBwd90M);
  const CUtensorMap tk = operand_map<T>(k, s.seq, s.batch, s.seq, kBwd90N);
  const CUtensorMap tv = operand_map<T>(v, s.seq, s.batch, s.seq, kBwd90N);
  flash_backward_sm90_kernel<T>
      <<<grid, kBwd90Threads, kBwd90SmemBytes, stream>>>(tq, tk, tv, tdo, p);
}
#else
// Never called: takes_sm90() is false without sm_90a code.
template <typename T>
void launch_flash_sm90(const AttentionShape&, const Tensor&, const Tensor&, const Tensor&,
                       const FlashParams&, cudaStream_t) {
  throw Error("the sm90 attention forward is not built (no sm_90a code)");
}
template <typename T>
void launch_backward_sm90(const AttentionShape&, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, const FlashBwdParams&, const dim3&, cudaStream_t) {
  throw Error("the sm90 attention backward is not built (no sm_90a code)");
}
#endif

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
  FlashParams p{};
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.o = out.data;
  p.q_ld = q.ld;
  p.k_ld = k.ld;
  p.v_ld = v.ld;
  p.o_ld = out.ld;
  p.seq = static_cast<int>(s.seq);
  p.context = static_cast<int>(s.context);
  p.capacity = static_cast<int>(s.capacity);
  p.heads = static_cast<int>(s.heads);
  p.group = static_cast<int>(s.heads / s.kv_heads);
  p.offset = static_cast<int>(s.causal ? s.context - s.seq : s.context - 1);
  p.scale_log2 = 1.4426950408889634f / std::sqrt(static_cast<float>(D));
  p.lse = lse;
  int device = 0;
  RIDGELINE_CHECK(cudaGetDevice(&device));
  if (takes_sm90(D, device)) {
    launch_flash_sm90<T>(s, q, k, v, p, stream);
    return;
  }
  constexpr int smem = flash_smem_bytes<D>();
  // cudaFuncSetAttribute is per device and cheap; setting it every launch keeps multi-device
  // processes correct without static state.
  RIDGELINE_CHECK(cudaFuncSetAttribute(flash_prefill_kernel<T, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>(s.batch * s.heads),
                  static_cast<unsigned>((s.seq + kFlashM - 1) / kFlashM));
  flash_prefill_kernel<T, D><<<grid, kFlashThreads, smem, stream>>>(p);
  RIDGELINE_CHECK(cudaGetLastError());
}

// The split length (keys) of a decode launch: the context split so that the grid fills whole
// waves of the `slots` resident CTAs (a grid of 1.2 waves takes as long as 2). Splits are whole
// 16-key steps, at least one round of the warps each; among those whose wave use is within 5 %
// of the best, the fewest splits, since each adds to the combine.
int64_t decode_split_len(int64_t context, int64_t ctas_per_split, int64_t slots) {
  const int64_t steps = (context + kDecodeKeys - 1) / kDecodeKeys;
  const int64_t most = std::min<int64_t>((context + kDecodeTile - 1) / kDecodeTile, 1024);
  auto split_len_for = [&](int64_t n) {
    return std::max<int64_t>((steps + n - 1) / n * kDecodeKeys, kDecodeTile);
  };
  auto wave_use = [&](int64_t n) {
    const int64_t ctas = (context + split_len_for(n) - 1) / split_len_for(n) * ctas_per_split;
    return static_cast<double>(ctas) / static_cast<double>((ctas + slots - 1) / slots * slots);
  };
  double best = 0.0;
  for (int64_t n = 1; n <= most; ++n)
    best = std::max(best, wave_use(n));
  int64_t chosen = 1;
  while (wave_use(chosen) < best - 0.05)
    ++chosen;
  return split_len_for(chosen);
}

template <typename T, int D>
void launch_decode(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, int sm_count, const ScratchFn& scratch, Launch where) {
  const int group = static_cast<int>(s.heads / s.kv_heads);
  const int head_chunks = (group + kDecodeRows - 1) / kDecodeRows;
  DecodeParams p{};
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.out = out.data;
  p.q_ld = q.ld;
  p.k_ld = k.ld;
  p.v_ld = v.ld;
  p.o_ld = out.ld;
  p.context = static_cast<int>(s.context);
  p.capacity = static_cast<int>(s.capacity);
  p.heads = static_cast<int>(s.heads);
  p.group = group;
  p.head_chunks = head_chunks;
  p.scale_log2 = 1.4426950408889634f / std::sqrt(static_cast<float>(D));

  constexpr int smem = decode_smem_bytes<D>();
  RIDGELINE_CHECK(cudaFuncSetAttribute(decode_split_kernel<T, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  // The occupancy query and the split search cost a few microseconds of host time at long
  // contexts, on every eager launch: the last shape's answer is kept per thread (a decode step
  // repeats one shape layer after layer).
  thread_local struct {
    int device = -1, per_sm = 0;
    int64_t context = -1, ctas_per_split = -1, slots = -1, split_len = 0;
  } last;
  int device = 0;
  RIDGELINE_CHECK(cudaGetDevice(&device));
  if (device != last.device) {
    RIDGELINE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &last.per_sm, decode_split_kernel<T, D>, kDecodeThreads, smem));
    last.device = device;
    last.context = -1;
  }
  const int64_t slots = static_cast<int64_t>(sm_count) * (last.per_sm < 1 ? 1 : last.per_sm);
  const int64_t ctas_per_split = s.batch * s.kv_heads * head_chunks;
  if (s.context != last.context || ctas_per_split != last.ctas_per_split || slots != last.slots) {
    last.split_len = decode_split_len(s.context, ctas_per_split, slots);
    last.context = s.context;
    last.ctas_per_split = ctas_per_split;
    last.slots = slots;
  }
  const int64_t split_len = last.split_len;
  const int64_t splits = (s.context + split_len - 1) / split_len;
  p.splits = static_cast<int>(splits);
  p.split_len = static_cast<int>(split_len);
  if (splits > 1) {
    const size_t rows = static_cast<size_t>(s.batch * s.heads * splits);
    float* part = static_cast<float*>(scratch(rows * (D + 2) * sizeof(float)));
    p.part_o = part;
    p.part_ml = part + rows * D;
  }
  RIDGELINE_REQUIRE(s.batch <= 65535 && s.kv_heads * head_chunks <= 65535,
                    "decode attention: batch and KV heads must each stay below 65536");
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(s.kv_heads * head_chunks),
                  static_cast<unsigned>(s.batch));
  launch_kernel(decode_split_kernel<T, D>, grid, kDecodeThreads, smem, where, p);
  if (splits == 1) return;
  // The combine as an ordinary launch: as a dependent it would start the kernel after it (the
  // output projection, which loads its weights before it waits) beside the split kernel, which
  // slowed the llama3-70b and gpt-h8192 decode steps by about 4 % on an H200; as a dependent
  // that lets the projection launch only after its own wait, the llama3-8b step at batch 1 took
  // 2.1-2.6 us longer.
  launch_kernel(decode_combine_kernel<T, D>,
                dim3(static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch)),
                32 * kCombineWarps, 0, where.stream, p.part_o, p.part_ml, static_cast<T*>(out.data),
                out.ld, p.heads, p.splits);
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
  attention_delta_kernel<T><<<grid_for(rows * s.heads * 32, 256), 256, 0, stream>>>(
      static_cast<const T*>(out.data), out.ld, static_cast<const T*>(dout.data), dout.ld, delta,
      rows, static_cast<int>(s.seq), static_cast<int>(s.heads), D);
  RIDGELINE_CHECK(cudaGetLastError());

  FlashBwdParams p{};
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.dout = dout.data;
  p.lse = lse;
  p.delta = delta;
  p.dq_acc = dq_acc;
  p.dk = dk.data;
  p.dv = dv.data;
  p.q_ld = q.ld;
  p.k_ld = k.ld;
  p.v_ld = v.ld;
  p.do_ld = dout.ld;
  p.dk_ld = dk.ld;
  p.dv_ld = dv.ld;
  p.seq = static_cast<int>(s.seq);
  p.heads = static_cast<int>(s.heads);
  p.kv_heads = static_cast<int>(s.kv_heads);
  p.group = static_cast<int>(s.heads / s.kv_heads);
  p.offset = static_cast<int>(s.causal ? 0 : s.seq - 1);
  p.scale = 1.0f / std::sqrt(static_cast<float>(D));
  p.scale_log2 = 1.4426950408889634f * p.scale;
  p.head_splits = head_splits;
  p.dk_acc = dkv_acc;
  p.dv_acc = dkv_acc + kv_n;
  RIDGELINE_REQUIRE((s.seq + kBwdN - 1) / kBwdN <= 65535,
                    "fused attention backward supports at most 65535 * 128 keys per sequence");
  static_assert(kBwd90N == kBwdN, "both backward kernels take 128 keys per CTA");
  const dim3 grid(static_cast<unsigned>(s.batch * s.kv_heads),
                  static_cast<unsigned>((s.seq + kBwdN - 1) / kBwdN),
                  static_cast<unsigned>(head_splits));
  if (sm90) {
    launch_backward_sm90<T>(s, q, k, v, dout, p, grid, stream);
    if (head_splits > 1) {
      const int64_t kv_cols = s.kv_heads * D;
      RIDGELINE_CHECK(cudaGetLastError());
      convert_rows_kernel<T><<<grid_for(rows * kv_cols, 256), 256, 0, stream>>>(
          p.dk_acc, static_cast<T*>(dk.data), dk.ld, rows, kv_cols);
      RIDGELINE_CHECK(cudaGetLastError());
      convert_rows_kernel<T><<<grid_for(rows * kv_cols, 256), 256, 0, stream>>>(
          p.dv_acc, static_cast<T*>(dv.data), dv.ld, rows, kv_cols);
    }
  } else {
    constexpr int smem = flash_bwd_smem_bytes<D>();
    RIDGELINE_CHECK(cudaFuncSetAttribute(flash_backward_kernel<T, D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    flash_backward_kernel<T, D><<<grid, kBwdThreads, smem, stream>>>(p);
  }
  RIDGELINE_CHECK(cudaGetLastError());
  const int64_t cols = s.heads * D;
  convert_rows_kernel<T><<<grid_for(rows * cols, 256), 256, 0, stream>>>(
      dq_acc, static_cast<T*>(dq.data), dq.ld, rows, cols);
  RIDGELINE_CHECK(cudaGetLastError());
}

template <typename T>
void run_fused(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& out, int sm_count, const ScratchFn& scratch, Launch where,
               float* lse) {
  // The decode kernels keep no log-sum-exp: a forward that must write it takes the flash kernel.
  const bool decode = s.seq == 1 && lse == nullptr;
  if (s.head_dim == 64) {
    if (decode)
      launch_decode<T, 64>(s, q, k, v, out, sm_count, scratch, where);
    else
      launch_flash<T, 64>(s, q, k, v, out, lse, where.stream);
  } else if (s.head_dim == 128) {
    if (decode)
      launch_decode<T, 128>(s, q, k, v, out, sm_count, scratch, where);
    else
      launch_flash<T, 128>(s, q, k, v, out, lse, where.stream);
  } else {
    throw Error("fused attention supports head_dim 64 and 128, got " + std::to_string(s.head_dim) +
                " (the naive implementation takes any head_dim)");
  }
}

} // namespace

void attention_fused(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& out, int sm_count, const ScratchFn& scratch, Launch where,
                     float* lse) {
  RIDGELINE_REQUIRE(aligned_16(q) && aligned_16(k) && aligned_16(v) && aligned_16(out),
                    "fused attention needs 16-byte aligned tensors with ld a multiple of 8");
  RIDGELINE_REQUIRE(s.context < (int64_t{1} << 31) && s.batch * s.capacity < (int64_t{1} << 31),
                    "fused attention: sequence too long for 32-bit row indices");
  if (s.batch == 0 || s.seq == 0 || s.heads == 0) return;
  if (q.dtype == DType::bf16)
    run_fused<__nv_bfloat16>(s, q, k, v, out, sm_count, scratch, where, lse);
  else if (q.dtype == DType::f16)
    run_fused<__half>(s, q, k, v, out, sm_count, scratch, where, lse);
  else
    throw Error("fused attention takes bf16 or fp16 tensors");
}

void attention_fused_backward(const AttentionShape& s, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& dout,
                              const float* lse, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv, const ScratchFn& scratch, cudaStream_t stream) {
  RIDGELINE_REQUIRE(aligned_16(q) && aligned_16(k) && aligned_16(v) && aligned_16(out) &&
                        aligned_16(dout) && aligned_16(dq) && aligned_16(dk) && aligned_16(dv),
                    "fused attention needs 16-byte aligned tensors with ld a multiple of 8");
  RIDGELINE_REQUIRE(s.batch * s.seq < (int64_t{1} << 31),
                    "fused attention: sequence too long for 32-bit row indices");
  if (s.batch == 0 || s.seq == 0 || s.heads == 0) return;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if (s.head_dim == 64)
      launch_backward<T, 64>(s, q, k, v, out, dout, lse, dq, dk, dv, scratch, stream);
    else if (s.head_dim == 128)
      launch_backward<T, 128>(s, q, k, v, out, dout, lse, dq, dk, dv, scratch, stream);
    else
      throw Error("fused attention supports head_dim 64 and 128, got " +
                  std::to_string(s.head_dim) + " (the naive implementation takes any head_dim)");
  };
  if (q.dtype == DType::bf16)
    run(__nv_bfloat16{});
  else if (q.dtype == DType::f16)
    run(__half{});
  else
    throw Error("fused attention takes bf16 or fp16 tensors");
}

void attention_delta(const AttentionShape& s, const Tensor& out, const Tensor& dout, float* delta,
                     cudaStream_t stream) {
  const int64_t rows = s.batch * s.seq;
  if (rows == 0 || s.heads == 0) return;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    attention_delta_kernel<T><<<grid_for(rows * s.heads * 32, 256), 256, 0, stream>>>(
        static_cast<const T*>(out.data), out.ld, static_cast<const T*>(dout.data), dout.ld, delta,
        rows, static_cast<int>(s.seq), static_cast<int>(s.heads), static_cast<int>(s.head_dim));
    RIDGELINE_CHECK(cudaGetLastError());
  };
  if (out.dtype == DType::bf16)
    run(__nv_bfloat16{});
  else
    run(__half{});
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
