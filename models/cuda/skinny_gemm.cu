// The skinny GEMM of decode: c[m, n] = sum_k a[m, k] * w[n, k] for at most 16 activation rows
// (a step's tokens) against a row-major weight matrix [n, k], at the HBM roof. The weights are
// read once, in 16-byte streaming loads that skip L1; the activations (a few KiB) come from L2.
//
// Each warp computes 8 * NT output columns over a slice of k on tensor cores: one m16n8k16 MMA
// takes the (at most 16) activation rows as its A tile and 8 weight rows as its B tile. A
// thread's 16-byte load of a weight row holds 8 consecutive k; the reduction order over k is
// free, so the k of a 32-wide chunk are permuted identically in A and B: a thread's 8 values
// (k = 32 c + 8 t + 0..7) are the k pairs 2t and 2t + 8 of two MMAs, which is exactly where
// the MMA's fragments want a thread's values. No shared memory or shuffles on the way in.
// The 8 warps of a CTA take interleaved 32-wide chunks of k (one CTA reads 512 contiguous bytes
// of each weight row per round) and add their partial sums through shared memory at the end.
//
// Launched as a programmatic dependent launch where the device has it: the CTAs start while the
// kernel before them (a norm, the activation, the attention) finishes, pull their first weights
// into L2, and wait for it only before reading the activations. Each CTA lets the kernel after
// it start once its own weights are read (allow_dependents()), so that, inside a forward step
// where the kernels between are launched the same way, the next GEMM's CTAs take the SMs this
// one's last CTAs leave; not earlier, where waiting CTAs would hold SMs this grid still needs.
//
// At most kGemvRows activation rows take a second kernel, on CUDA cores: one to eight warps per
// weight row, each over a slice of k of at most 2 KiB (one activation row) or 4 KiB (two to
// four), its lanes along k, so that each load instruction of a warp reads 512 contiguous bytes
// of the row (the MMA kernel's warps read 64-byte pieces of eight rows) and a warp has its whole
// slice in flight at once (a longer k is taken in several such rounds). A few FMAs per loaded
// weight are far below the SMs' rate; the first round's weights are loaded before the wait.

#include <algorithm>
#include <cstdio>
#include <string>

#include "models/cuda/common.cuh"
#include "models/cuda/mma_sm80.cuh"

