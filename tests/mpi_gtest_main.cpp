// gtest main for every ridgeline test: initialises MPI (built with RIDGELINE_TEST_SESSION: by
// opening the program's MpiSession, which test_session() hands to the suites), keeps gtest's full
// output on rank 0 and only the failures (prefixed with the rank) on the others, and makes every
// rank exit with the same status (any rank failing fails all; every test skipped on every rank
// exits 77). Output is line-buffered and failures go to stderr as they happen, so that a test
// killed by a timeout (a rank that failed an assertion and left a collective its peers still wait
// in) still shows which rank failed where.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#if RIDGELINE_TEST_SESSION
#include "tests/support/test_session.hpp"

namespace ridgeline {
namespace {
MpiSession* g_session = nullptr;
} // namespace

MpiSession& test_session() {
  return *g_session;
}
} // namespace ridgeline
#endif

namespace {

// The exit status ctest reads as "skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt).
constexpr int kSkipped = 77;

class FailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit FailurePrinter(int rank) : m_rank(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", m_rank,
                 r.file_name() != nullptr ? r.file_name() : "(unknown file)", r.line_number(),
                 r.summary());
  }

private:
  int m_rank;
};

} // namespace

int main(int argc, char** argv) {
#if RIDGELINE_TEST_SESSION
  ridgeline::MpiSession session(&argc, &argv); // finalises MPI when main returns
  ridgeline::g_session = &session;
#else
  MPI_Init(&argc, &argv);
#endif
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int local = RUN_ALL_TESTS();
  int global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // Every test skipped on every rank (a GPU test without a device): ctest's skip status.
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  int all_skipped = unit.successful_test_count() == 0 && unit.skipped_test_count() > 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_skipped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (global == 0 && all_skipped) global = kSkipped;
#if !RIDGELINE_TEST_SESSION
  MPI_Finalize();
#endif
  return global;
}
