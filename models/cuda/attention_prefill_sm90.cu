// Fused attention prefill on Hopper (sm_90a), FlashAttention-3 style. One CTA of three
// warpgroups per 128 query rows of one head:
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
#include "core/error.hpp"
#include "models/cuda/attention.cuh"
#include "models/cuda/attention_prefill.cuh"
#include "models/cuda/attention_tiles.cuh"
#include "models/cuda/common.cuh"
#include "models/cuda/hopper.cuh"
#include "models/cuda/tensor_map.cuh"

namespace ridgeline {
namespace cuda {
namespace {

// [[maybe_unused]]: a build without sm_90a code compiles the kernels' bodies out.
constexpr int kSm90M = 128;                         // query rows per CTA, 64 per consumer warpgroup
constexpr int kSm90N = 128;                         // keys per K/V tile
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

} // namespace

#if defined(RIDGELINE_SM90A)
template <typename T>
void launch_flash_sm90(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, float* lse, cudaStream_t stream) {
  const FlashParams p = flash_params<kSm90D>(s, q, k, v, out, lse);
  RIDGELINE_CHECK(cudaFuncSetAttribute(
      flash_prefill_sm90_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSm90SmemBytes));
  const CUtensorMap tq = operand_map<T>(q, s.seq, s.batch, s.seq, kSm90N);
  const CUtensorMap tk = operand_map<T>(k, s.context, s.batch, s.capacity, kSm90N);
  const CUtensorMap tv = operand_map<T>(v, s.context, s.batch, s.capacity, kSm90N);
  const dim3 grid(static_cast<unsigned>(s.batch * s.heads),
                  static_cast<unsigned>((s.seq + kSm90M - 1) / kSm90M));
  flash_prefill_sm90_kernel<T><<<grid, kSm90Threads, kSm90SmemBytes, stream>>>(tq, tk, tv, p);
  RIDGELINE_CHECK(cudaGetLastError());
}
#else
// Never called: takes_sm90() is false without sm_90a code.
template <typename T>
void launch_flash_sm90(const AttentionShape&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&, float*, cudaStream_t) {
  throw Error("the sm90 attention forward is not built (no sm_90a code)");
}
#endif

template void launch_flash_sm90<__nv_bfloat16>(const AttentionShape&, const Tensor&, const Tensor&,
                                               const Tensor&, const Tensor&, float*, cudaStream_t);
template void launch_flash_sm90<__half>(const AttentionShape&, const Tensor&, const Tensor&,
                                        const Tensor&, const Tensor&, float*, cudaStream_t);

} // namespace cuda
} // namespace ridgeline
