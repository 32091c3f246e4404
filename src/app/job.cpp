// The job context (see job.hpp).
#include "app/job.hpp"

#include <cstdlib>

#include "app/build_info.hpp"
#include "app/command_support.hpp"
#include "app/fingerprint.hpp"
#include "collectives/transport.hpp"
#include "core/error.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {

JobContext::JobContext(CommandContext& cmd, const std::string& backend) : m_cmd(cmd) {
  m_gpus = cuda_device_count();
  m_cuda = backend == "cuda" || (backend == "auto" && m_gpus > 0);
  m_backend_name = m_cuda ? "cuda" : "host";
  m_device = m_cuda && m_gpus > 0 ? mpi().local_rank() % m_gpus : -1;
}

JobContext::~JobContext() { release(); }

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
  for (const EnvSetting& e : apply_transport(*preset, warnings)) m_transport_env.emplace_back(e.name, e.value);
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
  if (!slot) slot = m_cuda ? make_cuda_backend(m_device, dtype, comm_priority) : make_host_backend();
  return *slot;
}

GridComms& JobContext::grid(int tp, int pp, int dp, const NcclOptions& nccl) {
  GridComms& g = m_grids[{tp, pp, dp, nccl.max_ctas, nccl.min_ctas}];
  if (!g.grid) {
    g.grid = std::make_unique<ProcessGrid>(mpi().world(), tp, pp, dp);
    if (tp > 1) g.tp = make_communicator(g.grid->tp_comm(), nccl);
    if (pp > 1) g.pp = make_communicator(g.grid->pp_comm(), nccl);
  }
  return g;
}

std::unique_ptr<Communicator> JobContext::make_communicator(MPI_Comm comm, const NcclOptions& nccl) {
  if (!m_cuda) return make_mpi_communicator(comm);
  if (m_transport.empty()) use_transport("auto");
  return make_nccl_communicator(comm, nccl);
}

void JobContext::release() {
  m_backends.clear();
  m_grids.clear();
}

int64_t JobContext::min_free_bytes() {
  int64_t free_bytes = m_cuda ? query_gpu(m_device).memory_free_bytes : available_host_bytes(mpi().local_size());
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &free_bytes, 1, MPI_INT64_T, MPI_MIN, mpi().world()));
  return free_bytes;
}

Attrs JobContext::root_attrs(const std::string& command) const {
  return {{"schema_version", kSchemaVersion},
          {"ridgeline_version", std::string(build::version)},
          {"git_sha", std::string(build::git_sha)},
          {"created_utc", utc_now("%Y-%m-%dT%H:%M:%SZ")},
          {"argv", join(m_cmd.argv, " ")},
          {"world_size", static_cast<int64_t>(m_cmd.mpi.size())},
          {"command", command}};
}

Attrs JobContext::stack() const {
  Attrs s = stack_attrs();
  s.emplace_back("clock", std::string(m_cuda ? "cuda_event" : "steady_clock"));
  if (const std::string links = link_matrix_text(); !links.empty()) s.emplace_back("gpu_link_matrix", links);
  s.emplace_back("transport", transport());
  for (const auto& [name, value] : m_transport_env) s.emplace_back(name, value);
  return s;
}

std::vector<Attrs> JobContext::topology(const Attrs& extra) {
  return gather_attrs(mpi().world(), rank_topology(mpi(), m_backend_name, m_device, extra));
}

}  // namespace ridgeline
