// NCCL symmetric memory (ncclMemAlloc + ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC)
// under each CTA policy: all-reduce, all-gather and reduce-scatter exact at odd counts inside a
// window, eagerly and replayed from a CUDA graph; a hundred set-ups and tear-downs without
// losing device memory; a TP stage under symm:none, symm:async and symm:chunked:2, with and
// without sequence parallelism, against the TP1 stage. With one GPU per rank the group is
// MPI_COMM_WORLD; where ranks share a GPU (NCCL refuses that in one communicator) or run alone,
// every rank takes a one-rank communicator of its own, which exercises the allocation,
// registration and tear-down but no transfer between GPUs, and the stage test skips.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/half_types.hpp"
#include "collectives/nccl_communicator.hpp"
#include "core/stats.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"
#include "parallel/tp_layer.hpp"
#include "tests/support/tp1_reference.hpp"

namespace ridgeline {
namespace {

class NcclSymmetricCuda : public ::testing::Test {
protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m_size);
    const int devices = cuda_device_count();
    if (devices < 1) GTEST_SKIP() << "needs a device";
    m_device = m_rank % devices;
    m_group = m_size >= 2 && devices >= m_size;
    m_backend = make_cuda_backend(m_device, DType::bf16);
  }
  std::unique_ptr<Communicator> communicator(const std::string& policy = "") {
    NcclOptions opts;
    opts.cta_policy = policy;
    opts.timeout_s = 60;
    return make_nccl_communicator(m_group ? MPI_COMM_WORLD : MPI_COMM_SELF, opts);
  }
  void upload_bf16(void* dst, const std::vector<float>& values) {
    std::vector<uint16_t> raw(values.size());
    for (size_t i = 0; i < values.size(); ++i)
      raw[i] = float_to_bf16(values[i]);
    m_backend->upload(dst, raw.data(), raw.size() * sizeof(uint16_t));
  }
  std::vector<float> download_bf16(const void* src, size_t count) {
    std::vector<uint16_t> raw(count);
    m_backend->download(raw.data(), src, count * sizeof(uint16_t));
    std::vector<float> out(count);
    for (size_t i = 0; i < count; ++i)
      out[i] = bf16_to_float(raw[i]);
    return out;
  }

  int m_rank = 0, m_size = 1, m_device = 0;
  bool m_group = false; ///< one communicator over every rank (one GPU each)
  /// Declared before the backend, so destroyed after it: ncclCommDestroy waits until every CUDA
  /// graph that captured the communicator's collectives is gone, and the backend owns them.
  std::vector<std::unique_ptr<Communicator>> m_comms;
  std::unique_ptr<Backend> m_backend;
};

// Small integers: exact in bf16, and their sums over a few ranks too.
float value(int rank, size_t i) {
  return static_cast<float>(rank + 1 + static_cast<int>(i % 5));
}