namespace ridgeline {
namespace cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kChunk = 32;   ///< k per round of a warp: two m16n8k16 MMAs
constexpr int kInFlight = 8; ///< 16-byte weight loads of a thread per round (all its tiles)

// The loads are volatile asm, like the MMAs, which keeps their order in the PTX. ptxas still
// schedules the MMA kernel chunk by chunk: its SASS (sm_90a, nvcc 13.0) issues one chunk's
// weight and activation loads, then that chunk's MMAs, then the next chunk's loads, so a warp
// has one chunk in flight, not a round; rounds whose loads all issue first were slower inside
// decode steps (docs/FINDINGS.md). The CUDA-core kernel's rounds do issue all their weight loads
// before the first FMA.

/// 16 bytes of streamed weights: read once, not kept in L1.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
/// 16 bytes of activations, read by every CTA: kept in L1.
__device__ __forceinline__ uint4 load_shared_input(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

constexpr int kGemvWarps = 8;

/// 16-byte weight loads a lane issues per round for M activation rows: 2 KiB of a row a warp
/// for one row, 4 KiB for more. A round's loads then hold fewer registers, and a row splits over
/// more warps, so a GEMM has more, smaller CTAs. 4 and 8 were the fastest inside decode steps
/// at one row and at two to four (docs/FINDINGS.md).
constexpr int gemv_loads(int64_t m) {
  return m == 1 ? 4 : 8;
}

/// Warps per weight row of the CUDA-core kernel: the fewest (1, 2, 4 or 8) whose slice of k is
/// one round of `loads` 16-byte loads a lane, so that every warp has all its loads in flight at
/// once; eight when none is (each warp then takes its slice in several rounds).
int gemv_slices(int64_t k, int loads) {
  const int64_t words = k / 8;
  for (int slices : {1, 2, 4})
    if ((words + slices - 1) / slices <= 32 * loads) return slices;
  return kGemvWarps;
}

/// Columns of c per CTA of the CUDA-core kernel with S warps per weight row: kGemvWarps / S, or
/// for an epilogue that pairs columns at least one pair (the CTA then has 2 S warps).
constexpr int gemv_columns(int slices, bool paired) {
  return paired && kGemvWarps / slices < 2 ? 2 : kGemvWarps / slices;
}

/// The weight row (column of c) that CTA-local column q of CTA `block` computes, for R columns a
/// CTA. Paired epilogues put the two columns of a pair side by side (q even, q + 1).
template <bool Paired, int R>
__device__ __forceinline__ int gemv_row(const GemvEpilogue& e, int n, int block, int q) {
  if (!Paired) return block * R + q;
  const int pair = block * (R / 2) + q / 2, second = q % 2;
  if (e.kind == GemvEpilogue::Kind::swiglu) return pair + second * (n / 2);
  const int half = static_cast<int>(e.head_dim / 2);
  return (pair / half) * 2 * half + pair % half + second * half;
}

/// Stores one unpaired sum of row i, column `col` through the epilogue.
template <typename T>
__device__ __forceinline__ void gemv_store(const GemvEpilogue& e, T* c, int64_t ldc, int i, int col,
                                           float sum) {
  T* at = c + i * ldc + col;
  if (e.kind == GemvEpilogue::Kind::gelu)
    sum = gelu_tanh(sum);
  else if (e.kind == GemvEpilogue::Kind::residual)
    sum += to_float(*at);
  *at = from_float<T>(sum);
}

/// The rotation of column pair (col, col + head_dim / 2) at the epilogue's position: the angle
/// pos * theta^(-2 (col % head_dim) / head_dim) in double, as the rotary kernel and the host
/// reference (positions reach tens of thousands of radians), with theta^x as 2^(x log2 theta)
/// (log2 theta from the host); reduced to [-pi, pi] in double, then its sine and cosine by the
/// fast intrinsic (a few 1e-7 there, far below a bf16 or fp16 rounding).
__device__ __forceinline__ void rotary_angle(const GemvEpilogue& e, int col, float& cs, float& sn) {
  const double d = static_cast<double>(e.head_dim);
  const double freq = exp2(-2.0 * (col % e.head_dim) / d * e.log2_theta);
  double x = static_cast<double>(e.pos) * freq;
  const double turns = rint(x * 0.15915494309189535); // 1 / (2 pi)
  x = fma(-turns, 6.283185307179586, x);              // 2 pi in two parts
  x = fma(-turns, 2.4492935982947064e-16, x);
  __sincosf(static_cast<float>(x), &sn, &cs);
}

/// Stores one pair of row i: columns col and col + gap (gap n / 2 for swiglu, head_dim / 2).
template <typename T>
__device__ __forceinline__ void gemv_store_pair(const GemvEpilogue& e, T* c, int64_t ldc, int i,
                                                int col, int gap, float x1, float x2) {
  if (e.kind == GemvEpilogue::Kind::swiglu) {
    c[i * ldc + col] = from_float<T>(swiglu_of(x1, x2));
    return;
  }
  if (col / e.head_dim < e.rotated_heads) {
    float cs, sn;
    rotary_angle(e, col, cs, sn);
    const float y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
    x1 = y1;
    x2 = y2;
  }
  const T v1 = from_float<T>(x1), v2 = from_float<T>(x2);
  c[i * ldc + col] = v1;
  c[i * ldc + col + gap] = v2;
  if (col >= e.cache_col0) {
    T* row = static_cast<T*>(e.cache) + (i * e.cache_seq_rows + e.pos) * e.cache_ld - e.cache_col0;
    row[col] = v1;
    row[col + gap] = v2;
  }
}

/// M activation rows (1 <= M <= kGemvRows), S warps per weight row: a CTA computes R =
/// gemv_columns(S, Paired) columns of c; warp `warp` takes CTA column `warp % R` and slice
/// `warp / R` of k, its lane l the 16-byte words l, l + 32, ... of the slice. The slices' sums
/// meet in shared memory, and the epilogue stores them (a paired one once both sums of a pair
/// are there). Norm: the RMS norm of a folded in front (GemvEpilogue::norm_gamma): each warp
/// also sums the squares of its slice of every row, those sums meet as the products' do, and
/// each row's products, taken against a * gamma, are scaled by that row's 1 / rms.
/// CTAs an SM holds of the kernel without the norm (40 registers a thread at one row, 64 at
/// two): the norm's kernel is held to as many, or 0 (no bound) without the norm.
constexpr int gemv_min_ctas(int m, int threads, bool norm) {
  return norm ? 65536 / ((m == 1 ? 40 : 64) * threads) : 0;
}

template <typename T, int M, int S, bool Paired, bool Norm>
__global__ void __launch_bounds__(S* gemv_columns(S, Paired) * 32,
                                  gemv_min_ctas(M, S* gemv_columns(S, Paired) * 32, Norm))
    gemv_kernel(const T* __restrict__ a, int64_t lda, const T* __restrict__ w, int64_t ldw, T* c,
                int64_t ldc, int n, int k, GemvEpilogue e) {
  constexpr int R = gemv_columns(S, Paired), W = S * R;
  constexpr int kLoads = gemv_loads(M);
  constexpr int kSums = Norm ? 2 * M : M; // the products, then the squares
  __shared__ float partial[W][kSums];
  const T* gamma = static_cast<const T*>(e.norm_gamma);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row = gemv_row<Paired, R>(e, n, blockIdx.x, warp % R);
  // A row past n reads the last one instead and is never stored: every warp reaches the barrier.
  const T* wrow = w + static_cast<int64_t>(min(row, n - 1)) * ldw;
  const int words = k / 8, per_slice = (words + S - 1) / S;
  const int begin = (warp / R) * per_slice, end = min(words, begin + per_slice);
  float acc[kSums];
#pragma unroll
  for (int i = 0; i < kSums; ++i)
    acc[i] = 0.0f;
  // The first round's weights are loaded before the wait: they do not depend on the kernel
  // before. Words past the slice's end read as zero.
  bool waited = false;
  for (int w0 = begin; w0 < end; w0 += 32 * kLoads) {
    const bool whole = w0 + 32 * kLoads <= end;
    uint4 wv[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int v = w0 + u * 32 + lane;
      wv[u] = whole || v < end ? load_stream(wrow + static_cast<int64_t>(v) * 8)
                               : make_uint4(0, 0, 0, 0);
    }
    if (!waited) {
      wait_for_primary();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int v = w0 + u * 32 + lane;
      if (!whole && v >= end) break;
      float wf[8], gf[8];
      unpack8<T>(wv[u], wf);
      if constexpr (Norm) {
        unpack8<T>(load_shared_input(gamma + static_cast<int64_t>(v) * 8), gf);
#pragma unroll
        for (int j = 0; j < 8; ++j)
          wf[j] *= gf[j];
      }
#pragma unroll
      for (int i = 0; i < M; ++i) {
        float af[8];
        unpack8<T>(load_shared_input(a + i * lda + static_cast<int64_t>(v) * 8), af);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          acc[i] = fmaf(wf[j], af[j], acc[i]);
          if constexpr (Norm) acc[M + i] = fmaf(af[j], af[j], acc[M + i]);
        }
      }
    }
  }
  if (!waited) wait_for_primary(); // an empty slice: still not before the kernel before ends
  allow_dependents();
#pragma unroll
  for (int i = 0; i < kSums; ++i) {
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
      acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], d);
  }
  // Row i's sum of CTA column q over the S slices (partial[][] filled), times 1 / rms.
  auto slice_sum = [&](int q, int i) {
    float sum = 0.0f, squares = 0.0f;
#pragma unroll
    for (int sl = 0; sl < S; ++sl) {
      sum += partial[q + sl * R][i];
      if constexpr (Norm) squares += partial[q + sl * R][M + i];
    }
    return Norm ? sum * rsqrtf(squares / static_cast<float>(k) + e.norm_eps) : sum;
  };
  if constexpr (Paired) {
    // Every column's sum into shared memory, then one thread per (pair, row) stores the pair.
    __shared__ float sums[R][M];
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < kSums; ++i)
        partial[warp][i] = acc[i];
    __syncthreads();
    if (threadIdx.x < R * M) {
      const int q = threadIdx.x / M, i = threadIdx.x % M;
      sums[q][i] = slice_sum(q, i);
    }
    __syncthreads();
    if (threadIdx.x < (R / 2) * M) {
      const int p = threadIdx.x / M, i = threadIdx.x % M;
      const int col = gemv_row<Paired, R>(e, n, blockIdx.x, 2 * p);
      if (blockIdx.x * (R / 2) + p < n / 2) {
        const int gap =
            e.kind == GemvEpilogue::Kind::swiglu ? n / 2 : static_cast<int>(e.head_dim / 2);
        gemv_store_pair<T>(e, c, ldc, i, col, gap, sums[2 * p][i], sums[2 * p + 1][i]);
      }
    }
    return;
  }
  if (S > 1) {
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < kSums; ++i)
        partial[warp][i] = acc[i];
    __syncthreads();
    if (warp < R && lane == 0)
