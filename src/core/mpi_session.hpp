// MPI lifetime, world/node-local ranks, and the collective helpers that every command shares.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/progress.hpp"

namespace ridgeline {

/// The environment variable that names a rank's node in place of its host name (tests place
/// ranks of one machine on several nodes with it).
inline constexpr const char* kNodeNameVariable = "RIDGELINE_NODE_NAME";

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
  /// The node this rank runs on: the host name, or RIDGELINE_NODE_NAME where set.
  const std::string& hostname() const { return m_hostname; }
  /// The operating system's host name (hostname() unless RIDGELINE_NODE_NAME renamed the node).
  const std::string& os_hostname() const { return m_os_hostname; }
  /// Every rank's hostname(), element r for world rank r (what the node map is built from).
  const std::vector<std::string>& hosts() const { return m_hosts; }
  /// Whether any rank's node name came from RIDGELINE_NODE_NAME rather than its host.
  bool node_names_given() const { return m_node_names_given; }
  /// Hosts the job runs on (distinct host names over the ranks).
  int nodes() const { return m_nodes; }
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
  int m_nodes = 1;
  std::string m_hostname;
  std::string m_os_hostname;
  std::vector<std::string> m_hosts;
  bool m_node_names_given = false;
  MPI_Comm m_error_comm = MPI_COMM_NULL;
  /// Where every rank of this host is, for the watchdog's message and the progress line.
  std::unique_ptr<progress::Board> m_board;
  MPI_Comm m_local_comm = MPI_COMM_NULL;
};

/// Throws Error: `bytes` received are not a whole number of rows of `row` bytes.
[[noreturn]] void throw_row_size_mismatch(uint64_t bytes, size_t row);

/// Every rank calls: gathers one string from each rank to all ranks.
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine);
/// Every rank calls: true if `ok` is true on every rank.
bool all_ranks_true(MPI_Comm comm, bool ok);
/// Every rank calls: broadcasts a string from `root`.
std::string broadcast_string(MPI_Comm comm, const std::string& value, int root);

/// The largest message the transfers below hand to MPI at once: MPI counts are 32-bit ints,
/// so anything larger travels in pieces of this size.
inline constexpr size_t kMaxMessageBytes = size_t{1} << 30;
/// Sends `bytes` bytes (any size) to `dest`: their 64-bit length, then the bytes in messages of
/// at most `max_message` bytes. Blocking; pairs with recv_length() and recv_payload().
void send_bytes(MPI_Comm comm, int dest, int tag, const void* data, size_t bytes,
                size_t max_message = kMaxMessageBytes);
/// The length that send_bytes() sent first from `source`.
uint64_t recv_length(MPI_Comm comm, int source, int tag);
/// Receives the `bytes` bytes that follow the length, into `data`.
void recv_payload(MPI_Comm comm, int source, int tag, void* data, size_t bytes,
                  size_t max_message = kMaxMessageBytes);

/// Sends rows of a trivially copyable type with send_bytes().
template <class Row>
void send_rows(MPI_Comm comm, int dest, int tag, const std::vector<Row>& rows,
               size_t max_message = kMaxMessageBytes) {
  send_bytes(comm, dest, tag, rows.data(), rows.size() * sizeof(Row), max_message);
}
/// Receives what send_rows() sent from `source`.
template <class Row>
std::vector<Row> recv_rows(MPI_Comm comm, int source, int tag,
                           size_t max_message = kMaxMessageBytes) {
  const uint64_t bytes = recv_length(comm, source, tag);
  std::vector<Row> rows(static_cast<size_t>(bytes / sizeof(Row)));
  if (rows.size() * sizeof(Row) != bytes) throw_row_size_mismatch(bytes, sizeof(Row));
  recv_payload(comm, source, tag, rows.data(), static_cast<size_t>(bytes), max_message);
  return rows;
}

} // namespace ridgeline
