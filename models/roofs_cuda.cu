// The CUDA backend's roof kernels: read, write and copy passes over device memory in 16-byte
// words (the memory roof), and an empty kernel (the launch floor).
#include <algorithm>

#include "core/error.hpp"
#include "models/cuda_common.cuh"

namespace ridgeline {
namespace cuda {
namespace {

constexpr int kThreads = 512;
// Words per thread and loop step, all loaded before any is used: a full wave with one 16-byte
// load per thread barely covers HBM bandwidth x latency, four leave headroom.
constexpr int kUnroll = 4;

// What the write pass stores, and the XOR at which the read pass stores into its sink.
constexpr uint32_t kPattern[4] = {0x01234567u, 0x89abcdefu, 0xfedcba98u, 0x76543210u};

__device__ __forceinline__ uint4 xor4(uint4 a, uint4 b) {
  return make_uint4(a.x ^ b.x, a.y ^ b.y, a.z ^ b.z, a.w ^ b.w);
}

// Grid-stride loops: thread t visits words t, t + stride, ... kUnroll at a time while a whole
// step fits, then the remaining (fewer than kUnroll) one by one.
__global__ void read_kernel(const uint4 *src, size_t n, uint4 pattern, uint4 *sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      acc = xor4(acc, v[u]);
  }
  for (; i < n; i += stride)
    acc = xor4(acc, src[i]);
  // Rarely true and harmless when it is: the store depends on every load, so none is dropped.
  if (acc.x == pattern.x && acc.y == pattern.y && acc.z == pattern.z && acc.w == pattern.w)
    *sink = acc;
}

// Write and copy: one short-lived block per kChunkThreads x kUnroll words (not a persistent
// wave): each warp's accesses stay contiguous, and blocks that finish make room for the next
// at once, which keeps more writes in flight than a grid-stride loop (on an H200 a persistent
// wave copied at 0.93x PyTorch's copy in the same job).
constexpr int kChunkThreads = 128;
constexpr size_t kChunkWords = static_cast<size_t>(kChunkThreads) * kUnroll;

__global__ void write_kernel(uint4 *dst, size_t n, uint4 value) {
  const size_t base = static_cast<size_t>(blockIdx.x) * kChunkWords + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const size_t i = base + static_cast<size_t>(u) * kChunkThreads;
    if (i < n) dst[i] = value;
  }
}

__global__ void copy_kernel(const uint4 *src, uint4 *dst, size_t n) {
  const size_t base = static_cast<size_t>(blockIdx.x) * kChunkWords + threadIdx.x;
  // Every load before any store: src and dst may alias, so the compiler would not hoist them.
  uint4 v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const size_t i = base + static_cast<size_t>(u) * kChunkThreads;
    if (i < n) v[u] = src[i];
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const size_t i = base + static_cast<size_t>(u) * kChunkThreads;
    if (i < n) dst[i] = v[u];
  }
}

__global__ void empty_kernel() {}

} // namespace

void memory_pass(Backend::MemoryPass kind, const void *src, void *dst, size_t bytes, uint4 *sink,
                 int resident_threads, cudaStream_t s) {
  const size_t n = bytes / sizeof(uint4);
  if (n == 0)
    return;
  // Read: one wave of resident blocks (fewer for small passes): every block runs from the start,
  // and none waits for a second wave while others idle at the end.
  const unsigned blocks = std::min(grid_for(static_cast<int64_t>(n), kThreads),
                                   static_cast<unsigned>(std::max(1, resident_threads / kThreads)));
  const size_t chunk_count = (n + kChunkWords - 1) / kChunkWords;
  RIDGELINE_REQUIRE(chunk_count <= 0x7fffffffu, "memory pass too large for one launch");
  const auto chunks = static_cast<unsigned>(chunk_count);
  const uint4 pattern = make_uint4(kPattern[0], kPattern[1], kPattern[2], kPattern[3]);
  const auto *in = static_cast<const uint4 *>(src);
  auto *out = static_cast<uint4 *>(dst);
  switch (kind) {
  case Backend::MemoryPass::read:
    read_kernel<<<blocks, kThreads, 0, s>>>(in, n, pattern, sink);
    break;
  case Backend::MemoryPass::write:
    write_kernel<<<chunks, kChunkThreads, 0, s>>>(out, n, pattern);
    break;
  case Backend::MemoryPass::copy:
    copy_kernel<<<chunks, kChunkThreads, 0, s>>>(in, out, n);
    break;
  }
  RIDGELINE_CHECK(cudaGetLastError());
}

void empty_kernels(int count, cudaStream_t s) {
  for (int i = 0; i < count; ++i)
    empty_kernel<<<1, 1, 0, s>>>();
  // Checked once: a query per launch would add host time to the floor being measured, and
  // cudaGetLastError() still reports a failure of any launch of the loop.
  RIDGELINE_CHECK(cudaGetLastError());
}

} // namespace cuda
} // namespace ridgeline
