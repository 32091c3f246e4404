// The job context (see job.hpp).
#include "app/job.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>

#include "app/build_info.hpp"
#include "app/command_support.hpp"
#include "app/fingerprint.hpp"
#include "app/host_memory.hpp"
#include "collectives/ipc_allreduce.hpp"
#include "collectives/transport.hpp"
#include "core/error.hpp"
#include "models/cuda_backend.hpp"
#include "models/kernel_tuning.hpp"

namespace ridgeline {

GpuBindingResult bind_gpu(const MpiSession& mpi, bool cuda, bool allow_shared_gpu) {
  GpuBindingResult r;
  GpuBinding& b = r.binding;
  b.gpus_visible = cuda_device_count();
  b.device = cuda ? device_for_local_rank(mpi.local_rank(), b.gpus_visible) : -1;
  if (b.device >= 0) {
    // The physical GPU, not the ordinal: a launcher that hands each rank its own GPU
    // (CUDA_VISIBLE_DEVICES per task) makes every rank's device 0.
    const GpuInfo info = query_gpu(b.device);
    b.gpu_id = !info.uuid.empty()         ? info.uuid
               : !info.pci_bus_id.empty() ? info.pci_bus_id
                                          : "device " + std::to_string(b.device);
  }
  const std::vector<std::string> node = allgather_strings(mpi.local(), b.gpu_id);
  std::set<std::string> distinct;
  for (const std::string& id : node)
    if (!id.empty()) distinct.insert(id);
  b.node_gpus = static_cast<int>(distinct.size());
  if (!b.gpu_id.empty())
    b.shared_by = static_cast<int>(std::count(node.begin(), node.end(), b.gpu_id));
  // Ranks without a GPU (host backend) place nothing.
  const int ranks_with_gpu =
      static_cast<int>(node.size()) - static_cast<int>(std::count(node.begin(), node.end(), ""));
  const GpuPlacement p =
      decide_gpu_placement(ranks_with_gpu, b.node_gpus, allow_shared_gpu, mpi.hostname());
  // Each node's verdict to every rank, so that rank 0 prints another node's refusal too.
  std::set<std::string> seen;
  for (const std::string& problem :
       allgather_strings(mpi.world(), mpi.local_rank() == 0 ? p.problem : ""))
    if (!problem.empty() && seen.insert(problem).second) r.problems.push_back(problem);
  return r;
}

Attrs gpu_binding_attrs(const MpiSession& mpi, const GpuBinding& b) {
  return {{"local_size", static_cast<int64_t>(mpi.local_size())},
          {"gpus_visible", static_cast<int64_t>(b.gpus_visible)},
          {"gpu_shared_by", static_cast<int64_t>(b.shared_by)}};
}

JobContext::JobContext(CommandContext& cmd, const std::string& backend, bool allow_shared_gpu)
    : m_cmd(cmd) {
  // The CUDA backend's environment switches are checked before any work, on every backend:
  // an A/B whose switch was mistyped would measure the default.
  tuning_env();
  m_gpus = cuda_device_count();
  m_cuda = backend == "cuda" || (backend == "auto" && m_gpus > 0);
  m_backend_name = m_cuda ? "cuda" : "host";
  GpuBindingResult bound = bind_gpu(mpi(), m_cuda, allow_shared_gpu);
  m_binding = bound.binding;
  m_placement_problems = std::move(bound.problems);
  // The bound GPU is current from here on: NCCL binds a communicator, and the custom
  // all-reduce its peer buffers, to the current device, and a job may create them before its
  // backend (which would also make it current). Without this, a run whose roofs were not
  // measured in the job (--roofs none or FILE) created its communicators on device 0 on every
  // rank, which NCCL refuses on a node of several GPUs ("Duplicate GPU detected").
  if (m_cuda && m_binding.device >= 0) use_cuda_device(m_binding.device);
}

JobContext::~JobContext() {
  release();
}

std::vector<std::string> JobContext::use_transport(const std::string& transport) {
  if (!m_transport.empty()) {
    if (transport != m_transport)
      throw UsageError("NCCL reads its environment once per process: a job runs one transport (" +
                       m_transport + "); run one job per transport");
    return {};
  }
  m_transport = transport;
  std::vector<std::string> warnings;
  if (!m_cuda) return warnings;
  const TransportPreset* preset = find_transport(transport);
  if (preset == nullptr) throw UsageError("unknown transport '" + transport + "'");
  for (const EnvSetting& e : apply_transport(*preset, warnings))
    m_transport_env.emplace_back(e.name, e.value);
  if (transport == "nvlink")
    check_nvlink(std::min(m_gpus, mpi().local_size()), gpu_link_matrix(), warnings);
  return warnings;
}

std::string JobContext::transport() const {
  if (!m_cuda) return "mpi";
  return m_transport.empty() ? "auto" : m_transport;
}

Backend& JobContext::backend(DType dtype, bool comm_priority) {
  auto& slot = m_backends[{dtype, comm_priority}];
  if (!slot)
    slot = m_cuda ? make_cuda_backend(m_binding.device, dtype, comm_priority) : make_host_backend();
  return *slot;
}

GridComms& JobContext::grid(int tp, int pp, int dp, const NcclOptions& nccl,
                            const TpAllReduce& all_reduce) {
  GridComms& g =
      m_grids[{tp, pp, dp, nccl.max_ctas, nccl.min_ctas, nccl.cta_policy, all_reduce.algo,
               all_reduce.algo == "nccl" ? 0 : all_reduce.max_bytes, all_reduce.table_path}];
  if (!g.grid) {
    g.grid = std::make_unique<ProcessGrid>(mpi().world(), tp, pp, dp);
    if (tp > 1 && all_reduce.algo != "nccl") {
      // NCCL refuses ranks that share a GPU: such a group all-reduces through the custom
      // all-reduce alone, with MPI beside it for nothing else (see make_ipc_communicator).
      int shared = m_binding.shared_by;
      RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &shared, 1, MPI_INT, MPI_MAX, g.grid->tp_comm()));
      const bool without_nccl = shared > 1 && m_cuda;
      std::function<std::string(size_t)> choose;
      if (all_reduce.algo == "auto") {
        std::vector<AllReduceTiming> table;
        for (const AllReduceTiming& t : all_reduce.table)
          if (!without_nccl || t.impl != "nccl") table.push_back(t);
        if (table.empty())
          throw UsageError("--allreduce-table " + all_reduce.table_path +
                           ": no custom all-reduce measured, and NCCL cannot run where ranks "
                           "share a GPU");
        choose = [table](size_t bytes) { return choose_all_reduce(table, bytes); };
      } else {
        choose = [algo = all_reduce.algo](size_t) { return algo; };
      }
      std::unique_ptr<Communicator> inner = without_nccl
                                                ? make_mpi_communicator(g.grid->tp_comm())
                                                : make_communicator(g.grid->tp_comm(), nccl);
      g.tp = make_ipc_communicator(std::move(inner),
                                   make_ipc_all_reduce(g.grid->tp_comm(), all_reduce.max_bytes),
                                   std::move(choose));
    } else if (tp > 1) {
      g.tp = make_communicator(g.grid->tp_comm(), nccl);
    }
    if (pp > 1) g.pp = make_communicator(g.grid->pp_comm(), nccl);
    if (dp > 1) g.dp = make_communicator(g.grid->dp_comm(), nccl);
  }
  return g;
}