#pragma unroll
      for (int i = 0; i < M; ++i)
        acc[i] = slice_sum(warp, i);
  } else if constexpr (Norm) {
#pragma unroll
    for (int i = 0; i < M; ++i)
      acc[i] *= rsqrtf(acc[M + i] / static_cast<float>(k) + e.norm_eps);
  }
  if (warp < R && lane == 0 && row < n)
#pragma unroll
    for (int i = 0; i < M; ++i)
      gemv_store<T>(e, c, ldc, i, row, acc[i]);
}

/// NT: 8-column tiles per warp; kTall: more than 8 activation rows (the MMA's rows 8-15 used).
template <typename T, int NT, bool kTall>
__global__ void __launch_bounds__(kWarps * 32)
    skinny_gemm_kernel(const T* __restrict__ a, int64_t lda, const T* __restrict__ w, int64_t ldw,
                       T* __restrict__ c, int64_t ldc, int m, int n, int k) {
  constexpr int U = kInFlight / NT; // chunks per round of a warp
  __shared__ float partial[kWarps][NT][4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * NT * 8;
  const int chunks = (k + kChunk - 1) / kChunk;

  // Rows past n or m read the last row instead: their products land in columns or rows that
  // are never stored, so the loads need no predicate. Only k past its end must read as zero.
  const T* wrow[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j)
    wrow[j] = w + static_cast<int64_t>(min(n0 + j * 8 + g, n - 1)) * ldw;
    // The first round's weights do not depend on the kernel before: into L2 while it ends.
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int kk = (warp + u * kWarps) * kChunk + t * 8;
#pragma unroll
    for (int j = 0; j < NT; ++j)
      if (kk < k) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(wrow[j] + kk));
  }
  wait_for_primary();

  const T* arow0 = a + static_cast<int64_t>(min(g, m - 1)) * lda;
  const T* arow1 = a + static_cast<int64_t>(min(g + 8, m - 1)) * lda;

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  // One round: U chunks of this warp (scheduled chunk by chunk, see above). `tail`: some of
  // the round's k lie past the end (those read as zero).
  auto round = [&](int c0, bool tail) {
    uint4 wv[U][NT], av0[U], av1[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kk = (c0 + u * kWarps) * kChunk + t * 8;
      const bool in = !tail || kk < k;
      const int at = in ? kk : 0;
#pragma unroll
      for (int j = 0; j < NT; ++j)
        wv[u][j] = load_stream(wrow[j] + at);
      av0[u] = load_shared_input(arow0 + at);
      av1[u] = kTall ? load_shared_input(arow1 + at) : av0[u];
      if (!in) av0[u] = av1[u] = make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t lo[4] = {av0[u].x, av1[u].x, av0[u].y, av1[u].y};
      const uint32_t hi[4] = {av0[u].z, av1[u].z, av0[u].w, av1[u].w};
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        mma_16816<T>(acc[j], lo, wv[u][j].x, wv[u][j].y);
        mma_16816<T>(acc[j], hi, wv[u][j].z, wv[u][j].w);
      }
    }
  };
  // Rounds whose every chunk is whole, then at most one with a partial or missing chunk.
  const int whole = k / kChunk;
  int c0 = warp;
  for (; c0 + (U - 1) * kWarps < whole; c0 += kWarps * U)
    round(c0, false);
  if (c0 < chunks) round(c0, true);
  allow_dependents();

