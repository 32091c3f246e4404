// FNV-1a, 64 bits: the checksum of a run's output, so that two runs can be compared bit for bit.
// Stable across builds and machines of one byte order; not cryptographic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <mpi.h>

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

/// Every rank calls; rank 0 gets the checksum of what the ranks that `hold` part of an output
/// hashed (`hash`, each rank's FNV-1a 64 of its part), those hashes hashed in rank order. Other
/// ranks get "".
inline std::string checksum_over_ranks(MPI_Comm world, bool holds, uint64_t hash) {
  uint64_t mine[2] = {holds ? 1u : 0u, hash};
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  std::vector<uint64_t> all(rank == 0 ? 2 * static_cast<size_t>(size) : 0);
  MPI_Gather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0, world);
  if (rank != 0) return "";
  uint64_t total = kFnv1a64Offset;
  for (size_t r = 0; r < static_cast<size_t>(size); ++r)
    if (all[2 * r] != 0) total = fnv1a64_u64(all[2 * r + 1], total);
  return checksum_hex(total);
}

} // namespace ridgeline
