// Stack fingerprint: what ran, on what, built how.
#include "app/fingerprint.hpp"

#include <cblas.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "app/build_info.hpp"
#include "app/host_memory.hpp"
#include "app/run_file.hpp"
#include "core/error.hpp"
#include "models/attention_cudnn.hpp"
#include "models/cuda_backend.hpp"

extern char** environ;

namespace ridgeline {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

int64_t meminfo_bytes(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  int64_t kib = 0;
  std::string unit;
  while (in >> name >> kib >> unit)
    if (name == std::string(key) + ":") return kib * 1024;
  return -1;
}

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<size_t>(len));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0'))
    s.pop_back();
  const size_t nl = s.find('\n'); // Open MPI appends repository details on further lines
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// Serialises Attrs as tagged lines so that they can cross MPI as one string.
std::string encode(const Attrs& attrs) {
  std::string out;
  for (const auto& [k, v] : attrs) {
    std::string value;
    char tag = 's';
    if (const auto* d = std::get_if<double>(&v)) {
      std::ostringstream o;
      o.precision(17);
      o << *d;
      value = o.str();
      tag = 'd';
    } else {
      value = attr_to_string(v);
      if (std::holds_alternative<int64_t>(v)) tag = 'i';
    }
    std::replace(value.begin(), value.end(), '\n', ' ');
    out += tag + k + '\t' + value + '\n';
  }
  return out;
}

Attrs decode(const std::string& text) {
  Attrs attrs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (line.empty() || tab == std::string::npos) continue;
    const std::string key = line.substr(1, tab - 1);
    const std::string value = line.substr(tab + 1);
    if (line[0] == 'i')
      attrs.emplace_back(key, static_cast<int64_t>(std::stoll(value)));
    else if (line[0] == 'd')
      attrs.emplace_back(key, std::stod(value));
    else
      attrs.emplace_back(key, value);
  }
  return attrs;
}

Attrs gpu_info_attrs(const GpuInfo& g) {
  return {{"gpu_name", g.name},
          {"gpu_uuid", g.uuid},
          {"gpu_pci_bus_id", g.pci_bus_id},
          {"gpu_sm_count", static_cast<int64_t>(g.sm_count)},
          {"gpu_compute_capability",
           std::to_string(g.compute_major) + "." + std::to_string(g.compute_minor)},
          {"gpu_memory_total_bytes", g.memory_total_bytes},
          {"gpu_memory_free_bytes", g.memory_free_bytes},
          {"gpu_sm_clock_mhz", static_cast<int64_t>(g.sm_clock_mhz)},
          {"gpu_sm_clock_max_mhz", static_cast<int64_t>(g.sm_clock_max_mhz)},
          {"gpu_mem_clock_mhz", static_cast<int64_t>(g.mem_clock_mhz)},
          {"gpu_mem_clock_max_mhz", static_cast<int64_t>(g.mem_clock_max_mhz)},
          {"gpu_power_limit_w", g.power_limit_w},
          {"gpu_ecc_enabled", static_cast<int64_t>(g.ecc_enabled)}};
}

// The shared objects a result depends on, as the dynamic loader resolved them: two runs of the
// same library version can still load different files (LD_LIBRARY_PATH, a framework's bundled
// copy), so /stack keeps each one's resolved path and size beside its version.
struct LoadedLibrary {
  const char* prefix; // file-name prefix; longer prefixes first where one extends another
  const char* key;    // the /stack attribute
};
constexpr LoadedLibrary kLoadedLibraries[] = {
    {"libcublasLt.so", "cublaslt_so"},
    {"libcublas.so", "cublas_so"},
    {"libcudart.so", "cuda_runtime_so"},
    {"libcuda.so", "cuda_driver_so"},
    {"libnccl.so", "nccl_so"},
    {"libcudnn.so", "cudnn_so"},
    {"libmpi.so", "mpi_so"},
    {"libhdf5.so", "hdf5_so"},
    {"libhdf5_openmpi.so", "hdf5_so"},
    {"libopenblas.so", "blas_so"},
    {"libopenblas64_.so", "blas_so"},
};

int collect_library(dl_phdr_info* info, size_t, void* data) {
  auto* found = static_cast<Attrs*>(data);
  const char* path = info->dlpi_name;
  if (path == nullptr || path[0] == '\0') return 0;
  const char* slash = std::strrchr(path, '/');
  const std::string base = slash ? slash + 1 : path;
  for (const LoadedLibrary& lib : kLoadedLibraries) {
    if (base.rfind(lib.prefix, 0) != 0) continue;
    const bool seen = std::any_of(found->begin(), found->end(),
                                  [&](const auto& kv) { return kv.first == lib.key; });
    if (seen) break;
    char resolved[PATH_MAX];
    const std::string file = realpath(path, resolved) ? resolved : path;
    struct stat st {};
    const std::string size =
        stat(file.c_str(), &st) == 0 ? " (" + std::to_string(st.st_size) + " bytes)" : "";
    found->emplace_back(lib.key, file + size);
    break;
  }
  return 0;
}

