// One device allocation per rank of a group on one node, mapped into every other rank through
// CUDA IPC (handles exchanged over MPI): the memory under the custom all-reduce and the
// copy-engine exchange. Zeroed before any peer maps it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

namespace ridgeline {

class IpcPeerMemory {
public:
  /// Every rank of `comm` calls with the same `bytes`, on the GPU it uses. `what` names the user
  /// in errors. Throws Error on every rank when the group has more than `max_ranks` ranks or any
  /// rank cannot allocate or map a peer's memory (ranks on different nodes).
  IpcPeerMemory(MPI_Comm comm, size_t bytes, const char* what, int max_ranks);
  ~IpcPeerMemory();
  IpcPeerMemory(const IpcPeerMemory&) = delete;
  IpcPeerMemory& operator=(const IpcPeerMemory&) = delete;

  int rank() const { return m_rank; }
  int size() const { return m_size; }
  /// Rank r's allocation as this rank addresses it (this rank's own for r == rank()).
  char* base(int r) const { return m_base[static_cast<size_t>(r)]; }

private:
  // Every rank learns whether every rank succeeded; on a failure all release and throw.
  void agree(MPI_Comm comm, bool mine, const std::string& failure);
  void release() noexcept;
  int m_rank = 0, m_size = 1;
  std::vector<char*> m_base;
};

} // namespace ridgeline
