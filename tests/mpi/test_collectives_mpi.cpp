// The collective benchmark's call path on the host backend (MPI communicator) under mpiexec -n
// 2 and 4: every collective, 8 B to 1 MiB, fp32 / bf16 / int32, in place and out of place, on
// the whole world and on concurrent groups of 2: #wrong must be 0 everywhere. And the sweep of
// another implementation of a collective (SweepOptions::issue, as `collectives --allreduce`
// sweeps the custom all-reduce): its calls, its name and its #wrong.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <vector>

#include "collectives/collective_bench.hpp"
#include "collectives/collective_runner.hpp"
#include "collectives/communicator.hpp"
#include "core/watchdog.hpp"
#include "models/backend.hpp"
#include "tests/support/mpi_world.hpp"

namespace ridgeline {
namespace {

// Sweeps every collective on `comm_world` split into groups of `group_size`; returns the
// number of wrong elements summed over every rank and a description of the first failure.
int64_t sweep(int group_size, DType dtype, ReduceOp op, bool in_place, int root,
              std::string& first_failure) {
  const int rank = world_rank();
  MPI_Comm group;
  MPI_Comm_split(MPI_COMM_WORLD, rank / group_size, rank, &group);
  int64_t total = 0;
  {
    std::unique_ptr<Backend> backend = make_host_backend();
    std::unique_ptr<Communicator> comm = make_mpi_communicator(group);
    const size_t max_bytes = size_t{1} << 20;
    Buffer a = backend->allocate_bytes(max_bytes);
    Buffer b = backend->allocate_bytes(max_bytes);
    std::vector<unsigned char> staging(max_bytes);
    const int rank = comm->rank();
    const int ranks = comm->size();
    for (const CollectiveSpec& spec : collective_registry())
      for (size_t requested : size_sweep(8, max_bytes, 2)) {
        const CollectiveShape shape = collective_shape(spec, requested, dtype, ranks);
        if (shape.count == 0) continue;
        const CallBuffers buf = call_buffers(in_place_layout(spec, comm->backend()), in_place,
                                             shape, dtype, rank, a, b);
        upload_inputs(*backend, spec, shape, buf, dtype, op, rank, ranks, staging);
        issue_collective(*comm, spec, buf, shape, dtype, op, root, nullptr);
        comm->complete(nullptr);
        const ResultChecker checker(spec, shape, dtype, op, root, rank, ranks);
        int64_t wrong = download_and_count_wrong(*backend, checker, buf, dtype, staging);
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (wrong > 0 && first_failure.empty())
          first_failure = std::string(spec.name) + " " + std::to_string(shape.size_bytes) + " B";
        total += wrong;
      }
  }
  MPI_Comm_free(&group);
  return total;
}

TEST(CollectivesMpi, EverySweepIsExactOutOfPlaceAndInPlace) {
  for (DType dtype : {DType::f32, DType::bf16, DType::i32})
    for (bool in_place : {false, true}) {
      std::string failure;
      EXPECT_EQ(sweep(world_size(), dtype, ReduceOp::sum, in_place, world_size() - 1, failure), 0)
          << dtype_name(dtype) << (in_place ? " in place" : " out of place") << ": " << failure;
    }
}

TEST(CollectivesMpi, EveryReductionOpIsExact) {
  for (DType dtype : {DType::f32, DType::bf16, DType::i32})
    for (ReduceOp op : {ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg}) {
      if (!exactness_problem(dtype, op, world_size()).empty()) continue;
      std::string failure;
      EXPECT_EQ(sweep(world_size(), dtype, op, false, 0, failure), 0)
          << dtype_name(dtype) << " " << reduce_op_name(op) << ": " << failure;
    }
}

TEST(CollectivesMpi, ConcurrentGroupsOfTwo) {
  if (world_size() < 4 || world_size() % 2 != 0) GTEST_SKIP() << "needs 4 ranks";
  for (DType dtype : {DType::f32, DType::bf16, DType::i32})
    for (bool in_place : {false, true}) {
      std::string failure;
      EXPECT_EQ(sweep(2, dtype, ReduceOp::sum, in_place, 1, failure), 0)
          << dtype_name(dtype) << (in_place ? " in place" : " out of place") << ": " << failure;
    }
}

TEST(CollectivesMpi, AFlippedElementIsCounted) {
  // A wrong result on one rank must be seen: corrupt one received element on rank 0.
  std::unique_ptr<Backend> backend = make_host_backend();
  std::unique_ptr<Communicator> comm = make_mpi_communicator(MPI_COMM_WORLD);
  const CollectiveSpec& spec = *find_collective("all_reduce");
  const CollectiveShape shape = collective_shape(spec, 4096, DType::f32, comm->size());
  Buffer a = backend->allocate_bytes(4096);
  Buffer b = backend->allocate_bytes(4096);
  std::vector<unsigned char> staging(4096);
  const CallBuffers buf =
      call_buffers(InPlace::same_buffer, false, shape, DType::f32, comm->rank(), a, b);
  upload_inputs(*backend, spec, shape, buf, DType::f32, ReduceOp::sum, comm->rank(), comm->size(),
                staging);
  issue_collective(*comm, spec, buf, shape, DType::f32, ReduceOp::sum, 0, nullptr);
  if (comm->rank() == 0) static_cast<float*>(buf.recv)[17] += 1.0f;
  const ResultChecker checker(spec, shape, DType::f32, ReduceOp::sum, 0, comm->rank(),
                              comm->size());
  int64_t wrong = download_and_count_wrong(*backend, checker, buf, DType::f32, staging);
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(wrong, 1);
}

TEST(CollectivesMpi, SweepRunsAnotherImplementationUnderItsName) {
  std::unique_ptr<Backend> backend = make_host_backend();
  std::unique_ptr<Communicator> comm = make_mpi_communicator(MPI_COMM_WORLD);
  const CollectiveSpec& all_reduce = *find_collective("all_reduce");
  CollectiveBench bench(*backend, *comm, MPI_COMM_WORLD, MPI_COMM_WORLD, 4096);
  Watchdog watchdog(60, "test sweep");
  SweepOptions opts;
  opts.sizes = {64, 1024, 4096};
  opts.warmup = 2;
  opts.iters = 3;
  opts.name = "all_reduce_by_hand";
  int calls = 0;
  // Another implementation: a correct one (the communicator's, called here), then a wrong one.
  opts.issue = [&](const CallBuffers& buf, const CollectiveShape& shape, Stream stream) {
    ++calls;
    comm->all_reduce(buf.send, buf.recv, shape.count, opts.dtype, ReduceOp::sum, stream);
  };
  CollectiveResult res = bench.sweep(all_reduce, opts, watchdog);
  EXPECT_EQ(res.name, "all_reduce_by_hand");
  ASSERT_EQ(res.rows.size(), 3u);
  EXPECT_EQ(calls, 3 * (2 + 3 + 1)) << "warm-up, timed and checked calls of every size";
  for (const SizeRow& row : res.rows)
    EXPECT_EQ(row.wrong, 0) << row.shape.size_bytes;

  opts.issue = [&](const CallBuffers&, const CollectiveShape&, Stream) {}; // leaves the sentinel
  res = bench.sweep(all_reduce, opts, watchdog);
  for (const SizeRow& row : res.rows)
    EXPECT_EQ(row.wrong, static_cast<int64_t>(row.shape.count) * world_size())
        << row.shape.size_bytes;
  opts.issue = nullptr;
  opts.name.clear();
  EXPECT_EQ(bench.sweep(all_reduce, opts, watchdog).name, "all_reduce");
}

} // namespace
} // namespace ridgeline
