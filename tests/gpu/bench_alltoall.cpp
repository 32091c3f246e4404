// The all-to-all-v alone under mpiexec (one GPU a rank, one node): NCCL's (grouped
// ncclSend/ncclRecv) beside the project's over CUDA IPC (`run --a2a ipc`), every rank sending
// each rank a block of --bytes, taking turns, --reps calls each timed with CUDA events on rank
// 0's stream after a barrier; the median per call and the bytes leaving each GPU per second.
// Exits 77 (skipped) with a note without two ranks, or without a device for each rank (NCCL
// refuses two ranks on one GPU).
#include <cuda_runtime.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/ipc_alltoall.hpp"
#include "collectives/nccl_communicator.hpp"
#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"
#include "tests/support/event_times.hpp"

namespace ridgeline {
namespace {

// Median per call (us) of `reps` calls after `warmup` and a barrier, each its own event pair.
double median_us(cudaStream_t s, int warmup, int reps, const std::function<void()>& call) {
  for (int i = 0; i < warmup; ++i)
    call();
  RIDGELINE_CHECK(cudaStreamSynchronize(s));
  RIDGELINE_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  const std::vector<double> ms = event_times_ms(s, 0, reps, call);
  return 1e3 * ms[ms.size() / 2];
}

int run(int argc, char** argv) {
  CLI::App app("All-to-all-v alone: NCCL beside the project's over CUDA IPC");
  std::string sizes = "16384,262144,1048576,3670016,16777216";
  int warmup = 5, reps = 50, turns = 3;
  app.add_option("--bytes", sizes, "Comma list: bytes every rank sends every rank")
      ->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--reps", reps)->capture_default_str();
  app.add_option("--turns", turns, "Rounds of NCCL then IPC")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int devices = cuda_device_count();
  // Each rank's GPU by its PCI bus id, gathered, so that every rank takes the same decision.
  char bus[32] = {};
  if (devices > 0 && cudaDeviceGetPCIBusId(bus, sizeof(bus), rank % devices) != cudaSuccess)
    bus[0] = '\0';
  std::vector<char> buses(sizeof(bus) * static_cast<size_t>(size));
  MPI_Allgather(bus, sizeof(bus), MPI_CHAR, buses.data(), sizeof(bus), MPI_CHAR, MPI_COMM_WORLD);
  std::set<std::string> distinct;
  for (int r = 0; r < size; ++r)
    distinct.insert(std::string(buses.data() + sizeof(bus) * static_cast<size_t>(r)));
  if (size < 2 || distinct.count("") > 0 || distinct.size() < static_cast<size_t>(size)) {
    if (rank == 0)
      std::cout << "bench_alltoall: needs two ranks or more, each with a GPU of its own (NCCL "
                   "refuses two ranks on one GPU); nothing timed\n";
    return 77;
  }
  std::vector<size_t> list;
  std::stringstream in(sizes);
  for (std::string item; std::getline(in, item, ',');)
    list.push_back(std::stoull(item));
  const size_t most = *std::max_element(list.begin(), list.end());
  std::unique_ptr<Backend> gpu = make_cuda_backend(rank % devices, DType::bf16);
  std::unique_ptr<Communicator> nccl = make_nccl_communicator(MPI_COMM_WORLD, NcclOptions{});
  std::unique_ptr<IpcAllToAll> ipc = make_ipc_all_to_all(MPI_COMM_WORLD, most);
  const size_t n = static_cast<size_t>(size);
  Buffer send = gpu->allocate_bytes(n * most), recv = gpu->allocate_bytes(n * most);
  const cudaStream_t s = static_cast<cudaStream_t>(gpu->stream(Lane::compute));
  if (rank == 0)
    std::printf("%12s %5s %10s %10s %10s %10s %8s\n", "bytes/peer", "turn", "nccl us", "ipc us",
                "nccl GB/s", "ipc GB/s", "nccl/ipc");
  for (const size_t bytes : list) {
    std::vector<size_t> counts(n, bytes), offsets(n);
    for (size_t j = 0; j < n; ++j)
      offsets[j] = j * bytes;
    for (int turn = 1; turn <= turns; ++turn) {
      // bf16 elements for NCCL (bytes / 2 each; the sizes are even), bytes for IPC.
      std::vector<size_t> elems(n, bytes / 2), elem_off(n);
      for (size_t j = 0; j < n; ++j)
        elem_off[j] = offsets[j] / 2;
      const double t_nccl = median_us(s, warmup, reps, [&] {
        nccl->all_to_all_v(send.data(), elems, elem_off, recv.data(), elems, elem_off, DType::bf16,
                           static_cast<Stream>(s));
      });
      const double t_ipc = median_us(s, warmup, reps, [&] {
        ipc->all_to_all_v(send.data(), counts, offsets, recv.data(), counts, offsets,
                          static_cast<Stream>(s));
      });
      // Bytes leaving each GPU: its blocks for the other ranks.
      const double out = static_cast<double>(bytes * (n - 1));
      if (rank == 0)
        std::printf("%12zu %5d %10.2f %10.2f %10.1f %10.1f %8.2f\n", bytes, turn, t_nccl, t_ipc,
                    out / t_nccl * 1e-3, out / t_ipc * 1e-3, t_nccl / t_ipc);
    }
  }
  return 0;
}

} // namespace
} // namespace ridgeline

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 1;
  try {
    rc = ridgeline::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "bench_alltoall: " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