TEST_F(NcclSymmetricCuda, CollectivesExactInsideTheWindowUnderEachPolicy) {
  for (const std::string policy : {"", "default", "efficiency", "zero"}) {
    // Kept past this iteration: its collectives are captured in a graph the backend holds.
    Communicator* comm = m_comms.emplace_back(communicator(policy)).get();
    const int n = comm->size(), me = comm->rank();
    const size_t count = 100003; // odd: no channel split divides it
    const size_t bytes = count * static_cast<size_t>(n) * sizeof(uint16_t);
    std::string why;
    auto mem = comm->symmetric_memory(2 * bytes + 8192, why);
    ASSERT_TRUE(mem) << why;
    EXPECT_NE(mem->describe().find("NCCL_WIN_COLL_SYMMETRIC"), std::string::npos);
    EXPECT_NE(mem->describe().find(policy.empty() ? "NCCL's" : policy), std::string::npos)
        << mem->describe();
    // Two blocks of the window, the second at an odd element offset from a 4 KiB boundary.
    char* a = static_cast<char*>(mem->data());
    char* b = a + bytes + 4096 + 2 * 3;
    const Stream s = m_backend->stream(Lane::comm);

    for (bool graph : {false, true}) {
      const std::string where = "policy '" + policy + "'" + (graph ? ", graph" : "");
      std::vector<float> mine(count);
      for (size_t i = 0; i < count; ++i)
        mine[i] = value(me, i);
      upload_bf16(a, mine);
      std::vector<float> blocks(count * static_cast<size_t>(n));
      for (size_t i = 0; i < blocks.size(); ++i)
        blocks[i] = value(me, i);
      upload_bf16(b, blocks);
      m_backend->synchronize();
      // In place all-reduce of a; all-gather of a's first count elements into b after it; then
      // reduce-scatter of b into a. Each reads what the one before wrote.
      int id = -1;
      if (graph) m_backend->capture_begin(Lane::comm);
      comm->all_reduce(a, a, count, DType::bf16, ReduceOp::sum, s);
      if (!graph) nccl_wait_with_timeout(*comm, s, 60);
      if (!graph) {
        const std::vector<float> got = download_bf16(a, count);
        int64_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int r = 0; r < n; ++r)
            want += value(r, i);
          wrong += got[i] != want;
        }
        EXPECT_EQ(wrong, 0) << "all-reduce, " << where;
        upload_bf16(a, mine);
        m_backend->synchronize();
      }
      comm->all_gather(a, b, count, DType::bf16, s);
      comm->reduce_scatter(b, a, count, DType::bf16, ReduceOp::sum, s);
      if (graph) {
        id = m_backend->capture_end(Lane::comm);
        m_backend->replay(id, Lane::comm);
      }
      nccl_wait_with_timeout(*comm, s, 60);
      // After the all-gather b holds every rank's block (graph: of the all-reduced a); the
      // reduce-scatter then gives each rank n times its own block of b.
      const std::vector<float> gathered = download_bf16(b, count * static_cast<size_t>(n));
      const std::vector<float> reduced = download_bf16(a, count);
      int64_t wrong_gather = 0, wrong_reduce = 0;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
          float want = value(r, i);
          if (graph) {
            want = 0;
            for (int q = 0; q < n; ++q)
              want += value(q, i);
          }
          wrong_gather += gathered[static_cast<size_t>(r) * count + i] != want;
          if (r == me) wrong_reduce += reduced[i] != want * static_cast<float>(n);
        }
      EXPECT_EQ(wrong_gather, 0) << "all-gather, " << where;
      EXPECT_EQ(wrong_reduce, 0) << "reduce-scatter, " << where;
    }
    m_backend->synchronize();
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST_F(NcclSymmetricCuda, HundredSetUpsLeaveNoMemoryBehind) {
  auto comm = communicator();
  std::string why;
  ASSERT_TRUE(comm->symmetric_memory(32u << 20, why)) << why; // first use: NCCL's own state
  m_backend->synchronize();
  MPI_Barrier(MPI_COMM_WORLD);
  const int64_t before = query_gpu(m_device).memory_free_bytes;
  for (int i = 0; i < 100; ++i) {
    auto mem = comm->symmetric_memory(32u << 20, why);
    ASSERT_TRUE(mem) << why;
    ASSERT_GE(mem->bytes(), 32u << 20);
  }
  m_backend->synchronize();
  MPI_Barrier(MPI_COMM_WORLD);
  const int64_t after = query_gpu(m_device).memory_free_bytes;
  // One window holds 32 MiB: a leak of one set-up shows.
  EXPECT_GT(after, before - (16 << 20)) << "free before " << before << ", after " << after;
}

// The symm: strategies on the GPU: each rank's rows of a two-layer prefill stage against the
// TP1 stage, the collectives' buffers in the window.
TEST_F(NcclSymmetricCuda, SymmetricStrategiesMatchTp1) {
  if (!m_group) GTEST_SKIP() << "needs 2 ranks with a GPU each";
  auto comm = communicator();
  for (bool sp : {false, true})
    for (const char* overlap : {"symm:none", "symm:async", "symm:chunked:2"}) {
      StageSpec spec = small_prefill_stage(m_size, m_rank, sp, overlap);
      spec.symmetric_buffers = true;
      OpTable ops;
      TpStage stage(*m_backend, comm.get(), spec, ops);
      EXPECT_NE(stage.symmetric_path().find("ncclCommWindowRegister"), std::string::npos)
          << stage.symmetric_path();
      stage.fill_input(0);
      Recorder rec(m_backend->clock(), ops);
      m_backend->clock().start_epoch();
      stage.forward(rec);
      m_backend->synchronize();
      rec.flush();
      const std::vector<float> got = m_backend->to_host(stage.output());

      const std::vector<float> want = tp1_rank_output(*m_backend, spec);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_LT(relative_l2(got, want), 2e-2)
          << overlap << (sp ? " with" : " without") << " sequence parallelism";
      MPI_Barrier(MPI_COMM_WORLD);
    }
}

} // namespace
} // namespace ridgeline
