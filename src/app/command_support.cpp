// Shared command helpers.
#include "app/command_support.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "app/host_memory.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {

std::string utc_now(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, &tm);
  return buf;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

std::string output_path(MPI_Comm comm, const std::string& out, const std::string& kind) {
  if (!out.empty()) return out;
  mkdir("results", 0755);
  return broadcast_string(comm, "results/ridgeline-" + (kind.empty() ? "" : kind + "-") + utc_now("%Y%m%dT%H%M%SZ") + ".h5", 0);
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

int64_t available_host_bytes(int local_ranks) {
  const HostMemory node = host_memory(MemorySources::of_this_process());
  return node.bytes < 0 ? -1 : node.bytes / std::max(1, local_ranks);
}

bool reject_if_any(const CommandContext& ctx, const std::string& what,
                   const std::vector<std::string>& problems) {
  if (all_ranks_true(ctx.mpi.world(), problems.empty())) return false;
  if (ctx.mpi.rank() == 0) {
    std::cerr << "ridgeline: " << what << ":\n";
    for (const std::string& p :
         problems.empty() ? std::vector<std::string>{"another rank rejected the configuration"} : problems)
      std::cerr << "  - " << p << "\n";
  }
  return true;
}

std::string link_matrix_text() {
  std::vector<std::string> rows;
  for (const auto& row : gpu_link_matrix()) rows.push_back(join(row, " "));
  return join(rows, "; ");
}

}  // namespace ridgeline
