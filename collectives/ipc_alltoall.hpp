// The project's all-to-all-v between the GPUs of one node, for an MoE layer's dispatch and
// combine (`run --a2a ipc`): every rank's memory is mapped into every other rank through CUDA
// IPC, and one kernel per call stores each rank's block for a peer straight into a slot of that
// peer's memory over NVLink (its block for itself into its receive buffer), meets the peers at a
// barrier of flags, and copies the blocks it received from its slots into its receive buffer.
// No NCCL, no copy engine and no host step inside a call: the low-latency path for decode-sized
// batches that expert-parallel libraries take with stores from the SMs.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "core/device.hpp"

namespace ridgeline {

class IpcAllToAll {
public:
  virtual ~IpcAllToAll() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The most bytes one rank may send one peer in a call (a slot of every peer's memory).
  virtual size_t max_block_bytes() const = 0;
  /// Communicator::all_to_all_v in bytes: send_bytes[j] bytes from send + send_offsets[j] to
  /// rank j, which receives them at recv + its recv_offsets[me]; recv_bytes[i] is rank i's
  /// send_bytes[me]. Every rank calls, in the same order; enqueued on `stream`. Blocks of at
  /// most max_block_bytes(); 16-byte aligned addresses and offsets move as vectors, others byte
  /// by byte.
  virtual void all_to_all_v(const void* send, const std::vector<size_t>& send_bytes,
                            const std::vector<size_t>& send_offsets, void* recv,
                            const std::vector<size_t>& recv_bytes,
                            const std::vector<size_t>& recv_offsets, Stream stream) = 0;
};

/// Every rank of `comm` calls, on the GPU it uses; the group must lie on one node and hold at
/// most 8 ranks. Throws UsageError without CUDA, and Error when the peers' memory cannot be
/// mapped.
std::unique_ptr<IpcAllToAll> make_ipc_all_to_all(MPI_Comm comm, size_t max_block_bytes);

} // namespace ridgeline
