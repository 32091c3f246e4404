// Small pieces every command shares: time stamps, host memory, the collective rejection of a
// bad configuration, and the GPU link matrix as text.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
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
/// The items of `text` between `separator`s, in order (empty items kept).
std::vector<std::string> split_by(const std::string& text, char separator);

// ---- Checks of given values ----
// Every option checks the value it is given while the command line (or a --config file) is
// parsed: a bad value is a CLI11 ValidationError ("--seq: ..."), which ends every rank with exit
// code 2. Defaults apply only to options not given, so no given value may stand for "default".

/// A decimal integer in [min, max].
CLI::Validator integer_in(int64_t min, int64_t max = std::numeric_limits<int64_t>::max());
/// A finite number above `bound` (at least `bound` when `inclusive`).
CLI::Validator number_above(double bound, bool inclusive = false);
/// A byte count: 8, 64K, 4M, 1G (powers of 1024), above 0.
CLI::Validator byte_count();
/// A file to read: refuses a path that exists but is not a regular file (a directory, a FIFO, a
/// device, a socket), which a reader would fail on or wait on forever. A missing path is left to
/// the reader, which names it.
CLI::Validator regular_file();
/// A serving trace's options as `run --trace` and `model --trace` bind them: the option, the
/// field it sets and its help; the names, checks and group are bind_trace_options'.
struct TraceOptionFields {
  std::string* trace;     ///< --trace (an existing regular file)
  std::string* trace_gen; ///< --trace-gen
  int64_t* token_budget;  ///< --token-budget, [1, 2^30]
  int64_t* max_batch;     ///< --max-batch, [1, 2^30]
  int64_t* kv_capacity;   ///< --kv-capacity, [2, 2^40]
  double* slo_ttft_ms;    ///< --slo-ttft-ms, above 0
  double* slo_tpot_ms;    ///< --slo-tpot-ms, above 0
  const char* help[7];    ///< each option's help, in the order above
};
/// Binds the seven options of `f` to `cmd` in `group`.
void bind_trace_options(CLI::App& cmd, const TraceOptionFields& f, const char* group);
/// -1 (NCCL's default) or a positive integer: --nccl-max-ctas, --nccl-min-ctas.
CLI::Validator nccl_ctas();
/// default, efficiency or zero: --nccl-cta-policy.
CLI::Validator nccl_cta_policy();
/// Checks one item of a list: returns the problem ("" if none) and sets `canonical` to the
/// item's canonical form (two items with the same canonical form are the same item).
using ItemCheck = std::function<std::string(const std::string& item, std::string& canonical)>;
/// The first problem of a list's items ("" if none): an empty item, a bad item, an item given
/// twice.
std::string list_problem(const std::vector<std::string>& items, const ItemCheck& check);
/// A comma list checked by list_problem.
CLI::Validator comma_list(ItemCheck check);
/// Every option of `app` and of its subcommands that takes a value refuses an empty one.
void refuse_empty_values(CLI::App& app);
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

/// Exit status of a job whose results went to a fallback path because a file asked for
/// (--out, --json, --markdown) could not be written.
inline constexpr int kExitResultsMoved = 4;

/// Why a result file cannot be written at `path` (`option` names it in the message): the path
/// names a directory, its directory is missing, or a probe file cannot be created and removed
/// beside it. Checks this process's view only (the rank that writes calls it). Empty: writable.
std::vector<std::string> output_problems(const std::string& path, const std::string& option);
/// Why the `outputs` cannot be written, before any work: output_problems() of each, and every
/// output that is the same file as another output or as one of the `inputs` (an output written
/// over an input destroys it). Files are compared by identity, never by spelling: the device and
/// inode of a path that exists (through symbolic links), else the identity of its directory and
/// its name. Empty paths are skipped.
std::vector<std::string> file_problems(const std::vector<NamedFile>& outputs,
                                       const std::vector<NamedFile>& inputs);
/// Every rank calls: rank 0 returns file_problems() of `outputs` against `inputs` and the
/// --config files (for reject_if_any()); the other ranks return none.
std::vector<std::string> check_outputs(const CommandContext& ctx,
                                       const std::vector<NamedFile>& outputs,
                                       std::vector<NamedFile> inputs = {});

/// A result file that is never lost: written at the path asked for or, when that fails, at a
/// fallback path with a unique name ($TMPDIR or /tmp, else the current directory), named on
/// stderr. Once the path asked for failed, later writes (a file rewritten as a job goes on) go
/// to the same fallback. Used by the rank that writes.
class OutputFile {
public:
  /// `speak`: print what happens (rank 0 of a write every rank takes part in).
  OutputFile(std::string requested, std::string option, bool speak = true);
  /// Writes through `write(path)` (which throws on failure); false when no path could be written.
  bool write(const std::function<void(const std::string&)>& write);
  /// Where the file is now ("" before the first successful write).
  const std::string& path() const { return m_path; }
  /// Whether the path asked for could not be written.
  bool moved() const { return m_moved; }
  /// Whether the last write failed everywhere.
  bool lost() const { return m_lost; }

private:
  std::string m_requested, m_option, m_fallback, m_path;
  bool m_moved = false, m_lost = false, m_speak = true;
};

/// The exit status for files that were written: 0, kExitResultsMoved when one went to a
/// fallback, 1 when one could not be written at all (its results are only on stdout).
int output_status(const std::vector<const OutputFile*>& files);

} // namespace ridgeline
