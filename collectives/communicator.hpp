// The Communicator interface: collectives and point-to-point transfers over one group of
// ranks. NCCL (GPU, stream-ordered) and MPI (host, non-blocking requests) implement it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/dtype.hpp"

namespace ridgeline {

enum class ReduceOp { sum, prod, max, min, avg };
const char* reduce_op_name(ReduceOp op);
ReduceOp parse_reduce_op(const std::string& name);

/// Memory a communicator registered for its symmetric collectives (Communicator::
/// symmetric_memory): every rank of the group holds one such block of the same size, and a
/// collective whose buffers lie at the same offset in every rank's block may take the
/// communicator's symmetric path. Every rank destroys it (deregistration is collective), before
/// the communicator that made it.
class SymmetricMemory {
public:
  virtual ~SymmetricMemory() = default;
  virtual void* data() const = 0;
  virtual size_t bytes() const = 0;
  /// How it was allocated and registered, for the output file.
  virtual std::string describe() const = 0;
};

/// One communicator over a group of ranks. Every member calls each collective in the same
/// order. Calls are asynchronous: on NCCL they are enqueued on `stream`; on MPI they start a
/// non-blocking request tied to `stream` (or block when `stream` is null). complete(stream)
/// finishes, from the host's side, what was started on that stream (a no-op on NCCL, whose
/// work is ordered by the stream itself).
class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "nccl" or "mpi".
  virtual const char* backend() const = 0;
  /// True when a collective's completion is ordered by its stream (NCCL): a time stamp queued
  /// right after it marks its end. False when the host must complete() it first (MPI).
  virtual bool stream_ordered() const = 0;

  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                          Stream stream) = 0;
  /// recv holds size() * send_count elements, rank-major.
  virtual void all_gather(const void* send, void* recv, size_t send_count, DType dtype,
                          Stream stream) = 0;
  /// send holds size() * recv_count elements, rank-major.
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                              ReduceOp op, Stream stream) = 0;
  /// send and recv hold size() * count elements; block j of send goes to rank j.
  virtual void all_to_all(const void* send, void* recv, size_t count, DType dtype,
                          Stream stream) = 0;
  /// The all-to-all of blocks of unequal sizes: send_counts[j] elements from send +
  /// send_offsets[j] go to rank j, which receives them at recv + its recv_offsets[me]; every
  /// rank's recv_counts[i] is rank i's send_counts[me] (counts and offsets in elements, size()
  /// each). Asynchronous like all_to_all. This default runs grouped send/recv pairs (NCCL's
  /// all-to-all-v), skipping empty blocks; the MPI communicator runs MPI_Ialltoallv.
  virtual void all_to_all_v(const void* send, const std::vector<size_t>& send_counts,
                            const std::vector<size_t>& send_offsets, void* recv,
                            const std::vector<size_t>& recv_counts,
                            const std::vector<size_t>& recv_offsets, DType dtype, Stream stream);
  virtual void broadcast(const void* send, void* recv, size_t count, DType dtype, int root,
                         Stream stream) = 0;
  virtual void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                      int root, Stream stream) = 0;
  /// Point-to-point: pair send and recv calls inside group_start()/group_end() to avoid
  /// deadlock when two ranks exchange.
  virtual void send(const void* buf, size_t count, DType dtype, int peer, Stream stream) = 0;
  virtual void recv(void* buf, size_t count, DType dtype, int peer, Stream stream) = 0;
  virtual void group_start() = 0;
  virtual void group_end() = 0;
  /// Host-side completion of everything started on `stream` (see class comment).
  virtual void complete(Stream stream) = 0;

  /// Every rank of the group calls with the same `bytes` (collective). A block registered as
  /// one symmetric window over the group (NCCL >= 2.27: ncclMemAlloc + ncclCommWindowRegister
  /// with NCCL_WIN_COLL_SYMMETRIC, which lets NCCL run its symmetric kernels, or under
  /// NCCL_CTA_POLICY_ZERO its copy-engine collectives, on buffers inside it). Null where the
  /// communicator has no such path (MPI, an NCCL built without windows); `why` then says why.
  /// Throws Error on every rank when any rank cannot allocate.
  virtual std::unique_ptr<SymmetricMemory> symmetric_memory(size_t bytes, std::string& why) {
    (void)bytes;
    why = std::string(backend()) + " collectives have no symmetric memory";
    return nullptr;
  }
};

/// MPI implementation over a duplicate of `comm` (every rank of `comm` calls).
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm);

} // namespace ridgeline