#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      partial[warp][j][r][lane] = acc[j][r];
  __syncthreads();
  // Accumulator r of lane l: row l / 4 (+ 8 for r >= 2), column 2 (l % 4) + r % 2 of its tile.
  for (int i = threadIdx.x; i < NT * 4 * 32; i += kWarps * 32) {
    const int j = i / 128, r = (i / 32) % 4, l = i % 32;
    const int row = (l >> 2) + (r >= 2 ? 8 : 0), col = n0 + j * 8 + 2 * (l & 3) + (r & 1);
    if (row >= m || col >= n) continue;
    float sum = 0.0f;
#pragma unroll
    for (int wp = 0; wp < kWarps; ++wp)
      sum += partial[wp][j][r][l];
    c[static_cast<int64_t>(row) * ldc + col] = from_float<T>(sum);
  }
}

template <typename T, int NT, bool kTall> void launch(const SkinnyGemm& p, Launch where) {
  launch_kernel(skinny_gemm_kernel<T, NT, kTall>,
                static_cast<unsigned>((p.n + NT * 8 - 1) / (NT * 8)), kWarps * 32, 0, where,
                static_cast<const T*>(p.a), p.lda, static_cast<const T*>(p.w), p.ldw,
                static_cast<T*>(p.c), p.ldc, static_cast<int>(p.m), static_cast<int>(p.n),
                static_cast<int>(p.k));
}

