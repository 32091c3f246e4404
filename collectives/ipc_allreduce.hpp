// An all-reduce of the project's own for small messages between the GPUs of one node, without
// NCCL: every rank's buffers are mapped into every other rank through CUDA IPC (handles
// exchanged over MPI), and the ranks meet at barriers of flags written into each other's memory
// (release stores and acquire loads at system scope), or poll the data itself. Four algorithms:
//   - one-shot: every rank copies its input into its own buffer and, after one barrier, reads
//     every peer's whole buffer and reduces it;
//   - push: one-shot with the data moved the other way: every rank writes its input into a slot
//     of every peer's memory and, after one barrier, reduces what it holds. The message crosses
//     the link once, as stores, before the barrier, instead of as loads after it;
//   - push-ll: push without the barrier: slots hold an "empty" bit pattern until the data
//     arrives, so the data is its own flag (as in NCCL's LL protocol) and each rank polls its own
//     slots, sums, and empties them again;
//   - two-shot: every rank reduces its 1/n slice from all peers into its own memory, then
//     gathers every other rank's reduced slice (reduce-scatter then all-gather through peer
//     loads: a second barrier between the two).
// A call is one kernel, which copies the input itself; calls alternate between two sets of
// buffers, so no barrier is needed at a call's end. Stream-ordered and capturable in a CUDA
// graph: each block keeps its barrier epoch, and the rank its call counter, in device memory
// and advances them itself, so a replayed graph waits on fresh flags. No multicast objects are
// used.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/ipc_alltoall.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"

namespace ridgeline {

enum class IpcAlgo { oneshot, push, push_ll, twoshot };
const char* ipc_algo_name(IpcAlgo algo);
/// "oneshot", "push", "push-ll" or "twoshot"; throws UsageError otherwise.
IpcAlgo parse_ipc_algo(const std::string& name);
/// Every algorithm's name, in the order of the enum.
const std::vector<std::string>& ipc_algo_names();

/// The custom all-reduce over one group of ranks of one node, one GPU each (the current device
/// of every rank when it is made). Sum only; f32, bf16 and fp16 (the 16-bit types summed in
/// fp32 and rounded once). Every rank calls every method in the same order with the same
/// arguments; ranks that share a GPU also work (the barrier then waits for the time slice of
/// the other process, so only correctness means anything there).
class IpcAllReduce {
public:
  virtual ~IpcAllReduce() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The largest message (bytes) a call takes.
  virtual size_t max_bytes() const = 0;
  /// recv = sum over ranks of send (count elements), enqueued on `stream`. send and recv may be
  /// the same buffer and may have any alignment of their element type.
  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, IpcAlgo algo,
                          Stream stream) = 0;
};

/// Every rank of `comm` calls; the group must lie on one node and hold at most 8 ranks. Throws
/// UsageError without CUDA, and Error when the peers' memory cannot be mapped.
std::unique_ptr<IpcAllReduce> make_ipc_all_reduce(MPI_Comm comm, size_t max_bytes);

/// One measured size of one all-reduce implementation ("nccl" or a custom one), from a
/// `ridgeline collectives --allreduce ...` file.
struct AllReduceTiming {
  std::string impl;
  size_t bytes = 0;
  double p50_ns = 0;
};

/// The implementation for a message of `bytes` (`run --allreduce auto`): the fastest median at
/// the smallest measured size that holds the message, or at the largest size for a larger
/// message. Throws UsageError on an empty table.
std::string choose_all_reduce(const std::vector<AllReduceTiming>& table, size_t bytes);

/// `inner` with its sum all-reduces of f32, bf16 and fp16 of at most ipc's max_bytes() sent
/// where `choose(bytes)` says: a custom algorithm's name through the custom all-reduce, "nccl"
/// through `inner` (`run --allreduce oneshot|push|push-ll|twoshot|auto`; `ipc` may be null: no
/// custom all-reduce); with `a2a`, every all-to-all-v through it (`run --a2a ipc`; a block larger
/// than its slots throws); every other call goes to `inner`.
/// Stream-ordered. When `inner` is not (MPI: the tensor-parallel group of ranks that share a
/// GPU, where NCCL refuses to run), only the custom all-reduces are possible and any other call
/// throws UsageError.
std::unique_ptr<Communicator> make_ipc_communicator(std::unique_ptr<Communicator> inner,
                                                    std::unique_ptr<IpcAllReduce> ipc,
                                                    std::function<std::string(size_t bytes)> choose,
                                                    std::unique_ptr<IpcAllToAll> a2a = nullptr);

} // namespace ridgeline
