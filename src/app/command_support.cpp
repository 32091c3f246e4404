// Shared command helpers.
#include "app/command_support.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <iostream>
#include <map>
#include <sstream>

#include "app/host_memory.hpp"
#include "collectives/collective_bench.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
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
  for (const std::string& p : parts)
    s += (s.empty() ? "" : sep) + p;
  return s;
}

std::string output_path(MPI_Comm comm, const std::string& out, const std::string& kind) {
  if (!out.empty()) return out;
  mkdir("results", 0755);
  return broadcast_string(comm,
                          "results/ridgeline-" + (kind.empty() ? "" : kind + "-") +
                              utc_now("%Y%m%dT%H%M%SZ") + ".h5",
                          0);
}

std::vector<std::string> split_list(const std::string& text) {
  return split_by(text, ',');
}

std::vector<std::string> split_by(const std::string& text, char separator) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(separator, start);
    items.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

namespace {

// A whole decimal integer (optional sign, digits only) that fits int64_t.
bool parse_integer(const std::string& text, int64_t& value) {
  const size_t digits = text.find_first_not_of("+-") == 1 ? 1 : 0;
  if (text.size() <= digits || text.find_first_not_of("0123456789", digits) != std::string::npos)
    return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return false;
  value = v;
  return true;
}

std::string in_quotes(const std::string& text) {
  return "'" + text + "'";
}

} // namespace

CLI::Validator integer_in(int64_t min, int64_t max) {
  std::string range = max == std::numeric_limits<int64_t>::max()
                          ? "an integer >= " + std::to_string(min)
                          : "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        int64_t v = 0;
        if (!parse_integer(text, v) || v < min || v > max)
          return "expected " + range + ", got " + in_quotes(text);
        return "";
      },
      "", "integer");
}

CLI::Validator number_above(double bound, bool inclusive) {
  std::ostringstream b;
  b << bound;
  const std::string range = std::string("a number ") + (inclusive ? ">= " : "> ") + b.str();
  return CLI::Validator(
      [bound, inclusive, range](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool number = !text.empty() && errno == 0 && end == text.c_str() + text.size() &&
                            std::isfinite(v) &&
                            text.find_first_of("xXnN") == std::string::npos; // no hex, inf or nan
        if (!number || v < bound || (!inclusive && v == bound))
          return "expected " + range + ", got " + in_quotes(text);
        return "";
      },
      "", "number");
}

CLI::Validator regular_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        const std::string kind = not_regular(path);
        return kind.empty() ? "" : in_quotes(path) + " is " + kind + ", not a regular file";
      },
      "", "file");
}

void bind_trace_options(CLI::App& cmd, const TraceOptionFields& f, const char* group) {
  cmd.add_option("--trace", *f.trace, f.help[0])
      ->check(CLI::ExistingFile)
      ->check(regular_file())
      ->group(group);
  cmd.add_option("--trace-gen", *f.trace_gen, f.help[1])->group(group);
  // A step's tokens and sequences; the cache's tokens (the KV cache of every running sequence).
  const int64_t step_most = int64_t{1} << 30, cache_most = int64_t{1} << 40;
  cmd.add_option("--token-budget", *f.token_budget, f.help[2])
      ->check(integer_in(1, step_most))
      ->group(group);
  cmd.add_option("--max-batch", *f.max_batch, f.help[3])
      ->check(integer_in(1, step_most))
      ->group(group);
  cmd.add_option("--kv-capacity", *f.kv_capacity, f.help[4])
      ->check(integer_in(2, cache_most))
      ->group(group);
  cmd.add_option("--slo-ttft-ms", *f.slo_ttft_ms, f.help[5])->check(number_above(0))->group(group);
  cmd.add_option("--slo-tpot-ms", *f.slo_tpot_ms, f.help[6])->check(number_above(0))->group(group);
}

CLI::Validator nccl_ctas() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int64_t v = 0;
        if (!parse_integer(text, v) || v == 0 || v < -1 || v > std::numeric_limits<int>::max())
          return "expected -1 (NCCL's default) or a positive integer, got " + in_quotes(text);
        return "";
      },
      "", "ctas");
}

CLI::Validator nccl_cta_policy() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text == "default" || text == "efficiency" || text == "zero") return "";
        return "expected default, efficiency or zero, got " + in_quotes(text);
      },
      "", "policy");
}

CLI::Validator byte_count() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_size_bytes(text, "");
        } catch (const UsageError& e) {
          const std::string what = e.what(); // " '<text>': <problem>"
          return what.substr(what.rfind("': ") + 3);
        }
        return "";
      },
      "", "bytes");
}

std::string list_problem(const std::vector<std::string>& items, const ItemCheck& check) {
  std::map<std::string, std::string> seen; // canonical form -> the item as given
  for (const std::string& item : items) {
    if (item.empty()) return "empty item in the list";
    std::string canonical = item;
    const std::string problem = check(item, canonical);
    if (!problem.empty()) return problem;
    const auto [at, fresh] = seen.emplace(canonical, item);
    if (!fresh)
      return at->second == item ? in_quotes(item) + " given twice"
                                : in_quotes(item) + " repeats " + in_quotes(at->second);
  }
  return "";
}

CLI::Validator comma_list(ItemCheck check) {
  return CLI::Validator(
      [check](std::string& text) -> std::string {
        const std::vector<std::string> items = split_list(text);
        const std::string problem = list_problem(items, check);
        if (problem.empty() || items.size() == 1) return problem;
        return problem + " (in " + in_quotes(text) + ")";
      },
      "LIST", "list");
}

