// Fused attention backward on Hopper (sm_90a), the layout of attention_backward_sm80.cu's kernel
// on warpgroup MMA. One CTA of three warpgroups per 128 keys of one KV head:
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
#include "core/error.hpp"
#include "models/cuda/attention.cuh"
#include "models/cuda/attention_backward.cuh"
#include "models/cuda/attention_tiles.cuh"
#include "models/cuda/common.cuh"
#include "models/cuda/hopper.cuh"
#include "models/cuda/tensor_map.cuh"

namespace ridgeline {
namespace cuda {
namespace {

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

} // namespace

#if defined(RIDGELINE_SM90A)
template <typename T>
void launch_backward_sm90(const AttentionShape& s, const BackwardOperands& o, const dim3& grid,
                          cudaStream_t stream) {
  const FlashBwdParams p = backward_params<kBwd90D>(s, o);
  RIDGELINE_CHECK(cudaFuncSetAttribute(
      flash_backward_sm90_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBwd90SmemBytes));
  const CUtensorMap tq = operand_map<T>(*o.q, s.seq, s.batch, s.seq, kBwd90M);
  const CUtensorMap tdo = operand_map<T>(*o.dout, s.seq, s.batch, s.seq, kBwd90M);
  const CUtensorMap tk = operand_map<T>(*o.k, s.seq, s.batch, s.seq, kBwd90N);
  const CUtensorMap tv = operand_map<T>(*o.v, s.seq, s.batch, s.seq, kBwd90N);
  flash_backward_sm90_kernel<T>
      <<<grid, kBwd90Threads, kBwd90SmemBytes, stream>>>(tq, tk, tv, tdo, p);
}
#else
// Never called: takes_sm90() is false without sm_90a code.
template <typename T>
void launch_backward_sm90(const AttentionShape&, const BackwardOperands&, const dim3&,
                          cudaStream_t) {
  throw Error("the sm90 attention backward is not built (no sm_90a code)");
}
#endif

template void launch_backward_sm90<__nv_bfloat16>(const AttentionShape&, const BackwardOperands&,
                                                  const dim3&, cudaStream_t);
template void launch_backward_sm90<__half>(const AttentionShape&, const BackwardOperands&,
                                           const dim3&, cudaStream_t);

} // namespace cuda
} // namespace ridgeline
