// Counter-based generator for weights and inputs: value = f(seed, tensor, global index), so a
// tensor-parallel shard holds exactly the same numbers as the same slice of the TP=1 tensor,
// on the host and on the GPU alike.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define RIDGELINE_HD __host__ __device__ __forceinline__
#else
#define RIDGELINE_HD inline
#endif

namespace ridgeline {

/// Identifies one logical (unsharded) tensor: its seed, its id and its global row length.
struct GenKey {
  uint64_t seed = 0;
  uint64_t tensor = 0; ///< see tensor_id()
  int64_t global_cols = 0;
  float scale = 1.0f; ///< values are uniform in [-scale, scale)
};

/// Stable id of a tensor from (layer, role); role values are fixed by the layer code.
RIDGELINE_HD uint64_t tensor_id(int64_t layer, int64_t role) {
  return (static_cast<uint64_t>(layer) << 16) ^ static_cast<uint64_t>(role);
}

/// SplitMix64 finaliser: a bijective mix with full avalanche.
RIDGELINE_HD uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Uniform value in [-scale, scale) for element (row, col) of the logical tensor.
RIDGELINE_HD float generate(const GenKey& key, int64_t row, int64_t col) {
  const uint64_t index = static_cast<uint64_t>(row) * static_cast<uint64_t>(key.global_cols) +
                         static_cast<uint64_t>(col);
  const uint64_t h = mix64(mix64(key.seed ^ mix64(key.tensor)) ^ index);
  // 24 random bits -> [0, 1) exactly representable in fp32.
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  return (2.0f * u - 1.0f) * key.scale;
}

} // namespace ridgeline
