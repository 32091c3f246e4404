// Shared command helpers.
#include "app/command_support.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <iostream>

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
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char name[64];
  long long kib = 0;
  char unit[16];
  int64_t avail = -1;
  while (std::fscanf(f, "%63s %lld %15s", name, &kib, unit) == 3)
    if (std::string(name) == "MemAvailable:") avail = kib * 1024;
  std::fclose(f);
  return avail < 0 ? -1 : avail / std::max(1, local_ranks);
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

namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// "<stem>-<UTC time>-<pid><extension>" from the path asked for ("ridgeline" when it has no name).
std::string fallback_name(const std::string& requested) {
  std::string name = requested.substr(requested.find_last_of('/') + 1);
  if (name.empty() || name == "." || name == "..") name = "ridgeline";
  const size_t dot = name.find_last_of('.');
  const std::string stem = dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
  const std::string extension = dot == std::string::npos || dot == 0 ? "" : name.substr(dot);
  return stem + "-" + utc_now("%Y%m%dT%H%M%SZ") + "-" + std::to_string(getpid()) + extension;
}

}  // namespace

std::vector<std::string> output_problems(const std::string& path, const std::string& option) {
  const std::string what = option + " '" + path + "'";
  struct stat st {};
  if (!path.empty() && path.back() == '/') return {what + ": names a directory; give a file name"};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return {what + ": is a directory; give a file name"};
  const std::string dir = directory_of(path);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {what + ": directory '" + dir + "' does not exist"};
  // The writer creates a temporary file beside the target and renames it: probe exactly that.
  const std::string probe = path + ".probe." + std::to_string(getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return {what + ": cannot create a file in '" + dir + "': " + std::strerror(errno)};
  ::close(fd);
  if (std::remove(probe.c_str()) != 0)
    return {what + ": cannot remove the probe file '" + probe + "': " + std::strerror(errno)};
  return {};
}

std::vector<std::string> check_outputs(const CommandContext& ctx,
                                       const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<std::string> problems;
  if (ctx.mpi.rank() != 0) return problems;
  for (const auto& [path, option] : outputs)
    if (!path.empty())
      for (std::string& p : output_problems(path, option)) problems.push_back(std::move(p));
  return problems;
}

OutputFile::OutputFile(std::string requested, std::string option)
    : m_requested(std::move(requested)), m_option(std::move(option)) {}

bool OutputFile::write(const std::function<void(const std::string&)>& write) {
  if (!m_moved) {
    try {
      write(m_requested);
      m_path = m_requested;
      m_lost = false;
      return true;
    } catch (const std::exception& e) {
      std::cerr << "ridgeline: cannot write " << m_option << " '" << m_requested << "': " << e.what() << "\n";
      m_moved = true;
    }
  }
  std::vector<std::string> candidates;
  if (!m_fallback.empty()) {
    candidates.push_back(m_fallback);
  } else {
    const char* tmp = std::getenv("TMPDIR");
    const std::string name = fallback_name(m_requested);
    candidates.push_back(std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + name);
    candidates.push_back(name);
  }
  for (const std::string& candidate : candidates) {
    try {
      write(candidate);
    } catch (const std::exception& e) {
      std::cerr << "ridgeline: cannot write the fallback '" << candidate << "' either: " << e.what() << "\n";
      continue;
    }
    if (m_fallback.empty())
      std::cerr << "ridgeline: " << m_option << " results written to '" << candidate << "' instead (exit status "
                << kExitResultsMoved << ")\n";
    m_fallback = m_path = candidate;
    m_lost = false;
    return true;
  }
  m_lost = true;
  return false;
}

int output_status(const std::vector<const OutputFile*>& files) {
  int status = 0;
  for (const OutputFile* f : files) {
    if (f->lost()) return 1;
    if (f->moved()) status = kExitResultsMoved;
  }
  return status;
}

}  // namespace ridgeline
