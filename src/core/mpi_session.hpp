// MPI lifetime, world/node-local ranks, and the collective helpers that every command shares.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace ridgeline {

/// RAII owner of MPI_Init/MPI_Finalize. Exactly one per process; every rank constructs it.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return m_rank; }
  int size() const { return m_size; }
  /// Rank among the processes of this host (MPI_Comm_split_type shared); picks the GPU.
  int local_rank() const { return m_local_rank; }
  int local_size() const { return m_local_size; }
  const std::string& hostname() const { return m_hostname; }
  MPI_Comm world() const { return MPI_COMM_WORLD; }
  /// The ranks of this host (local_rank() is the rank in it); e.g. to agree on GPU placement.
  MPI_Comm local() const { return m_local_comm; }

  /// Ends the whole job with `code` (MPI_Abort): never leaves other ranks waiting.
  [[noreturn]] void abort(int code) const;
  /// Called by a rank that failed: true if every rank reports failure within `seconds`
  /// (a deterministic error seen everywhere, printed once by rank 0), false if some rank is
  /// still working (the failing rank must then abort the job). Uses a private communicator,
  /// so it never matches a collective the other ranks are in.
  bool all_ranks_failed(double seconds) const;

 private:
  int m_rank = 0;
  int m_size = 1;
  int m_local_rank = 0;
  int m_local_size = 1;
  std::string m_hostname;
  MPI_Comm m_error_comm = MPI_COMM_NULL;
  MPI_Comm m_local_comm = MPI_COMM_NULL;
};

/// Every rank calls: gathers one string from each rank to all ranks.
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine);
/// Every rank calls: true if `ok` is true on every rank.
bool all_ranks_true(MPI_Comm comm, bool ok);
/// Every rank calls: broadcasts a string from `root`.
std::string broadcast_string(MPI_Comm comm, const std::string& value, int root);

}  // namespace ridgeline
