// The CUDA backend's roof kernels: read, write and copy passes over device memory in 16-byte
// words (the memory roof), and an empty kernel (the launch floor).
#include "core/error.hpp"
#include "models/cuda/common.cuh"

namespace ridgeline {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// What the write pass stores.
constexpr uint32_t kPattern[4] = {0x01234567u, 0x89abcdefu, 0xfedcba98u, 0x76543210u};
// The XOR at which the read pass stores into its sink. It must not be a value the read's own
// data give: buffers the write pass filled XOR to kPattern (one word a thread) or to 0, and a
// sink stored by every thread serialises the whole pass on one address (docs/FINDINGS.md).
constexpr uint32_t kSinkPattern[4] = {0x9e3779b9u, 0x7f4a7c15u, 0xf39cc060u, 0x5ced1c7bu};

__device__ __forceinline__ uint4 xor4(uint4 a, uint4 b) {
  return make_uint4(a.x ^ b.x, a.y ^ b.y, a.z ^ b.z, a.w ^ b.w);
}

// Grid-stride loops, launched with a word per thread up to grid_for()'s cap (4 GiB a sweep).
__global__ void read_kernel(const uint4* src, size_t n, uint4 pattern, uint4* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    acc = xor4(acc, src[i]);
  // Rarely true and harmless when it is: the store depends on every load, so none is dropped.
  if (acc.x == pattern.x && acc.y == pattern.y && acc.z == pattern.z && acc.w == pattern.w)
    *sink = acc;
}

__global__ void write_kernel(uint4* dst, size_t n, uint4 value) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = value;
}

__global__ void copy_kernel(const uint4* src, uint4* dst, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = src[i];
}

__global__ void empty_kernel() {}

} // namespace

void memory_pass(Backend::MemoryPass kind, const void* src, void* dst, size_t bytes, uint4* sink,
                 cudaStream_t s) {
  const size_t n = bytes / sizeof(uint4);
  if (n == 0) return;
  // Many short-lived blocks, a word per thread, rather than one resident wave of long loops:
  // blocks are handed out in address order, so the memory in flight stays one compact window;
  // each pass measured faster so than as one wave (docs/FINDINGS.md).
  const unsigned blocks = grid_for(static_cast<int64_t>(n), kThreads);
  const uint4 pattern = make_uint4(kPattern[0], kPattern[1], kPattern[2], kPattern[3]);
  const auto* in = static_cast<const uint4*>(src);
  auto* out = static_cast<uint4*>(dst);
  switch (kind) {
  case Backend::MemoryPass::read:
    read_kernel<<<blocks, kThreads, 0, s>>>(
        in, n, make_uint4(kSinkPattern[0], kSinkPattern[1], kSinkPattern[2], kSinkPattern[3]),
        sink);
    break;
  case Backend::MemoryPass::write:
    write_kernel<<<blocks, kThreads, 0, s>>>(out, n, pattern);
    break;
  case Backend::MemoryPass::copy:
    copy_kernel<<<blocks, kThreads, 0, s>>>(in, out, n);
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
