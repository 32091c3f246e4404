// Small pieces every command shares: time stamps, host memory, the collective rejection of a
// bad configuration, and the GPU link matrix as text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/commands.hpp"

namespace ridgeline {

/// The current UTC time formatted with strftime `format`.
std::string utc_now(const char* format);
/// `parts` joined with `sep`.
std::string join(const std::vector<std::string>& parts, const char* sep);
/// Every rank calls: `out` if given, else results/ridgeline-<kind>-<UTC time>.h5 (kind empty:
/// results/ridgeline-<UTC time>.h5) with the results directory created and rank 0's time on
/// every rank.
std::string output_path(MPI_Comm comm, const std::string& out, const std::string& kind);
/// The items of a comma-separated list, in order (empty items kept, for validation to refuse).
std::vector<std::string> split_list(const std::string& text);
/// The host memory this node's ranks may use (the least of MemAvailable, the memory cgroup's
/// headroom and Slurm's allocation: host_memory.hpp) split evenly over the `local_ranks` ranks
/// of this host (bytes; -1 if unknown).
int64_t available_host_bytes(int local_ranks);
/// Every rank calls: false when `problems` is empty on every rank; otherwise rank 0 prints
/// "ridgeline: <what>:" and each problem once, and every rank returns true (exit with 2).
bool reject_if_any(const CommandContext& ctx, const std::string& what,
                   const std::vector<std::string>& problems);
/// The local GPUs' link matrix, rows separated by "; " (empty without NVML).
std::string link_matrix_text();

}  // namespace ridgeline
