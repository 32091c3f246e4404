// symm:S: S's policy with every buffer its collectives read or write in the communicator's
// symmetric memory (NCCL: one window registered with NCCL_WIN_COLL_SYMMETRIC), carved at 4 KiB
// boundaries in the same order on every rank; where the communicator has none (MPI on the host,
// an NCCL without windows), S on ordinary buffers.
#include "parallel/overlap_strategies.hpp"

namespace ridgeline {

OverlapPolicy symmetric_policy(OverlapPolicy inner) {
  inner.symmetric = true;
  return inner;
}

namespace {
// The symmetric block's alignment of each buffer.
constexpr size_t kSymmetricAlign = 4096;
} // namespace

size_t symmetric_aligned(size_t bytes) {
  return (bytes + kSymmetricAlign - 1) / kSymmetricAlign * kSymmetricAlign;
}

size_t symmetric_block_bytes(const std::vector<size_t>& sizes) {
  size_t total = 0;
  for (size_t size : sizes)
    total += symmetric_aligned(size);
  return total;
}

SymmetricBuffers place_symmetric(Communicator& comm, const std::vector<size_t>& sizes) {
  // Every buffer once, each at a 4 KiB boundary: the same sizes in the same order on every
  // rank, hence the same offsets (what NCCL_WIN_COLL_SYMMETRIC asks of the caller).
  SymmetricBuffers out;
  std::vector<size_t> offsets;
  size_t total = 0;
  for (size_t size : sizes) {
    offsets.push_back(total);
    total += symmetric_aligned(size);
  }
  std::string why;
  out.memory = comm.symmetric_memory(total, why);
  if (!out.memory) {
    out.path = "none: " + why + "; the symm: strategies run on ordinary buffers";
    return out;
  }
  for (size_t offset : offsets)
    out.buffers.push_back(static_cast<char*>(out.memory->data()) + offset);
  out.path = out.memory->describe();
  return out;
}

} // namespace ridgeline
