// The collective benchmark's call path on NCCL under mpiexec -n 2: every collective in bf16,
// eager and captured into a CUDA graph (--graph), with #wrong == 0. Skips without 2 devices.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/collective_bench.hpp"
#include "collectives/nccl_communicator.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {
namespace {

constexpr size_t kMaxBytes = size_t{4} << 20;

class CollectivesCuda : public ::testing::Test {
protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
    const int devices = cuda_device_count();
    if (m_size < 2 || devices < 2) GTEST_SKIP() << "needs 2 ranks and 2 devices";
    m_backend = make_cuda_backend(m_rank % devices, DType::bf16);
    m_comm = make_nccl_communicator(MPI_COMM_WORLD, NcclOptions{});
    m_a = m_backend->allocate_bytes(kMaxBytes);
    m_b = m_backend->allocate_bytes(kMaxBytes);
    m_staging.resize(kMaxBytes);
  }

  // Runs `launches` calls (eagerly, or captured into one graph replayed twice), then counts the
  // wrong elements of the last call over every rank. Out of place, every call gives the same
  // output, so repeating it must not change the result.
  int64_t run(const CollectiveSpec& spec, size_t bytes, bool in_place, bool graph) {
    const DType dtype = DType::bf16;
    const CollectiveShape shape = collective_shape(spec, bytes, dtype, m_size);
    const CallBuffers buf =
        call_buffers(in_place_layout(spec, "nccl"), in_place, shape, dtype, m_rank, m_a, m_b);
    upload_inputs(*m_backend, spec, shape, buf, dtype, ReduceOp::sum, m_rank, m_size, m_staging);
    const Stream s = m_backend->stream(Lane::comm);
    if (graph) {
      m_backend->capture_begin(Lane::comm);
      for (int i = 0; i < 3; ++i)
        issue_collective(*m_comm, spec, buf, shape, dtype, ReduceOp::sum, 1, s);
      const int id = m_backend->capture_end(Lane::comm);
      m_backend->replay(id, Lane::comm);
      m_backend->replay(id, Lane::comm);
    } else {
      issue_collective(*m_comm, spec, buf, shape, dtype, ReduceOp::sum, 1, s);
    }
    nccl_wait_with_timeout(*m_comm, s, 60);
    const ResultChecker checker(spec, shape, dtype, ReduceOp::sum, 1, m_rank, m_size);
    int64_t wrong = download_and_count_wrong(*m_backend, checker, buf, dtype, m_staging);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return wrong;
  }

  int m_rank = 0;
  int m_size = 1;
  // Declared first, destroyed last: NCCL communicators must outlive the CUDA graphs (owned
  // by the backend) that captured their collectives.
  std::unique_ptr<Communicator> m_comm;
  std::unique_ptr<Backend> m_backend;
  Buffer m_a;
  Buffer m_b;
  std::vector<unsigned char> m_staging;
};

TEST_F(CollectivesCuda, EveryCollectiveIsExactInBf16) {
  for (const CollectiveSpec& spec : collective_registry())
    for (bool in_place : {false, true})
      for (size_t bytes : size_sweep(8, kMaxBytes, 8))
        EXPECT_EQ(run(spec, bytes, in_place, false), 0)
            << spec.name << " " << bytes << " B" << (in_place ? " in place" : "");
}

TEST_F(CollectivesCuda, CapturedGraphsAreExact) {
  for (const CollectiveSpec& spec : collective_registry())
    for (size_t bytes : {size_t{1024}, size_t{1} << 20})
      EXPECT_EQ(run(spec, bytes, false, true), 0) << spec.name << " " << bytes << " B graph";
}

} // namespace
} // namespace ridgeline