/// CTAs of the CUDA-core kernel: one per R columns, or per R / 2 pairs.
int64_t gemv_ctas(const SkinnyGemm& p, int slices) {
  const bool paired = p.epilogue.paired();
  const int64_t r = gemv_columns(slices, paired), units = paired ? p.n / 2 : p.n;
  const int64_t per = paired ? r / 2 : r;
  return (units + per - 1) / per;
}

template <typename T, int M, int S, bool Paired, bool Norm>
void launch_gemv(const SkinnyGemm& p, Launch where) {
  launch_kernel(gemv_kernel<T, M, S, Paired, Norm>, static_cast<unsigned>(gemv_ctas(p, S)),
                S * gemv_columns(S, Paired) * 32, 0, where, static_cast<const T*>(p.a), p.lda,
                static_cast<const T*>(p.w), p.ldw, static_cast<T*>(p.c), p.ldc,
                static_cast<int>(p.n), static_cast<int>(p.k), p.epilogue);
}

template <typename T, int M, int S, bool Norm>
void launch_paired(const SkinnyGemm& p, Launch where) {
  if (p.epilogue.paired())
    launch_gemv<T, M, S, true, Norm>(p, where);
  else
    launch_gemv<T, M, S, false, Norm>(p, where);
}

template <typename T, int M, int S> void launch_gemv(const SkinnyGemm& p, Launch where) {
  // The norm is compiled only for the rows that take it (fits()).
  if constexpr (M <= SkinnyGemm::kNormRows) {
    if (p.epilogue.norm_gamma != nullptr) return launch_paired<T, M, S, true>(p, where);
  }
  launch_paired<T, M, S, false>(p, where);
}

template <typename T, int M> void launch_slices(const SkinnyGemm& p, Launch where) {
  switch (gemv_slices(p.k, gemv_loads(M))) {
  case 1:
    return launch_gemv<T, M, 1>(p, where);
  case 2:
    return launch_gemv<T, M, 2>(p, where);
  case 4:
    return launch_gemv<T, M, 4>(p, where);
  default:
    return launch_gemv<T, M, 8>(p, where);
  }
}

template <typename T> void launch_rows(const SkinnyGemm& p, Launch where) {
  static_assert(SkinnyGemm::kGemvRows == 4, "one instantiation per row count");
  switch (p.m) {
  case 1:
    return launch_slices<T, 1>(p, where);
  case 2:
    return launch_slices<T, 2>(p, where);
  case 3:
    return launch_slices<T, 3>(p, where);
  default:
    return launch_slices<T, 4>(p, where);
  }
}

