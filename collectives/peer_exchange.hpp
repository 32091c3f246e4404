// Symmetric windows over one group of ranks: every rank allocates the same windows, and each
// rank can put bytes into a peer's window without the peer's SMs taking part. The put is the
// one-sided half of a ring exchange; the receiver waits for it, consumes it, and releases the
// window so that the sender may put into it again.
//   - CUDA (make_ipc_exchange): the windows are one device allocation per rank, mapped by every
//     peer through CUDA IPC (handles exchanged over MPI); a put is a cudaMemcpyAsync into the
//     peer's memory, which the copy engines carry between GPUs, followed by a flag written into
//     the peer's memory by a stream memory operation; a wait is a stream memory operation that
//     holds the stream until the flag arrives. No kernel and no SM takes part, and no multicast.
//   - host (make_mpi_exchange): the same calls over non-blocking MPI point-to-point messages, so
//     that a schedule written against this interface runs unchanged without GPUs.
// Every put into (peer, window) is numbered; the receiver's waits and releases on (sender,
// window) count the same sequence. Every rank of the group must make the matching calls in the
// same order. The numbers live on the host, so the calls cannot be captured in a CUDA graph.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "core/device.hpp"

namespace ridgeline {

class PeerExchange {
public:
  virtual ~PeerExchange() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "ipc" (copy engines between mapped GPU memory) or "mpi".
  virtual const char* backend() const = 0;
  /// This rank's window `w`: its memory is what the peers' puts land in.
  virtual void* window(size_t w) const = 0;
  virtual size_t window_bytes(size_t w) const = 0;

  /// Copies `bytes` from `src` (this rank's memory, ready once what was queued on `stream`
  /// before is done) into `peer`'s window `w` at `offset`, then tells the peer. Queued on
  /// `stream`; before the copy, the stream waits until the peer released its previous put into
  /// that window. `src` must stay unchanged until complete() (and, on CUDA, until `stream`
  /// passes this point).
  virtual void put(int peer, size_t w, size_t offset, const void* src, size_t bytes,
                   Stream stream) = 0;
  /// Holds `stream` until `peer`'s next put into this rank's window `w` (of `bytes` at
  /// `offset`, the same arguments the peer gave) has landed.
  virtual void wait(int peer, size_t w, size_t offset, size_t bytes, Stream stream) = 0;
  /// Tells `peer`, once what was queued on `stream` before is done, that its last put into
  /// this rank's window `w` has been consumed.
  virtual void release(int peer, size_t w, Stream stream) = 0;
  /// Host-side completion of the puts begun so far (MPI sends); a no-op where the stream orders
  /// them (CUDA).
  virtual void complete() = 0;

  /// put() of the same bytes into every peer's window `w` at `offset`, the next rank first.
  void put_to_peers(size_t w, size_t offset, const void* src, size_t bytes, Stream stream) {
    for (int i = 1; i < size(); ++i)
      put((rank() + i) % size(), w, offset, src, bytes, stream);
  }
};

/// Host memory windows over non-blocking MPI messages on a duplicate of `comm`. Every rank of
/// `comm` calls with the same sizes.
std::unique_ptr<PeerExchange> make_mpi_exchange(MPI_Comm comm,
                                                const std::vector<size_t>& window_bytes);

/// Device memory windows mapped through CUDA IPC, puts on the copy engines. Every rank of `comm`
/// calls with the same sizes, on the GPU it uses; the ranks must share a node (at most 8).
/// Throws UsageError in a build without CUDA, Error when the memory cannot be mapped or the
/// device lacks stream memory operations.
std::unique_ptr<PeerExchange> make_ipc_exchange(MPI_Comm comm,
                                                const std::vector<size_t>& window_bytes);

} // namespace ridgeline
