// The job context: what every point of a job shares and builds once — the backend on this
// rank's device, the process grids and their communicators, the transport, the stack
// fingerprint. `run`, `sweep` and `roofs` drive their points through it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "app/commands.hpp"
#include "app/run_data.hpp"
#include "collectives/communicator.hpp"
#include "collectives/ipc_allreduce.hpp"
#include "collectives/nccl_communicator.hpp"
#include "collectives/peer_exchange.hpp"
#include "core/gpu_binding.hpp"
#include "models/backend.hpp"
#include "parallel/grid.hpp"

namespace ridgeline {

/// How the tensor-parallel group all-reduces (`--allreduce`): "nccl", or the custom all-reduce
/// ("oneshot", "push", "push-ll", "twoshot") for messages up to `max_bytes`.
struct TpAllReduce {
  std::string algo = "nccl"; ///< nccl | oneshot | push | push-ll | twoshot | auto
  size_t max_bytes = 0;
  std::string table_path;             ///< with auto: where `table` came from
  std::vector<AllReduceTiming> table; ///< with auto: the measured times it chooses from
};

/// A grid's communicators: TP and PP (null where the degree is 1).
struct GridComms {
  std::unique_ptr<ProcessGrid> grid;
  std::unique_ptr<Communicator> tp, pp, dp;
};

/// This rank's GPU (device_for_local_rank) and the GPUs its node's ranks use between them,
/// gathered over the node; `problems` holds every node's refusal (decide_gpu_placement), the
/// same list on every rank. Collective over the world; without `cuda` no GPU is bound.
struct GpuBindingResult {
  GpuBinding binding;
  std::vector<std::string> problems;
};
GpuBindingResult bind_gpu(const MpiSession& mpi, bool cuda, bool allow_shared_gpu);

/// The rank -> GPU map's /topology entries: local_size, gpus_visible, gpu_shared_by.
Attrs gpu_binding_attrs(const MpiSession& mpi, const GpuBinding& binding);

class JobContext {
public:
  /// Picks the device (`backend`: auto | host | cuda; auto takes the GPU when one is visible)
  /// and checks its node's placement (placement_problems()). Creates nothing yet; every rank
  /// constructs it with the same arguments (collective).
  JobContext(CommandContext& cmd, const std::string& backend, bool allow_shared_gpu = false);
  ~JobContext();
  JobContext(const JobContext&) = delete;
  JobContext& operator=(const JobContext&) = delete;

  MpiSession& mpi() { return m_cmd.mpi; }
  const std::vector<std::string>& argv() const { return m_cmd.argv; }
  const CommandContext& command() const { return m_cmd; }
  /// "cuda" or "host".
  const std::string& backend_name() const { return m_backend_name; }
  bool cuda() const { return m_cuda; }
  int gpus() const { return m_gpus; }
  /// This rank's CUDA device (-1 on the host backend).
  int device() const { return m_binding.device; }
  /// Every node whose ranks would share GPUs without --allow-shared-gpu (the same on every
  /// rank; empty when the placement is fine): a command rejects the job with them (exit 2).
  const std::vector<std::string>& placement_problems() const { return m_placement_problems; }

  /// Sets the NCCL transport preset (auto | nvlink | host | net) before any communicator
  /// exists; returns warnings for rank 0 to print. NCCL reads its environment once per
  /// process, so a job has one transport: a second, different call throws UsageError.
  std::vector<std::string> use_transport(const std::string& transport);
  /// The job's transport: the preset's name on NCCL, "mpi" on the host backend.
  std::string transport() const;

  /// The backend storing `dtype` (cuda: bf16 or fp16; host: fp32), created on first use.
  Backend& backend(DType dtype, bool comm_priority = true);
  /// The grid tp x pp x dp with its TP and PP communicators, created on first use (every rank
  /// asks for the same grids in the same order: creation is collective).
  GridComms& grid(int tp, int pp, int dp, const NcclOptions& nccl,
                  const TpAllReduce& all_reduce = {});
  /// A communicator over `comm` (NCCL on GPUs, MPI on the host) with NCCL's defaults and the
  /// job's transport; every rank of `comm` calls.
  std::unique_ptr<Communicator> make_communicator(MPI_Comm comm, const NcclOptions& nccl);
  /// A PeerExchange over `comm` with windows of these sizes (CUDA IPC and the copy engines on
  /// GPUs, MPI messages on the host); every rank of `comm` calls.
  std::unique_ptr<PeerExchange> make_exchange(MPI_Comm comm,
                                              const std::vector<size_t>& window_bytes) const;
  /// Frees every grid and backend (e.g. before a point that needs the memory); collective.
  void release();

  /// The smallest free memory of any rank (GPU memory, or host memory per rank: the least of
  /// MemAvailable, the cgroup's and Slurm's limits, split over the node's ranks); collective.
  int64_t min_free_bytes();
  /// What bound the last min_free_bytes(): e.g. "cgroup v2 memory.max on host n1 (rank 4)".
  const std::string& free_bytes_bound() const { return m_free_bytes_bound; }

  /// Root attributes of an output file of `command`.
  Attrs root_attrs(const std::string& command) const;
  /// Stack fingerprint (/stack) with the clock, the GPU link matrix and the transport.
  Attrs stack() const;
  /// Every rank's topology entry with `extra` appended, on rank 0 (collective).
  std::vector<Attrs> topology(const Attrs& extra);

private:
  CommandContext& m_cmd;
  std::string m_backend_name;
  bool m_cuda = false;
  int m_gpus = 0;
  GpuBinding m_binding;
  std::vector<std::string> m_placement_problems;
  std::string m_free_bytes_bound;
  std::string m_transport; ///< set once by use_transport ("" = not yet: auto)
  std::vector<std::pair<std::string, std::string>> m_transport_env;
  // Declared before the backends so that they are destroyed after them: an NCCL communicator
  // must outlive the CUDA graphs (owned by a backend) that captured its collectives.
  std::map<std::tuple<int, int, int, int, int, std::string, std::string, size_t, std::string>,
           GridComms>
      m_grids;
  std::map<std::pair<DType, bool>, std::unique_ptr<Backend>> m_backends;
};

} // namespace ridgeline
