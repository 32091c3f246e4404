// The progress board under MPI: every rank sees every other rank of its host, and a rank that
// waits names the one that did not reach its phase (or says that it is itself behind).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <climits>
#include <string>

#include "core/progress.hpp"

namespace ridgeline {
namespace {

std::string host_name() {
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

TEST(ProgressBoard, NamesTheRankBehind) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  progress::Board board(MPI_COMM_WORLD, rank, host_name());
  ASSERT_EQ(progress::board(), &board);
  progress::set_phase("setting up");
  progress::set_iteration(4);
  // Rank 0 goes on to the next phase; the others stay at iteration 4 of the first.
  if (rank == 0) {
    progress::set_phase("the barrier after setting up");
    progress::set_iteration(0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  bool other_host = true;
  const std::string why = board.diagnose(&other_host);
  EXPECT_FALSE(other_host);
  if (rank == 0) {
    EXPECT_NE(why.find("rank 1 (host " + host_name() +
                       ") did not reach the barrier after setting up, iteration 0: "
                       "it is still running, in setting up, iteration 4"),
              std::string::npos)
        << why;
  } else {
    EXPECT_NE(
        why.find(
            "this rank is the one behind: rank(s) 0 already went past setting up, iteration 4"),
        std::string::npos)
        << why;
  }
  // Everyone level again (once every rank has read the board): nobody to name.
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) {
    progress::set_phase("the barrier after setting up");
    progress::set_iteration(0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_NE(board.diagnose().find("no rank is missing"), std::string::npos) << board.diagnose();
  MPI_Barrier(MPI_COMM_WORLD);
}

} // namespace
} // namespace ridgeline
