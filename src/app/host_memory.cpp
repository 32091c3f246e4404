// Host memory limits (see host_memory.hpp).
#include "app/host_memory.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace ridgeline {
namespace {

// cgroup v1 reports "no limit" as a page-rounded LONG_MAX; anything this large is no limit.
constexpr int64_t kUnlimited = int64_t{1} << 60;

bool is_dir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The integer a cgroup file holds; -1 when absent, "max" or not a number.
int64_t read_int_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty()) return -1;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  return end != nullptr && *end == '\0' && v >= 0 ? static_cast<int64_t>(v) : -1;
}

void consider(HostMemory& best, int64_t bytes, const std::string& what) {
  if (bytes >= 0 && (best.bytes < 0 || bytes < best.bytes)) best = {bytes, what};
}

// The directories of cgroup `path` under the hierarchy mounted at `mount`, the process's own
// first and then each ancestor up to the mount. A container that sees only its own cgroup has
// the mount as its root: then the mount alone.
std::vector<std::string> cgroup_chain(const std::string& mount, std::string path) {
  if (!is_dir(mount)) return {};
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  if (path.empty() || path == "/" || !is_dir(mount + path)) return {mount};
  std::vector<std::string> dirs;
  for (;;) {
    dirs.push_back(mount + path);
    const size_t slash = path.rfind('/');
    if (slash == 0 || slash == std::string::npos) break;
    path = path.substr(0, slash);
  }
  dirs.push_back(mount);
  return dirs;
}

// The least headroom (limit - usage) over `dirs`, -1 where no directory has a limit.
int64_t cgroup_headroom(const std::vector<std::string>& dirs, const char* limit_file,
                        const char* usage_file) {
  int64_t least = -1;
  for (const std::string& dir : dirs) {
    const int64_t limit = read_int_file(dir + "/" + limit_file);
    if (limit < 0 || limit >= kUnlimited) continue;
    const int64_t usage = std::max<int64_t>(0, read_int_file(dir + "/" + usage_file));
    const int64_t headroom = std::max<int64_t>(0, limit - usage);
    if (least < 0 || headroom < least) least = headroom;
  }
  return least;
}

int64_t env_int(const std::map<std::string, std::string>& env, const char* name) {
  const auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return -1;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  return end != nullptr && *end == '\0' && v >= 0 ? static_cast<int64_t>(v) : -1;
}

int64_t env_megabytes(const std::map<std::string, std::string>& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? -1 : parse_slurm_megabytes(it->second);
}

} // namespace

MemorySources MemorySources::of_this_process() {
  MemorySources s;
  for (const char* name : {"SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "SLURM_CPUS_ON_NODE",
                           "SLURM_MEM_PER_GPU", "SLURM_GPUS_ON_NODE"})
    if (const char* value = std::getenv(name)) s.env[name] = value;
  return s;
}

int64_t parse_slurm_megabytes(const std::string& text) {
  if (text.empty()) return -1;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || v < 0) return -1;
  const std::string suffix(end);
  int64_t unit = int64_t{1} << 20;
  if (suffix == "K" || suffix == "k")
    unit = int64_t{1} << 10;
  else if (suffix == "G" || suffix == "g")
    unit = int64_t{1} << 30;
  else if (suffix == "T" || suffix == "t")
    unit = int64_t{1} << 40;
  else if (!suffix.empty() && suffix != "M" && suffix != "m")
    return -1;
  return static_cast<int64_t>(v) * unit;
}

HostMemory host_memory(const MemorySources& s) {
  HostMemory best;
  {
    std::ifstream in(s.meminfo);
    std::string name, unit;
    int64_t kib = 0;
    while (in >> name >> kib) {
      std::getline(in, unit);
      if (name == "MemAvailable:") consider(best, kib * 1024, "MemAvailable");
    }
  }
  // /proc/self/cgroup: "0::/path" (v2) and "N:ctrl,ctrl:/path" (v1, the memory controller).
  std::ifstream cgroups(s.self_cgroup);
  std::string line;
  while (std::getline(cgroups, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      // v2: mounted at the root (unified) or under unified/ (hybrid systems).
      for (const std::string& mount : {s.cgroup_root, s.cgroup_root + "/unified"})
        consider(best, cgroup_headroom(cgroup_chain(mount, path), "memory.max", "memory.current"),
                 "cgroup v2 memory.max");
    } else {
      std::stringstream list(controllers);
      std::string c;
      bool memory = false;
      while (std::getline(list, c, ','))
        memory = memory || c == "memory";
      if (memory)
        consider(best,
                 cgroup_headroom(cgroup_chain(s.cgroup_root + "/" + controllers, path),
                                 "memory.limit_in_bytes", "memory.usage_in_bytes"),
                 "cgroup v1 memory.limit_in_bytes");
    }
  }
  // Slurm's allocation on this node (0 means the whole node: no limit of its own).
  if (const int64_t per_node = env_megabytes(s.env, "SLURM_MEM_PER_NODE"); per_node > 0)
    consider(best, per_node, "SLURM_MEM_PER_NODE");
  const int64_t per_cpu = env_megabytes(s.env, "SLURM_MEM_PER_CPU");
  const int64_t cpus = env_int(s.env, "SLURM_CPUS_ON_NODE");
  if (per_cpu > 0 && cpus > 0)
    consider(best, per_cpu * cpus, "SLURM_MEM_PER_CPU x SLURM_CPUS_ON_NODE");
  const int64_t per_gpu = env_megabytes(s.env, "SLURM_MEM_PER_GPU");
  const int64_t gpus = env_int(s.env, "SLURM_GPUS_ON_NODE");
  if (per_gpu > 0 && gpus > 0)
    consider(best, per_gpu * gpus, "SLURM_MEM_PER_GPU x SLURM_GPUS_ON_NODE");
  return best;
}

} // namespace ridgeline