void refuse_empty_values(CLI::App& app) {
  for (CLI::Option* opt : app.get_options())
    if (opt->get_expected_min() > 0)
      opt->check(CLI::Validator(
          [](std::string& text) { return text.empty() ? std::string("empty value") : ""; }, "",
          "non-empty"));
  for (CLI::App* sub : app.get_subcommands({}))
    refuse_empty_values(*sub);
}

int64_t available_host_bytes(int local_ranks) {
  const HostMemory node = host_memory(MemorySources::of_this_process());
  return node.bytes < 0 ? -1 : node.bytes / std::max(1, local_ranks);
}

bool reject_if_any(const CommandContext& ctx, const std::string& what,
                   const std::vector<std::string>& problems) {
  if (all_ranks_true(ctx.mpi.world(), problems.empty())) return false;
  if (ctx.mpi.rank() == 0) {
    const std::vector<std::string> shown =
        problems.empty() ? std::vector<std::string>{"another rank rejected the configuration"}
                         : problems;
    // One problem, one line; several, one line each after the heading.
    if (shown.size() == 1) {
      std::cerr << "ridgeline: " << what << ": " << shown.front() << "\n";
    } else {
      std::cerr << "ridgeline: " << what << ":\n";
      for (const std::string& p : shown)
        std::cerr << "  - " << p << "\n";
    }
  }
  return true;
}

std::string link_matrix_text() {
  std::vector<std::string> rows;
  for (const auto& row : gpu_link_matrix())
    rows.push_back(join(row, " "));
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

} // namespace

std::vector<std::string> output_problems(const std::string& path, const std::string& option) {
  const std::string what = option + " '" + path + "'";
  struct stat st {};
  if (!path.empty() && path.back() == '/') return {what + ": names a directory; give a file name"};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return {what + ": is a directory; give a file name"};
  // A FIFO would block the end of the job, a device would take the file: only files are replaced.
  if (const std::string kind = not_regular(path); !kind.empty())
    return {what + ": is " + kind + ", not a regular file"};
  const std::string dir = directory_of(path);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return {what + ": directory '" + dir + "' does not exist"};
  // The writer creates a temporary file beside the target and renames it: probe exactly that.
  const std::string probe = path + ".probe." + std::to_string(getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return {what + ": cannot create a file in '" + dir + "': " + std::strerror(errno)};
  ::close(fd);
  if (std::remove(probe.c_str()) != 0)
    return {what + ": cannot remove the probe file '" + probe + "': " + std::strerror(errno)};
  return {};
}

namespace {

// Who a path is: the device and inode of a file that exists, else its directory's and its name.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  std::string name; ///< empty for a file that exists
  bool operator==(const FileIdentity& o) const {
    return device == o.device && inode == o.inode && name == o.name;
  }
};

// False when neither the path nor its directory exists (nothing can be the same file).
bool identify(const std::string& path, FileIdentity& id) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    id = {st.st_dev, st.st_ino, ""};
    return true;
  }
  if (stat(directory_of(path).c_str(), &st) != 0) return false;
  id = {st.st_dev, st.st_ino, path.substr(path.find_last_of('/') + 1)};
  return true;
}

std::string named(const NamedFile& f) {
  return f.option + " '" + f.path + "'";
}

} // namespace

std::vector<std::string> file_problems(const std::vector<NamedFile>& outputs,
                                       const std::vector<NamedFile>& inputs) {
  std::vector<std::string> problems;
  std::vector<std::pair<const NamedFile*, FileIdentity>> seen_inputs, seen_outputs;
  for (const NamedFile& f : inputs) {
    FileIdentity id;
    if (!f.path.empty() && identify(f.path, id)) seen_inputs.emplace_back(&f, id);
  }
  for (const NamedFile& f : outputs) {
    if (f.path.empty()) continue;
    FileIdentity id;
    bool clash = false;
    if (identify(f.path, id)) {
      for (const auto& [input, input_id] : seen_inputs)
        if (input_id == id) {
          problems.push_back(named(f) + " is the same file as the input " + named(*input) +
                             ": writing it would destroy that input");
          clash = true;
        }
      for (const auto& [output, output_id] : seen_outputs)
        if (output_id == id) {
          problems.push_back(named(f) + " is the same file as " + named(*output) +
                             ": one output would overwrite the other");
          clash = true;
        }
      seen_outputs.emplace_back(&f, id);
    }
    if (!clash)
      for (std::string& p : output_problems(f.path, f.option))
        problems.push_back(std::move(p));
  }
  return problems;
}

std::vector<std::string> check_outputs(const CommandContext& ctx,
                                       const std::vector<NamedFile>& outputs,
                                       std::vector<NamedFile> inputs) {
  if (ctx.mpi.rank() != 0) return {};
  for (const std::string& config : ctx.config_files)
    inputs.push_back({config, "--config"});
  return file_problems(outputs, inputs);
}

OutputFile::OutputFile(std::string requested, std::string option, bool speak)
    : m_requested(std::move(requested)), m_option(std::move(option)), m_speak(speak) {}

bool OutputFile::write(const std::function<void(const std::string&)>& write) {
  if (!m_moved) {
    try {
      write(m_requested);
      m_path = m_requested;
      m_lost = false;
      return true;
    } catch (const std::exception& e) {
      if (m_speak)
        std::cerr << "ridgeline: cannot write " << m_option << " '" << m_requested
                  << "': " << e.what() << "\n";
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
      if (m_speak)
        std::cerr << "ridgeline: cannot write the fallback '" << candidate
                  << "' either: " << e.what() << "\n";
      continue;
    }
    if (m_fallback.empty() && m_speak)
      std::cerr << "ridgeline: " << m_option << " results written to '" << candidate
                << "' instead (exit status " << kExitResultsMoved << ")\n";
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

} // namespace ridgeline