template <typename T> void launch_tiles(const SkinnyGemm& p, int nt, Launch where) {
  const bool tall = p.m > 8;
  if (nt == 4)
    tall ? launch<T, 4, true>(p, where) : launch<T, 4, false>(p, where);
  else if (nt == 2)
    tall ? launch<T, 2, true>(p, where) : launch<T, 2, false>(p, where);
  else
    tall ? launch<T, 1, true>(p, where) : launch<T, 1, false>(p, where);
}

} // namespace

bool SkinnyGemm::fits() const {
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  using Kind = GemvEpilogue::Kind;
  const GemvEpilogue& e = epilogue;
  const bool epilogue_fits =
      e.kind == Kind::store ||
      (m <= kGemvRows &&
       (e.kind == Kind::gelu || e.kind == Kind::residual ||
        (e.kind == Kind::swiglu && n % 2 == 0) ||
        (e.kind == Kind::rotary_append && e.head_dim >= 2 && e.head_dim % 2 == 0 &&
         n % e.head_dim == 0 && e.cache != nullptr && e.cache_col0 % e.head_dim == 0 &&
         e.cache_ld >= n - e.cache_col0 && e.cache_seq_rows > e.pos && e.pos >= 0)));
  const bool norm_fits = e.norm_gamma == nullptr || (m <= kNormRows && aligned16(e.norm_gamma));
  const int64_t cols = e.kind == Kind::swiglu ? n / 2 : n;
  return (dtype == DType::bf16 || dtype == DType::f16) && m >= 1 && m <= kMaxRows && n >= 1 &&
         k >= 1 && k % 8 == 0 && lda % 8 == 0 && ldw % 8 == 0 && ldc >= cols && aligned16(a) &&
         aligned16(w) && n <= (int64_t{1} << 30) && k <= (int64_t{1} << 30) && epilogue_fits &&
         norm_fits;
}

const char* GemvEpilogue::name() const {
  switch (kind) {
  case Kind::gelu:
    return "gelu";
  case Kind::residual:
    return "residual add";
  case Kind::swiglu:
    return "swiglu";
  case Kind::rotary_append:
    return "rotary and cache append";
  default:
    return "store";
  }
}

int SkinnyGemm::tiles_per_warp(int sm_count) const {
  // The widest tiles (fewer activation reads per weight byte) that still give every SM two CTAs;
  // one tile per warp at every row count was slower, not faster (docs/FINDINGS.md).
  for (int nt : {4, 2})
    if ((n + nt * 8 - 1) / (nt * 8) >= 2 * static_cast<int64_t>(sm_count)) return nt;
  return 1;
}

std::string SkinnyGemm::describe(int sm_count) const {
  char text[192];
  if (m <= kGemvRows) {
    const int slices = gemv_slices(k, gemv_loads(m));
    std::snprintf(text, sizeof(text),
                  "skinny kernel (CUDA cores, %d warps per column, %lld CTAs%s%s%s)", slices,
                  static_cast<long long>(gemv_ctas(*this, slices)),
                  epilogue.norm_gamma == nullptr ? "" : ", prologue: rms norm",
                  epilogue.kind == GemvEpilogue::Kind::store ? "" : ", epilogue: ",
                  epilogue.kind == GemvEpilogue::Kind::store ? "" : epilogue.name());
    return text;
  }
  const int nt = tiles_per_warp(sm_count);
  std::snprintf(text, sizeof(text), "skinny kernel (%d columns per CTA, %lld CTAs)", nt * 8,
                static_cast<long long>((n + nt * 8 - 1) / (nt * 8)));
  return text;
}

void skinny_gemm(const SkinnyGemm& p, int sm_count, Launch where) {
  RIDGELINE_REQUIRE(p.fits(), "skinny_gemm: shape, alignment or dtype it does not take");
  if (p.m <= SkinnyGemm::kGemvRows) {
    if (p.dtype == DType::bf16)
      launch_rows<__nv_bfloat16>(p, where);
    else
      launch_rows<__half>(p, where);
    return;
  }
  const int nt = p.tiles_per_warp(sm_count);
  if (p.dtype == DType::bf16)
    launch_tiles<__nv_bfloat16>(p, nt, where);
  else
    launch_tiles<__half>(p, nt, where);
}

} // namespace cuda
} // namespace ridgeline
