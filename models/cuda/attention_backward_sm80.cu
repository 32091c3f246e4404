// Fused attention backward (prefill shapes), FlashAttention-2 style on mma.sync. One CTA of 8
// warps owns 128 keys of one KV head; each warp
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

#include "models/cuda/attention.cuh"
#include "models/cuda/attention_backward.cuh"
#include "models/cuda/attention_tiles.cuh"
#include "models/cuda/common.cuh"
#include "models/cuda/mma_sm80.cuh"
#include "models/cuda/sm80.cuh"

namespace ridgeline {
namespace cuda {
namespace {

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

constexpr int kBwdM = 64; // query rows per step
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

} // namespace

template <typename T, int D>
void launch_backward_sm80(const AttentionShape& s, const BackwardOperands& o, const dim3& grid,
                          cudaStream_t stream) {
  const FlashBwdParams p = backward_params<D>(s, o);
  constexpr int smem = flash_bwd_smem_bytes<D>();
  RIDGELINE_CHECK(cudaFuncSetAttribute(flash_backward_kernel<T, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  flash_backward_kernel<T, D><<<grid, kBwdThreads, smem, stream>>>(p);
}

template void launch_backward_sm80<__nv_bfloat16, 64>(const AttentionShape&,
                                                      const BackwardOperands&, const dim3&,
                                                      cudaStream_t);
template void launch_backward_sm80<__nv_bfloat16, 128>(const AttentionShape&,
                                                       const BackwardOperands&, const dim3&,
                                                       cudaStream_t);
template void launch_backward_sm80<__half, 64>(const AttentionShape&, const BackwardOperands&,
                                               const dim3&, cudaStream_t);
template void launch_backward_sm80<__half, 128>(const AttentionShape&, const BackwardOperands&,
                                                const dim3&, cudaStream_t);

} // namespace cuda
} // namespace ridgeline