Attrs loaded_libraries() {
  Attrs found;
  dl_iterate_phdr(collect_library, &found);
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return found;
}

} // namespace

Attrs stack_attrs() {
  struct utsname u {};
  uname(&u);
  int mpi_major = 0, mpi_minor = 0;
  MPI_Get_version(&mpi_major, &mpi_minor);
  Attrs a = {{"ridgeline_version", std::string(build::version)},
             {"git_sha", std::string(build::git_sha)},
             {"build_type", std::string(build::build_type)},
             {"debug_build", static_cast<int64_t>(build::debug ? 1 : 0)},
             {"compiler", std::string(build::cxx_compiler)},
             {"cxx_flags", std::string(build::cxx_flags)},
             {"cuda_enabled", static_cast<int64_t>(build::cuda_enabled ? 1 : 0)},
             {"cuda_compiler", std::string(build::cuda_compiler)},
             {"cuda_architectures", std::string(build::cuda_architectures)},
             {"mpi_library", mpi_library()},
             {"mpi_standard", std::to_string(mpi_major) + "." + std::to_string(mpi_minor)},
             {"hdf5", hdf5_library_version()},
             {"hdf5_build", hdf5_build()},
             {"blas", std::string(openblas_get_config())},
             {"blas_threads", static_cast<int64_t>(openblas_get_num_threads())},
             {"kernel", std::string(u.sysname) + " " + u.release},
             {"os_machine", std::string(u.machine)}};
  for (const auto& [k, v] : cuda_stack_versions())
    a.emplace_back(k, v);
  for (const auto& [k, v] : loaded_libraries())
    a.emplace_back(k, v);
  // cuDNN: the headers built against, and the library loaded (only once --attention cudnn ran).
  a.emplace_back("cudnn_build", cudnn_build_version());
  if (const std::string loaded = cudnn_loaded_version(); !loaded.empty())
    a.emplace_back("cudnn", loaded);
  return a;
}

Attrs node_name_attrs(const MpiSession& mpi) {
  if (!mpi.node_names_given()) return {};
  return {{"node_names", std::string(kNodeNameVariable)}};
}

std::vector<std::pair<std::string, std::string>> performance_env() {
  // RIDGELINE_*: the project's own switches, so that compare names the one an A/B changed.
  static const char* const prefixes[] = {"NCCL_",   "CUDA_",  "OMPI_",     "UCX_",
                                         "SLURM_",  "OMP_",   "OPENBLAS_", "PMIX_RANK",
                                         "NVIDIA_", "CUBLAS", "RIDGELINE_"};
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    for (const char* p : prefixes)
      if (name.rfind(p, 0) == 0) {
        out.emplace_back(name, entry.substr(eq + 1));
        break;
      }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Attrs rank_topology(const MpiSession& mpi, const std::string& backend, int device,
                    const Attrs& extra) {
  Attrs a = {{"rank", static_cast<int64_t>(mpi.rank())},
             {"host", mpi.hostname()},
             {"local_rank", static_cast<int64_t>(mpi.local_rank())},
             {"pid", static_cast<int64_t>(getpid())},
             {"cpu_model", cpu_model()},
             {"cpu_threads", static_cast<int64_t>(std::thread::hardware_concurrency())},
             {"memory_total_bytes", meminfo_bytes("MemTotal")},
             {"backend", backend},
             {"device", static_cast<int64_t>(device)}};
  // Nodes named by RIDGELINE_NODE_NAME: `host` is the node's name, this the machine's.
  if (mpi.node_names_given()) a.emplace_back("os_host", mpi.os_hostname());
  // What this node's ranks may use after cgroup and Slurm limits, and which limit bound it.
  const HostMemory usable = host_memory(MemorySources::of_this_process());
  a.emplace_back("host_memory_usable_bytes", usable.bytes);
  a.emplace_back("host_memory_bound_by", usable.bound_by);
  if (backend == "cuda") {
    const GpuInfo g = query_gpu(device);
    for (auto& kv : gpu_info_attrs(g))
      a.push_back(std::move(kv));
  }
  for (const auto& kv : extra)
    a.push_back(kv);
  return a;
}

std::vector<Attrs> gather_attrs(MPI_Comm comm, const Attrs& mine) {
  const std::vector<std::string> all = allgather_strings(comm, encode(mine));
  std::vector<Attrs> out;
  for (const std::string& s : all)
    out.push_back(decode(s));
  return out;
}

} // namespace ridgeline
