// MPI session and small collective helpers.
#include "mpi_session.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <set>

#include "error.hpp"

namespace ridgeline {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  RIDGELINE_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  RIDGELINE_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  RIDGELINE_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &m_rank));
  RIDGELINE_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &m_size));
  set_error_rank(m_rank);
  RIDGELINE_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, m_rank, MPI_INFO_NULL,
                                      &m_local_comm));
  RIDGELINE_CHECK(MPI_Comm_rank(m_local_comm, &m_local_rank));
  RIDGELINE_CHECK(MPI_Comm_size(m_local_comm, &m_local_size));
  RIDGELINE_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &m_error_comm));
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof(host) - 1);
  m_os_hostname = host;
  // A node name given to the process places it on a node of that name, whatever host it runs
  // on: several "nodes" on one machine, for tests of what a job across nodes does.
  const char* given = std::getenv(kNodeNameVariable);
  const bool named = given != nullptr && *given != '\0';
  m_hostname = named ? given : m_os_hostname;
  m_node_names_given = !all_ranks_true(MPI_COMM_WORLD, !named);
  m_hosts = allgather_strings(MPI_COMM_WORLD, m_hostname);
  m_nodes = static_cast<int>(std::set<std::string>(m_hosts.begin(), m_hosts.end()).size());
  m_board = std::make_unique<progress::Board>(MPI_COMM_WORLD, m_rank, m_hostname);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  m_board.reset();
  if (m_error_comm != MPI_COMM_NULL) RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(&m_error_comm));
  if (m_local_comm != MPI_COMM_NULL) RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(&m_local_comm));
  RIDGELINE_CHECK_NOTHROW(MPI_Finalize());
}

bool MpiSession::all_ranks_failed(double seconds) const {
  int failed = 1, everyone = 0, done = 0;
  MPI_Request req;
  if (MPI_Iallreduce(&failed, &everyone, 1, MPI_INT, MPI_MIN, m_error_comm, &req) != MPI_SUCCESS)
    return false;
  const double deadline = MPI_Wtime() + seconds;
  while (!done && MPI_Wtime() < deadline) {
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (!done) usleep(1000);
  }
  return done && everyone == 1;
}

void MpiSession::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine) {
  int size = 0;
  RIDGELINE_CHECK(MPI_Comm_size(comm, &size));
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size));
  RIDGELINE_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
  std::vector<int> displs(static_cast<size_t>(size), 0);
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    displs[static_cast<size_t>(r)] = static_cast<int>(total);
    total += lens[static_cast<size_t>(r)];
    // MPI displacements are ints: strings (host names, topology) are far below 2 GiB in all,
    // but a sum that overflowed would corrupt memory rather than fail.
    if (total > INT_MAX)
      throw Error("allgather_strings: more than 2 GiB of strings over the ranks");
  }
  std::string all(static_cast<size_t>(total), '\0');
  RIDGELINE_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                                 MPI_CHAR, comm));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                             static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

bool all_ranks_true(MPI_Comm comm, bool ok) {
  int mine = ok ? 1 : 0;
  int all = 0;
  RIDGELINE_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm));
  return all == 1;
}

std::string broadcast_string(MPI_Comm comm, const std::string& value, int root) {
  int len = static_cast<int>(value.size());
  RIDGELINE_CHECK(MPI_Bcast(&len, 1, MPI_INT, root, comm));
  std::string out = value;
  out.resize(static_cast<size_t>(len));
  RIDGELINE_CHECK(MPI_Bcast(out.data(), len, MPI_CHAR, root, comm));
  return out;
}

void send_bytes(MPI_Comm comm, int dest, int tag, const void* data, size_t bytes,
                size_t max_message) {
  const uint64_t length = bytes;
  RIDGELINE_CHECK(MPI_Send(&length, 1, MPI_UINT64_T, dest, tag, comm));
  const char* at = static_cast<const char*>(data);
  for (size_t sent = 0; sent < bytes;) {
    const size_t piece = std::min({bytes - sent, max_message, static_cast<size_t>(INT_MAX)});
    RIDGELINE_CHECK(MPI_Send(at + sent, static_cast<int>(piece), MPI_BYTE, dest, tag, comm));
    sent += piece;
  }
}

uint64_t recv_length(MPI_Comm comm, int source, int tag) {
  uint64_t length = 0;
  RIDGELINE_CHECK(MPI_Recv(&length, 1, MPI_UINT64_T, source, tag, comm, MPI_STATUS_IGNORE));
  return length;
}

void recv_payload(MPI_Comm comm, int source, int tag, void* data, size_t bytes,
                  size_t max_message) {
  char* at = static_cast<char*>(data);
  for (size_t received = 0; received < bytes;) {
    const size_t piece = std::min({bytes - received, max_message, static_cast<size_t>(INT_MAX)});
    RIDGELINE_CHECK(MPI_Recv(at + received, static_cast<int>(piece), MPI_BYTE, source, tag, comm,
                             MPI_STATUS_IGNORE));
    received += piece;
  }
}

void throw_row_size_mismatch(uint64_t bytes, size_t row) {
  throw Error(std::to_string(bytes) + " bytes received are not a whole number of " +
              std::to_string(row) + "-byte rows");
}

} // namespace ridgeline
