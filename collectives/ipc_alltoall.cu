// The all-to-all-v over CUDA-IPC-mapped memory (see ipc_alltoall.hpp).
//
// Memory of every rank, one allocation mapped by every peer, n ranks:
//   pair 0: [slot 0] ... [slot n - 1]   pair 1: the same   (slot_bytes each)
//   [flags: kMaxBlocks x kMaxRanks int][epochs: kMaxBlocks int][call, arrived: int]
// Call c uses pair c % 2 only; slot s of rank r holds what rank s sent rank r. The grid is fixed
// (every rank the same), and a block of n bytes is cut the same way on both sides: block b
// stores 16-byte units [b v / B, (b + 1) v / B) of it (v = n / 16, B blocks; block 0 also the
// bytes past the last unit) into the peer's slot, and on the peer block b copies the same vectors
// out after the barrier, so block b's barrier (ipc_sync.cuh) covers exactly what it copies. No
// barrier at a call's end: a rank writes pair c % 2 again only in call c + 2, after its block
// passed call c + 1's barrier, which every peer's block reaches after it copied out call c.
#include "collectives/ipc_alltoall.hpp"
#include "collectives/ipc_memory.hpp"
#include "collectives/ipc_sync.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

using ipc::kMaxBlocks;
using ipc::kMaxRanks;
constexpr int kThreads = 512;

struct A2aArgs {
  ipc::Peers peers;
  int rank, ranks;
  size_t slot_bytes, flags_off, epochs_off, calls_off;
  const char* send;
  char* recv;
  bool vectors; ///< every address and offset 16-byte aligned
  size_t send_off[kMaxRanks], send_bytes[kMaxRanks], recv_off[kMaxRanks], recv_bytes[kMaxRanks];
};

/// This block's share of an n-byte copy (see the file comment): the same bytes whether or not
/// the addresses allow vectors, so that sender and receiver cut a block alike.
__device__ void copy_share(char* dst, const char* src, size_t n, bool vectors) {
  const size_t v = n / 16;
  const size_t first = v * blockIdx.x / gridDim.x, last = v * (blockIdx.x + 1) / gridDim.x;
  if (vectors)
    for (size_t i = first + threadIdx.x; i < last; i += blockDim.x)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  else
    for (size_t i = first * 16 + threadIdx.x; i < last * 16; i += blockDim.x)
      dst[i] = src[i];
  if (blockIdx.x == 0)
    for (size_t i = v * 16 + threadIdx.x; i < n; i += blockDim.x)
      dst[i] = src[i];
}

__global__ void __launch_bounds__(kThreads) all_to_all_kernel(A2aArgs a) {
  const ipc::Call c = ipc::begin_call(a);
  const size_t pair = static_cast<size_t>(c.pair) * a.ranks * a.slot_bytes;
  // Each block starts at its own peer, so that the blocks' stores spread over every link.
  for (int k = 0; k < a.ranks; ++k) {
    const int j = (a.rank + 1 + k + static_cast<int>(blockIdx.x)) % a.ranks;
    char* dst = j == a.rank ? a.recv + a.recv_off[j]
                            : a.peers.base[j] + pair + static_cast<size_t>(a.rank) * a.slot_bytes;
    copy_share(dst, a.send + a.send_off[j], a.send_bytes[j], a.vectors);
  }
  ipc::barrier(a, 0, c.epoch); // every peer's block has stored its share into this rank's slots
  const char* own = a.peers.base[a.rank] + pair;
  for (int i = 0; i < a.ranks; ++i)
    if (i != a.rank)
      copy_share(a.recv + a.recv_off[i], own + static_cast<size_t>(i) * a.slot_bytes,
                 a.recv_bytes[i], a.vectors);
  ipc::end_call(a, c.epoch);
}

class CudaIpcAllToAll final : public IpcAllToAll {
public:
  CudaIpcAllToAll(MPI_Comm comm, size_t max_block_bytes)
      : m_slot((std::max<size_t>(max_block_bytes, 1) + 255) / 256 * 256),
        m_flags_off(2 * static_cast<size_t>(group_size(comm)) * m_slot),
        m_epochs_off(m_flags_off + sizeof(int) * kMaxBlocks * kMaxRanks),
        m_calls_off(m_epochs_off + sizeof(int) * kMaxBlocks),
        m_memory(comm, m_calls_off + 2 * sizeof(int), "the all-to-all-v over CUDA IPC", kMaxRanks) {
    for (int r = 0; r < size(); ++r)
      m_peers.base[r] = m_memory.base(r);
    // Nobody stores into a peer before every peer has mapped every allocation.
    RIDGELINE_CHECK(cudaDeviceSynchronize());
    RIDGELINE_CHECK(MPI_Barrier(comm));
  }

  int rank() const override { return m_memory.rank(); }
  int size() const override { return m_memory.size(); }
  size_t max_block_bytes() const override { return m_slot; }

  void all_to_all_v(const void* send, const std::vector<size_t>& send_bytes,
                    const std::vector<size_t>& send_offsets, void* recv,
                    const std::vector<size_t>& recv_bytes, const std::vector<size_t>& recv_offsets,
                    Stream stream) override {
    const size_t n = static_cast<size_t>(size());
    RIDGELINE_REQUIRE(send_bytes.size() == n && send_offsets.size() == n &&
                          recv_bytes.size() == n && recv_offsets.size() == n,
                      "all_to_all_v over CUDA IPC: one count and offset per rank");
    A2aArgs a{};
    a.peers = m_peers;
    a.rank = rank();
    a.ranks = size();
    a.slot_bytes = m_slot;
    a.flags_off = m_flags_off;
    a.epochs_off = m_epochs_off;
    a.calls_off = m_calls_off;
    a.send = static_cast<const char*>(send);
    a.recv = static_cast<char*>(recv);
    bool aligned =
        reinterpret_cast<uintptr_t>(send) % 16 == 0 && reinterpret_cast<uintptr_t>(recv) % 16 == 0;
    for (size_t j = 0; j < n; ++j) {
      RIDGELINE_REQUIRE(send_bytes[j] <= m_slot && recv_bytes[j] <= m_slot,
                        "all_to_all_v over CUDA IPC: a block larger than its slot");
      a.send_off[j] = send_offsets[j];
      a.send_bytes[j] = send_bytes[j];
      a.recv_off[j] = recv_offsets[j];
      a.recv_bytes[j] = recv_bytes[j];
      aligned = aligned && send_offsets[j] % 16 == 0 && recv_offsets[j] % 16 == 0;
    }
    a.vectors = aligned;
    // Every rank launches the same grid (the epochs are per block), whatever it sends.
    all_to_all_kernel<<<kMaxBlocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
    RIDGELINE_CHECK(cudaGetLastError());
  }

private:
  static int group_size(MPI_Comm comm) {
    int n = 1;
    RIDGELINE_CHECK(MPI_Comm_size(comm, &n));
    return n;
  }

  size_t m_slot = 0, m_flags_off = 0, m_epochs_off = 0, m_calls_off = 0;
  IpcPeerMemory m_memory;
  ipc::Peers m_peers{};
};

} // namespace

std::unique_ptr<IpcAllToAll> make_ipc_all_to_all(MPI_Comm comm, size_t max_block_bytes) {
  return std::make_unique<CudaIpcAllToAll>(comm, max_block_bytes);
}

} // namespace ridgeline
