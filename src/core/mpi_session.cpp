// MPI session and small collective helpers.
#include "mpi_session.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>

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
  m_hostname = host;
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
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
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  RIDGELINE_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(),
                                 displs.data(), MPI_CHAR, comm));
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

}  // namespace ridgeline
