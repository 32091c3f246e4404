// NCCL communicator on real GPUs under mpiexec -n 2: all-reduce, all-gather, the all-to-all-v of
// an MoE dispatch (uneven and empty blocks) and a captured all-reduce replayed from a CUDA graph.
// Skips with fewer than two ranks or two devices.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "collectives/half_types.hpp"
#include "collectives/nccl_communicator.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {
namespace {

class NcclCuda : public ::testing::Test {
protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
    const int devices = cuda_device_count();
    if (m_size < 2 || devices < 2) GTEST_SKIP() << "needs 2 ranks and 2 devices";
    m_backend = make_cuda_backend(m_rank % devices, DType::bf16);
    m_comm = make_nccl_communicator(MPI_COMM_WORLD, NcclOptions{});
  }
  int m_rank = 0;
  int m_size = 1;
  // Declared first, destroyed last: NCCL communicators must outlive the CUDA graphs (owned
  // by the backend) that captured their collectives.
  std::unique_ptr<Communicator> m_comm;
  std::unique_ptr<Backend> m_backend;
};

TEST_F(NcclCuda, AllReduceAndAllGather) {
  const int64_t n = 1000003; // odd count: no chunk divides it evenly
  Buffer buf = m_backend->allocate(1, n);
  const Tensor t = buf.view(1, n, DType::bf16);
  m_backend->fill_value(t, static_cast<float>(m_rank + 1));
  m_backend->join(Lane::comm, Lane::compute);
  Stream s = m_backend->stream(Lane::comm);
  m_comm->all_reduce(t.data, t.data, static_cast<size_t>(n), DType::bf16, ReduceOp::sum, s);
  nccl_wait_with_timeout(*m_comm, s, 60);
  const float expected = static_cast<float>(m_size * (m_size + 1) / 2);
  int wrong = 0;
  for (float x : m_backend->to_host(t))
    wrong += x != expected;
  EXPECT_EQ(wrong, 0);

  Buffer gathered = m_backend->allocate(m_size, 64);
  Buffer mine = m_backend->allocate(1, 64);
  m_backend->fill_value(mine.view(1, 64, DType::bf16), static_cast<float>(m_rank));
  m_backend->join(Lane::comm, Lane::compute);
  m_comm->all_gather(mine.data(), gathered.data(), 64, DType::bf16, s);
  nccl_wait_with_timeout(*m_comm, s, 60);
  const std::vector<float> all = m_backend->to_host(gathered.view(m_size, 64, DType::bf16));
  for (int r = 0; r < m_size; ++r)
    EXPECT_EQ(all[static_cast<size_t>(r * 64)], r);
}

// Rank src's block for rank dst: its element count (some empty) and element i's value (small
// integers, exact in bf16).
size_t a2a_count(int src, int dst) {
  return static_cast<size_t>((src * 3 + dst * 5) % 7) * 100 + static_cast<size_t>((src + dst) % 3);
}
float a2a_value(int src, int dst, size_t i) {
  return static_cast<float>(src * 8 + dst + static_cast<int>(i % 4) * 64);
}

TEST_F(NcclCuda, AllToAllVOfUnevenBlocks) {
  const size_t n = static_cast<size_t>(m_size);
  std::vector<size_t> sc(n), so(n), rc(n), ro(n);
  size_t st = 0, rt = 0;
  for (int j = 0; j < m_size; ++j) {
    so[j] = st;
    st += sc[j] = a2a_count(m_rank, j);
    ro[j] = rt;
    rt += rc[j] = a2a_count(j, m_rank);
  }
  std::vector<uint16_t> host(st);
  for (int j = 0; j < m_size; ++j)
    for (size_t i = 0; i < sc[j]; ++i)
      host[so[j] + i] = float_to_bf16(a2a_value(m_rank, j, i));
  Buffer send = m_backend->allocate_bytes(2 * st + 2), recv = m_backend->allocate_bytes(2 * rt + 2);
  m_backend->upload(send.data(), host.data(), 2 * st);
  Stream s = m_backend->stream(Lane::comm);
  m_comm->all_to_all_v(send.data(), sc, so, recv.data(), rc, ro, DType::bf16, s);
  nccl_wait_with_timeout(*m_comm, s, 60);
  std::vector<uint16_t> got(rt);
  m_backend->download(got.data(), recv.data(), 2 * rt);
  size_t wrong = 0;
  for (int i = 0; i < m_size; ++i)
    for (size_t k = 0; k < rc[i]; ++k)
      wrong += bf16_to_float(got[ro[i] + k]) != a2a_value(i, m_rank, k);
  EXPECT_EQ(wrong, 0u);
}

TEST_F(NcclCuda, CapturedAllReduceReplays) {
  Buffer buf = m_backend->allocate(1, 4096);
  const Tensor t = buf.view(1, 4096, DType::bf16);
  m_backend->fill_value(t, 1.0f);
  m_backend->synchronize();
  Stream s = m_backend->stream(Lane::comm);
  m_backend->capture_begin(Lane::comm);
  m_comm->all_reduce(t.data, t.data, 4096, DType::bf16, ReduceOp::sum, s);
  const int id = m_backend->capture_end(Lane::comm);
  m_backend->replay(id, Lane::comm);
  m_backend->replay(id, Lane::comm);
  nccl_wait_with_timeout(*m_comm, s, 60);
  const float expected = static_cast<float>(m_size * m_size); // 1 -> n -> n^2
  int wrong = 0;
  for (float x : m_backend->to_host(t))
    wrong += x != expected;
  EXPECT_EQ(wrong, 0);
}

} // namespace
} // namespace ridgeline