std::unique_ptr<Communicator> JobContext::make_communicator(MPI_Comm comm,
                                                            const NcclOptions& nccl) {
  if (!m_cuda) return make_mpi_communicator(comm);
  if (m_transport.empty()) use_transport("auto");
  return make_nccl_communicator(comm, nccl);
}

std::unique_ptr<PeerExchange>
JobContext::make_exchange(MPI_Comm comm, const std::vector<size_t>& window_bytes) const {
  return m_cuda ? make_ipc_exchange(comm, window_bytes) : make_mpi_exchange(comm, window_bytes);
}

void JobContext::release() {
  m_backends.clear();
  m_grids.clear();
}

int64_t JobContext::min_free_bytes() {
  int64_t free_bytes = -1;
  std::string bound;
  if (m_cuda) {
    free_bytes = query_gpu(m_binding.device).memory_free_bytes;
    bound = "free memory of GPU " + std::to_string(m_binding.device);
  } else {
    const HostMemory node = host_memory(MemorySources::of_this_process());
    free_bytes = node.bytes < 0 ? -1 : node.bytes / std::max(1, mpi().local_size());
    bound = node.bound_by + " / " + std::to_string(mpi().local_size()) + " ranks";
  }
  // The least known figure, and where it came from (ranks that know nothing do not bind).
  struct {
    long value;
    int rank;
  } mine{free_bytes < 0 ? std::numeric_limits<long>::max() : static_cast<long>(free_bytes),
         mpi().rank()},
      least{};
  RIDGELINE_CHECK(MPI_Allreduce(&mine, &least, 1, MPI_LONG_INT, MPI_MINLOC, mpi().world()));
  m_free_bytes_bound = broadcast_string(mpi().world(),
                                        bound + " on host " + mpi().hostname() + " (rank " +
                                            std::to_string(mpi().rank()) + ")",
                                        least.rank);
  if (least.value == std::numeric_limits<long>::max()) {
    m_free_bytes_bound = "unknown";
    return -1;
  }
  return static_cast<int64_t>(least.value);
}

Attrs JobContext::root_attrs(const std::string& command) const {
  return {{"schema_version", kSchemaVersion},
          {"ridgeline_version", std::string(build::version)},
          {"git_sha", std::string(build::git_sha)},
          {"created_utc", utc_now("%Y-%m-%dT%H:%M:%SZ")},
          {"argv", join(m_cmd.argv, " ")},
          {"world_size", static_cast<int64_t>(m_cmd.mpi.size())},
          {"nodes", static_cast<int64_t>(m_cmd.mpi.nodes())},
          {"command", command}};
}

Attrs JobContext::stack() const {
  Attrs s = stack_attrs();
  s.emplace_back("clock", std::string(m_cuda ? "cuda_event" : "steady_clock"));
  // The kernel a fused prefill takes depends on the device and the build (docs/ATTENTION.md).
  if (m_cuda && m_binding.device >= 0)
    s.emplace_back("fused_prefill_kernels",
                   "d64=" + fused_prefill_kernel(m_binding.device, 64) +
                       " d128=" + fused_prefill_kernel(m_binding.device, 128));
  if (const std::string links = link_matrix_text(); !links.empty())
    s.emplace_back("gpu_link_matrix", links);
  s.emplace_back("transport", transport());
  for (auto& kv : node_name_attrs(m_cmd.mpi))
    s.push_back(std::move(kv));
  for (const auto& [name, value] : m_transport_env)
    s.emplace_back(name, value);
  return s;
}

std::vector<Attrs> JobContext::topology(const Attrs& extra) {
  Attrs mine = gpu_binding_attrs(mpi(), m_binding);
  for (const auto& kv : extra)
    mine.push_back(kv);
  return gather_attrs(mpi().world(), rank_topology(mpi(), m_backend_name, m_binding.device, mine));
}

} // namespace ridgeline
