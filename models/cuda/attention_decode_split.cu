// Fused attention decode (seq == 1), the split kernel: one query row per (sequence, head), so a
// KV head's query heads (its group) form the
// rows of one tensor-core tile and each K/V element is read once per step for all of them. The
// context is split across CTAs so that even batch * kv_heads = 1 fills every SM. A CTA owns one
// (sequence, KV head, chunk of up to 16 query heads, split); its warps take turns over 16-key
// steps of the split, each warp streaming its own K/V steps through a private cp.async pipeline
// (no block barrier in the loop) and keeping its own online softmax. The warps' partials meet
// in shared memory at the end: a CTA with the whole context writes the output, otherwise it
// writes a partial (max, sum, unnormalised output) that a second kernel combines. Grouped-query
// decode does 2 * group FLOPs per K/V element and direction, more than the SIMT lanes sustain at
// the HBM roof for group 8; the tensor cores have room to spare. The ragged launch runs
// sequences of different contexts in one grid: its CTAs walk a list of every sequence's splits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "models/cuda/attention.cuh"
#include "models/cuda/attention_tiles.cuh"
#include "models/cuda/common.cuh"
#include "models/cuda/mma_sm80.cuh"
#include "models/cuda/sm80.cuh"

namespace ridgeline {
namespace cuda {
namespace {

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = 32 * kDecodeWarps;
constexpr int kDecodeKeys = 16;                         // keys per warp step
constexpr int kDecodeStages = 3;                        // cp.async stages per warp
constexpr int kDecodeRows = 16;                         // query heads per CTA: the MMA's M
constexpr int kDecodeTile = kDecodeWarps * kDecodeKeys; // keys per round of the CTA's warps

// Sequence b's partials start at split `split0` of the list of every sequence's splits: the
// partial of (b, head h, split s) is slot split0 * heads + h * splits_b + s. Uniform launches
// have split0 = b * splits, which makes that [batch][heads][splits].
struct DecodeParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;      ///< written directly for a sequence of one split
  float* part_o;  ///< [slots][D], unnormalised
  float* part_ml; ///< [slots][2]: max (log2 units) and sum
  int64_t q_ld, k_ld, v_ld, o_ld;
  int context, capacity, heads, group, head_chunks, splits, split_len;
  /// Ragged launches: the list of every sequence's splits on the device, one entry per
  /// blockIdx.y: {sequence, split | the sequence's splits << 16, its context, its split0};
  /// null for uniform launches.
  const int4* work;
  float scale_log2;
};

template <int D> constexpr int decode_smem_bytes() {
  // Per warp: the K and V stages; the end-of-split exchange reuses them.
  constexpr int stages = kDecodeStages * 2 * kDecodeKeys * D * 2;
  constexpr int exchange = kDecodeRows * (D + 2) * 4;
  return kDecodeWarps * (stages > exchange ? stages : exchange);
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

  // This CTA's sequence b, its split, b's split count and context, where b's partials start
  // (split0), and its (KV head, head chunk) unit. Uniform: x is the split, y the unit, z the
  // sequence. Ragged: x is the unit and y an entry of the work list, so that the list's order
  // is the order the CTAs start in (the longest splits first).
  int b, split, splits, context, split0, unit;
  if (p.work == nullptr) {
    b = blockIdx.z;
    split = blockIdx.x;
    splits = p.splits;
    context = p.context;
    split0 = b * p.splits;
    unit = blockIdx.y;
  } else {
    const int4 w = p.work[blockIdx.y];
    b = w.x;
    split = static_cast<int>(static_cast<unsigned>(w.y) & 0xffffu);
    splits = static_cast<int>(static_cast<unsigned>(w.y) >> 16);
    context = w.z;
    split0 = w.w;
    unit = blockIdx.x;
  }
  const int kvh = unit / p.head_chunks;
  const int g0 = (unit % p.head_chunks) * kDecodeRows;
  const int nh = min(kDecodeRows, p.group - g0);
  const int begin = split * p.split_len; // < context: a sequence has ceil(context / len) splits
  const int end = min(context, begin + p.split_len);
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
    if (loaded < steps && first + loaded * kStride + kDecodeKeys >= context) break;
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
  const int64_t slot0 =
      static_cast<int64_t>(split0) * p.heads + static_cast<int64_t>(h0) * splits + split;
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
    if (splits == 1) {
      static_cast<T*>(
          p.out)[static_cast<int64_t>(b) * p.o_ld + static_cast<int64_t>(h0 + row) * D + d] =
          from_float<T>(num / den);
    } else {
      const int64_t slot = slot0 + static_cast<int64_t>(row) * splits;
      p.part_o[slot * D + d] = num;
      if (d == 0) {
        p.part_ml[slot * 2] = mx;
        p.part_ml[slot * 2 + 1] = den;
      }
    }
  }
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

// A ragged CTA's fixed cost (its start, its pipeline's first loads, the warps' exchange and its
// partial's store and combine) counted as the keys one CTA would read in that time: an estimate.
constexpr int64_t kRaggedCtaKeys = 2 * kDecodeTile;

// The split length (keys, a multiple of the CTA's round of 64) of a ragged launch whose `units`
// CTAs per split (KV heads times head chunks) share `slots` resident CTAs. The CTAs start in
// the work list's order as slots free up, so the launch takes at most its work spread over the
// slots plus its longest CTA (Graham's bound for list scheduling); the split length that
// minimises that bound, each CTA costing its keys plus kRaggedCtaKeys. Long splits leave a
// long last CTA; short ones pay the fixed cost more often. At most 65535 list entries (the
// grid's y).
int64_t ragged_split_len(const std::vector<int64_t>& contexts, int64_t units, int64_t slots) {
  int64_t total = 0, longest = 1;
  for (int64_t c : contexts) {
    total += c;
    longest = std::max(longest, c);
  }
  const int64_t most = std::min<int64_t>((longest + kDecodeTile - 1) / kDecodeTile, 4096);
  double best = 0.0;
  int64_t chosen = most * kDecodeTile;
  for (int64_t m = most; m >= 1; --m) {
    const int64_t len = m * kDecodeTile;
    int64_t entries = 0;
    for (int64_t c : contexts)
      entries += (c + len - 1) / len;
    if (entries > 65535) break; // shorter splits only add entries
    const double bound = static_cast<double>(units) *
                             static_cast<double>(total + entries * kRaggedCtaKeys) /
                             static_cast<double>(slots) +
                         static_cast<double>(len + kRaggedCtaKeys);
    if (m == most || bound < best) {
      best = bound;
      chosen = len;
    }
  }
  return chosen;
}

// The fields of a launch every decode launch sets alike.
template <int D>
DecodeParams decode_params(const AttentionShape& s, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Tensor& out) {
  const int group = static_cast<int>(s.heads / s.kv_heads);
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
  p.head_chunks = (group + kDecodeRows - 1) / kDecodeRows;
  p.scale_log2 = 1.4426950408889634f / std::sqrt(static_cast<float>(D));
  return p;
}

// The split kernel's shared memory attribute set, and its resident CTAs per SM on the current
// device (the occupancy query's answer kept per thread and device).
template <typename T, int D> int decode_ctas_per_sm() {
  constexpr int smem = decode_smem_bytes<D>();
  RIDGELINE_CHECK(cudaFuncSetAttribute(decode_split_kernel<T, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  thread_local int last_device = -1, per_sm = 0;
  int device = 0;
  RIDGELINE_CHECK(cudaGetDevice(&device));
  if (device != last_device) {
    RIDGELINE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, decode_split_kernel<T, D>, kDecodeThreads, smem));
    last_device = device;
  }
  return per_sm < 1 ? 1 : per_sm;
}

} // namespace

template <typename T, int D>
void launch_decode(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, int sm_count, const ScratchFn& scratch, Launch where) {
  DecodeParams p = decode_params<D>(s, q, k, v, out);
  const int head_chunks = p.head_chunks;
  constexpr int smem = decode_smem_bytes<D>();
  const int per_sm = decode_ctas_per_sm<T, D>();
  // The occupancy query and the split search are host work on every eager launch, more of it the
  // longer the context: the last shape's answer is kept per thread (a decode step repeats one
  // shape layer after layer).
  thread_local struct {
    int64_t context = -1, ctas_per_split = -1, slots = -1, split_len = 0;
  } last;
  const int64_t slots = static_cast<int64_t>(sm_count) * per_sm;
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
  // The combine is an ordinary launch: as a dependent it let the output projection after it load
  // its weights beside the split kernel, and as a dependent that lets the projection launch only
  // after its own wait it held the projection back; either way the decode step took longer
  // (docs/FINDINGS.md).
  launch_decode_combine<T, D>(p.part_o, p.part_ml, static_cast<T*>(out.data), out.ld, p.heads,
                              p.splits, s.batch, where.stream);
}

template <typename T, int D>
void launch_decode_ragged(const AttentionShape& s, const std::vector<int64_t>& contexts,
                          const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          int sm_count, const ScratchFn& scratch, const UploadFn& upload,
                          cudaStream_t stream) {
  DecodeParams p = decode_params<D>(s, q, k, v, out);
  const int64_t units = s.kv_heads * p.head_chunks;
  RIDGELINE_REQUIRE(s.batch <= 65535 && units <= 65535,
                    "decode attention: batch and KV heads must each stay below 65536");
  const int64_t slots = static_cast<int64_t>(sm_count) * decode_ctas_per_sm<T, D>();
  // The split search and the work list are host work of every sequence: the last ones are
  // kept per thread (a step's layers repeat its contexts), and `upload` copies a list only
  // where it is not the one its device copy already holds.
  thread_local struct {
    std::vector<int64_t> contexts;
    int64_t units = -1, slots = -1, split_len = 0;
    int entries = 0;
    size_t work_bytes = 0;
    std::vector<unsigned char> host; ///< the work list, then each sequence's first split
  } last;
  if (contexts != last.contexts || units != last.units || slots != last.slots) {
    const int64_t len = ragged_split_len(contexts, units, slots);
    // The work list, {sequence, split | splits << 16, context, first split}, the longest
    // splits first (every split but a sequence's last is `len` keys long): the last CTAs to
    // start are the short ones. Then each sequence's first split and the list's length, for
    // the combine.
    std::vector<int4> work;
    std::vector<int> first_split(contexts.size() + 1);
    int entries = 0;
    for (size_t b = 0; b < contexts.size(); ++b) {
      const int c = static_cast<int>(contexts[b]);
      const int64_t n64 = (contexts[b] + len - 1) / len;
      RIDGELINE_REQUIRE(entries + n64 <= 65535,
                        "ragged decode attention: more than 65535 context splits");
      const int n = static_cast<int>(n64);
      first_split[b] = entries;
      for (int i = 0; i < n; ++i)
        work.push_back(
            make_int4(static_cast<int>(b),
                      static_cast<int>(static_cast<unsigned>(i) | (static_cast<unsigned>(n) << 16)),
                      c, entries));
      entries += n;
    }
    first_split[contexts.size()] = entries;
    auto keys = [&](const int4& w) {
      return std::min<int64_t>(len, w.z - static_cast<int64_t>(w.y & 0xffff) * len);
    };
    std::stable_sort(work.begin(), work.end(),
                     [&](const int4& a, const int4& b) { return keys(a) > keys(b); });
    last.work_bytes = work.size() * sizeof(int4);
    last.host.resize(last.work_bytes + first_split.size() * sizeof(int));
    std::memcpy(last.host.data(), work.data(), last.work_bytes);
    std::memcpy(last.host.data() + last.work_bytes, first_split.data(),
                first_split.size() * sizeof(int));
    last.split_len = len;
    last.entries = entries;
    last.contexts = contexts;
    last.units = units;
    last.slots = slots;
  }
  p.split_len = static_cast<int>(last.split_len);
  const int entries = last.entries;
  const auto* dev = static_cast<const unsigned char*>(upload(last.host.data(), last.host.size()));
  p.work = reinterpret_cast<const int4*>(dev);
  const int* first_split_dev = reinterpret_cast<const int*>(dev + last.work_bytes);

  const bool split = entries > static_cast<int>(contexts.size());
  if (split) {
    const size_t rows = static_cast<size_t>(entries) * static_cast<size_t>(s.heads);
    float* part = static_cast<float*>(scratch(rows * (D + 2) * sizeof(float)));
    p.part_o = part;
    p.part_ml = part + rows * D;
  }
  // An ordinary launch: the kernel reads the work list the copy above writes.
  const dim3 grid(static_cast<unsigned>(units), static_cast<unsigned>(entries), 1);
  launch_kernel(decode_split_kernel<T, D>, grid, kDecodeThreads, decode_smem_bytes<D>(),
                Launch(stream), p);
  if (!split) return;
  launch_decode_combine<T, D>(p.part_o, p.part_ml, static_cast<T*>(out.data), out.ld, p.heads, 0,
                              s.batch, stream, first_split_dev);
}

template void launch_decode_ragged<__nv_bfloat16, 64>(const AttentionShape&,
                                                      const std::vector<int64_t>&, const Tensor&,
                                                      const Tensor&, const Tensor&, const Tensor&,
                                                      int, const ScratchFn&, const UploadFn&,
                                                      cudaStream_t);
template void launch_decode_ragged<__nv_bfloat16, 128>(const AttentionShape&,
                                                       const std::vector<int64_t>&, const Tensor&,
                                                       const Tensor&, const Tensor&, const Tensor&,
                                                       int, const ScratchFn&, const UploadFn&,
                                                       cudaStream_t);
template void launch_decode_ragged<__half, 64>(const AttentionShape&, const std::vector<int64_t>&,
                                               const Tensor&, const Tensor&, const Tensor&,
                                               const Tensor&, int, const ScratchFn&,
                                               const UploadFn&, cudaStream_t);
template void launch_decode_ragged<__half, 128>(const AttentionShape&, const std::vector<int64_t>&,
                                                const Tensor&, const Tensor&, const Tensor&,
                                                const Tensor&, int, const ScratchFn&,
                                                const UploadFn&, cudaStream_t);

template void launch_decode<__nv_bfloat16, 64>(const AttentionShape&, const Tensor&, const Tensor&,
                                               const Tensor&, const Tensor&, int, const ScratchFn&,
                                               Launch);
template void launch_decode<__nv_bfloat16, 128>(const AttentionShape&, const Tensor&, const Tensor&,
                                                const Tensor&, const Tensor&, int, const ScratchFn&,
                                                Launch);
template void launch_decode<__half, 64>(const AttentionShape&, const Tensor&, const Tensor&,
                                        const Tensor&, const Tensor&, int, const ScratchFn&,
                                        Launch);
template void launch_decode<__half, 128>(const AttentionShape&, const Tensor&, const Tensor&,
                                         const Tensor&, const Tensor&, int, const ScratchFn&,
                                         Launch);

} // namespace cuda
} // namespace ridgeline
