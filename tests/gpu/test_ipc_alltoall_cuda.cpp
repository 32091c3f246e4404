// The all-to-all-v over CUDA IPC under mpiexec -n 2 (or more): every byte where the counts and
// offsets say, over calls in a row of changing block sizes (empty blocks, byte tails, offsets
// that are and are not 16-byte aligned), the two buffer pairs taking turns; 500 calls in a row
// without a hang; blocks larger than a slot refused. Skips with fewer than two ranks or without a
// device.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "collectives/ipc_alltoall.hpp"
#include "core/error.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {
namespace {

constexpr size_t kBlock = 64u << 10;

/// Bytes rank `src` sends rank `dst` in call `call`: a few multiples of 1000 plus a tail, some 0.
size_t block_bytes(int src, int dst, int call) {
  const size_t units = static_cast<size_t>((src * 5 + dst * 3 + call * 7) % 9);
  return units == 0 ? 0 : units * 1000 + static_cast<size_t>((src + dst + call) % 17);
}
unsigned char byte_of(int src, int dst, size_t i, int call) {
  return static_cast<unsigned char>(src * 37 + dst * 11 + static_cast<int>(i % 251) * 7 + call * 3);
}

class IpcAllToAllCuda : public ::testing::Test {
protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
    const int devices = cuda_device_count();
    if (m_size < 2 || devices < 1) GTEST_SKIP() << "needs 2 ranks and a device";
    m_backend = make_cuda_backend(m_rank % devices, DType::bf16);
    m_a2a = make_ipc_all_to_all(MPI_COMM_WORLD, kBlock);
  }
  void TearDown() override {
    m_a2a.reset();
    m_backend.reset();
  }

  /// One call's layout: blocks in rank order, `gap` bytes before each (16: aligned offsets).
  struct Layout {
    std::vector<size_t> bytes, offsets;
    size_t total = 0;
  };
  Layout layout(bool sending, int call, size_t gap) const {
    Layout l;
    for (int j = 0; j < m_size; ++j) {
      l.total += gap;
      l.offsets.push_back(l.total);
      l.bytes.push_back(sending ? block_bytes(m_rank, j, call) : block_bytes(j, m_rank, call));
      l.total += l.bytes.back();
    }
    return l;
  }

  /// Runs call `call` and returns the number of bytes that arrived wrong.
  size_t run_call(int call) {
    const size_t gap = call % 2 == 0 ? 16 : 3;
    const Layout s = layout(true, call, gap), r = layout(false, call, gap);
    std::vector<unsigned char> host(s.total, 0);
    for (int j = 0; j < m_size; ++j)
      for (size_t i = 0; i < s.bytes[j]; ++i)
        host[s.offsets[j] + i] = byte_of(m_rank, j, i, call);
    Buffer send = m_backend->allocate_bytes(s.total), recv = m_backend->allocate_bytes(r.total);
    m_backend->upload(send.data(), host.data(), host.size());
    m_a2a->all_to_all_v(send.data(), s.bytes, s.offsets, recv.data(), r.bytes, r.offsets,
                        m_backend->stream(Lane::compute));
    m_backend->synchronize();
    std::vector<unsigned char> got(r.total);
    m_backend->download(got.data(), recv.data(), got.size());
    size_t wrong = 0;
    for (int i = 0; i < m_size; ++i)
      for (size_t k = 0; k < r.bytes[i]; ++k)
        wrong += got[r.offsets[i] + k] != byte_of(i, m_rank, k, call);
    return wrong;
  }

  int m_rank = 0, m_size = 1;
  std::unique_ptr<Backend> m_backend;
  std::unique_ptr<IpcAllToAll> m_a2a;
};

TEST_F(IpcAllToAllCuda, EveryByteWhereTheCountsSay) {
  for (int call = 0; call < 9; ++call)
    EXPECT_EQ(run_call(call), 0u) << "call " << call;
}

TEST_F(IpcAllToAllCuda, ManyCallsInARow) {
  const size_t n = static_cast<size_t>(m_size);
  std::vector<size_t> bytes(n, 4096), offsets(n);
  for (size_t j = 0; j < n; ++j)
    offsets[j] = j * 4096;
  Buffer a = m_backend->allocate_bytes(n * 4096), b = m_backend->allocate_bytes(n * 4096);
  for (int i = 0; i < 500; ++i)
    m_a2a->all_to_all_v(i % 2 ? a.data() : b.data(), bytes, offsets, i % 2 ? b.data() : a.data(),
                        bytes, offsets, m_backend->stream(Lane::compute));
  m_backend->synchronize();
  EXPECT_EQ(run_call(1), 0u);
}

TEST_F(IpcAllToAllCuda, RefusesABlockLargerThanItsSlot) {
  const size_t n = static_cast<size_t>(m_size);
  Buffer a = m_backend->allocate_bytes(16);
  std::vector<size_t> bytes(n, 0), offsets(n, 0);
  bytes[0] = m_a2a->max_block_bytes() + 1;
  EXPECT_THROW(m_a2a->all_to_all_v(a.data(), bytes, offsets, a.data(), bytes, offsets,
                                   m_backend->stream(Lane::compute)),
               Error);
  bytes.pop_back();
  EXPECT_THROW(m_a2a->all_to_all_v(a.data(), bytes, offsets, a.data(), bytes, offsets,
                                   m_backend->stream(Lane::compute)),
               Error);
}

} // namespace
} // namespace ridgeline
