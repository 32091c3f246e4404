// What the element-wise, norm, rotary and softmax kernels share: fp32 math on bf16/fp16 storage
// through 16-byte vector loads and stores where rows allow (V = 8) and scalar ones otherwise
// (V = 1), the grid-stride loop over a tensor's vectors, and the dispatch by dtype. In an unnamed
// namespace: each kernel's translation unit has its own copy, as when they shared one file.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "models/cuda/common.cuh"

namespace ridgeline {
namespace cuda {
namespace {

constexpr int kThreads = 256;

template <typename T, int V> __device__ __forceinline__ void load(const T* p, float (&v)[V]) {
  if constexpr (V == 8) {
    unpack8<T>(*reinterpret_cast<const uint4*>(p), v);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i)
      v[i] = to_float(p[i]);
  }
}

template <typename T, int V> __device__ __forceinline__ void store(T* p, const float (&v)[V]) {
  if constexpr (V == 8) {
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      e[i] = from_float<T>(v[i]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i)
      p[i] = from_float<T>(v[i]);
  }
}

/// body(r, c) for every V-element vector of a rows x cols tensor (row r, first column c; cols a
/// multiple of V), spread over the grid with a grid-stride loop. The row of a vector is found
/// with 32-bit division where the tensor allows it: a 64-bit one is a long software sequence.
template <int V, typename Body>
__device__ __forceinline__ void for_each_vector(int64_t rows, int64_t cols, Body&& body) {
  const int64_t per_row = cols / V;
  const int64_t total = rows * per_row;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (total + stride <= INT32_MAX) {
    const uint32_t n = static_cast<uint32_t>(per_row);
    for (uint32_t i = static_cast<uint32_t>(first); i < static_cast<uint32_t>(total);
         i += static_cast<uint32_t>(stride)) {
      const uint32_t r = i / n;
      body(static_cast<int64_t>(r), static_cast<int64_t>(i - r * n) * V);
    }
    return;
  }
  for (int64_t i = first; i < total; i += stride) {
    const int64_t r = i / per_row;
    body(r, (i - r * per_row) * V);
  }
}

// v = round(v + p): the sum of two partial results as an add of the two would store it.
template <typename T, int V>
__device__ __forceinline__ void add_rounded(const T* p, float (&v)[V]) {
  float w[V];
  load<T, V>(p, w);
#pragma unroll
  for (int j = 0; j < V; ++j)
    v[j] = to_float(from_float<T>(v[j] + w[j]));
}

template <typename Fn> void dispatch(DType dtype, Fn&& fn) {
  if (dtype == DType::bf16)
    fn(__nv_bfloat16{});
  else if (dtype == DType::f16)
    fn(__half{});
  else
    throw Error("CUDA kernels take bf16 or fp16 tensors, got " + std::string(dtype_name(dtype)));
}

} // namespace
} // namespace cuda
} // namespace ridgeline
