// How much host memory this node's ranks may use: the least of what the kernel has available
// (/proc/meminfo), what the memory cgroup leaves (v2 memory.max - memory.current, v1
// memory.limit_in_bytes - memory.usage_in_bytes, the process's cgroup and each ancestor), and what
// Slurm allocated to the job on the node (SLURM_MEM_PER_NODE, SLURM_MEM_PER_CPU x
// SLURM_CPUS_ON_NODE, SLURM_MEM_PER_GPU x SLURM_GPUS_ON_NODE). A job inside a cgroup or a Slurm
// allocation sees the whole machine's MemAvailable, and would be killed long before it is used.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ridgeline {

/// Where the facts are read: the real files and environment, or a test's fakes.
struct MemorySources {
  std::string meminfo = "/proc/meminfo";
  std::string self_cgroup = "/proc/self/cgroup"; ///< the process's cgroup membership
  std::string cgroup_root = "/sys/fs/cgroup";    ///< where the cgroup file systems are mounted
  std::map<std::string, std::string> env;        ///< SLURM_MEM_* and friends
  /// This process's sources: the paths above and its SLURM_* memory variables.
  static MemorySources of_this_process();
};

/// The node's usable host memory and the limit that bound it.
struct HostMemory {
  int64_t bytes = -1; ///< -1 if nothing could be read
  /// "MemAvailable", "cgroup v2 memory.max", "cgroup v1 memory.limit_in_bytes",
  /// "SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU x SLURM_CPUS_ON_NODE",
  /// "SLURM_MEM_PER_GPU x SLURM_GPUS_ON_NODE", or "unknown".
  std::string bound_by = "unknown";
};

/// The least of every limit `sources` name (for the whole node, not per rank).
HostMemory host_memory(const MemorySources& sources);

/// A Slurm memory size ("4096", "4096M", "16G": megabytes unless suffixed K, M, G or T) in bytes;
/// -1 if it is not one.
int64_t parse_slurm_megabytes(const std::string& text);

} // namespace ridgeline
