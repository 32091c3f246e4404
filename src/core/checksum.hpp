// FNV-1a, 64 bits: the checksum of a run's output, so that two runs can be compared bit for bit.
// Stable across builds and machines of one byte order; not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ridgeline {

/// Name of the algorithm, as the `output_checksum_algorithm` attribute records it.
inline constexpr const char* kOutputChecksumAlgorithm = "fnv1a64";
inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ULL;

/// FNV-1a 64 of `size` bytes at `data`, continuing from `hash` (the offset basis to start).
inline uint64_t fnv1a64(const void* data, size_t size, uint64_t hash = kFnv1a64Offset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= kFnv1a64Prime;
  }
  return hash;
}

/// FNV-1a 64 continued over the 8 bytes of `value`, least significant first (so the result
/// does not depend on the host's byte order).
inline uint64_t fnv1a64_u64(uint64_t value, uint64_t hash) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  return fnv1a64(bytes, sizeof(bytes), hash);
}

/// 16 lowercase hexadecimal digits, most significant first.
inline std::string checksum_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

} // namespace ridgeline
