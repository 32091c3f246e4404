// Fused attention prefill (seq > 1) on mma.sync: a flash-attention-style kernel, one CTA per
// 128 query rows of one head, K/V streamed through shared memory in 64-key tiles (cp.async,
// double-buffered), S = QK^T and O += PV on tensor cores (mma.sync m16n8k16, fp32 accumulate),
// online softmax in registers: the seq x context score matrix never exists; for training it also
// writes each row's log-sum-exp.
#include "models/cuda/attention.cuh"
#include "models/cuda/attention_prefill.cuh"
#include "models/cuda/attention_tiles.cuh"
#include "models/cuda/common.cuh"
#include "models/cuda/mma_sm80.cuh"
#include "models/cuda/sm80.cuh"

namespace ridgeline {
namespace cuda {
namespace {

constexpr int kFlashWarps = 8;
constexpr int kFlashM = 16 * kFlashWarps; // query rows per CTA, 16 per warp
constexpr int kFlashN = 64;               // keys per tile
constexpr int kFlashThreads = 32 * kFlashWarps;

template <int D> constexpr int flash_smem_bytes() {
  return (kFlashM * D + 4 * kFlashN * D) * 2; // Q, then K and V double-buffered
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

  load_tile<T, D, kFlashM, kFlashThreads>(q_s, q_base, p.q_ld, m0, p.seq);
  cp_async_commit();
  load_tile<T, D, kFlashN, kFlashThreads>(k_s, k_base, p.k_ld, 0, p.context);
  load_tile<T, D, kFlashN, kFlashThreads>(v_s, v_base, p.v_ld, 0, p.context);
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
      load_tile<T, D, kFlashN, kFlashThreads>(k_s + buf * kFlashN * D, k_base, p.k_ld,
                                              (n + 1) * kFlashN, p.context);
      load_tile<T, D, kFlashN, kFlashThreads>(v_s + buf * kFlashN * D, v_base, p.v_ld,
                                              (n + 1) * kFlashN, p.context);
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

} // namespace

template <typename T, int D>
void launch_flash_sm80(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, float* lse, cudaStream_t stream) {
  const FlashParams p = flash_params<D>(s, q, k, v, out, lse);
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

template void launch_flash_sm80<__nv_bfloat16, 64>(const AttentionShape&, const Tensor&,
                                                   const Tensor&, const Tensor&, const Tensor&,
                                                   float*, cudaStream_t);
template void launch_flash_sm80<__nv_bfloat16, 128>(const AttentionShape&, const Tensor&,
                                                    const Tensor&, const Tensor&, const Tensor&,
                                                    float*, cudaStream_t);
template void launch_flash_sm80<__half, 64>(const AttentionShape&, const Tensor&, const Tensor&,
                                            const Tensor&, const Tensor&, float*, cudaStream_t);
template void launch_flash_sm80<__half, 128>(const AttentionShape&, const Tensor&, const Tensor&,
                                             const Tensor&, const Tensor&, float*, cudaStream_t);

} // namespace cuda
} // namespace ridgeline
