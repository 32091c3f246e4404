// `ridgeline compare`'s analysis (see compare.hpp): the stack diff (one registry maps every key
// to its layer) and the bootstrap of the change of each timing's median.
#include "app/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/h5.hpp"
#include "app/reporters.hpp"
#include "app/run_file.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"

namespace ridgeline {
namespace {

// ---- the key -> layer registry ----

// One row of the registry: the keys of `source` that `pattern` matches (a key, or a glob with
// one '*') belong to `layer`. Numbers differ only beyond `tolerance` (relative; 0: exactly).
struct LayerRule {
  KeySource source;
  const char* pattern;
  StackLayer layer;
  double tolerance;
};

using L = StackLayer;
using S = KeySource;

// Every key compare looks at, and its layer. The first matching row wins; a key no row matches
// is "other". Run identity and launcher bookkeeping are `not_compared`: they differ between any
// two launches of the same stack. docs/COMPARE.md prints this table: change both together.
const LayerRule kLayerRules[] = {
    // Root: the run's identity; version and commit are repeated in /stack and compared there;
    // files of another kind or schema never reach the diff.
    {S::root, "created_utc", L::not_compared, 0},
    {S::root, "argv", L::not_compared, 0},
    {S::root, "git_sha", L::not_compared, 0},
    {S::root, "ridgeline_version", L::not_compared, 0},
    {S::root, "schema_version", L::not_compared, 0},
    {S::root, "command", L::not_compared, 0},
    {S::root, "check", L::not_compared, 0},         // collectives files: a result
    {S::root, "write_seconds", L::not_compared, 0}, // how long this file took to write
    {S::root, "file_set", L::not_compared, 0},      // identifies one write of a per-node file set
    {S::root, "file_layout", L::configuration, 0},
    {S::root, "node_files", L::configuration, 0},
    {S::root, "world_size", L::hardware, 0},
    {S::root, "nodes", L::hardware, 0},
    // /stack: what the fingerprint records.
    {S::stack, "os_machine", L::hardware, 0},
    {S::stack, "gpu_link_matrix", L::hardware, 0},
    {S::stack, "gpu_links", L::hardware, 0},
    {S::stack, "node_names", L::hardware, 0}, // nodes named by RIDGELINE_NODE_NAME
    {S::stack, "driver", L::driver, 0},
    {S::stack, "cuda_driver_api", L::driver, 0},
    {S::stack, "kernel", L::driver, 0},
    {S::stack, "cuda_runtime*", L::cuda, 0},
    {S::stack, "cuda_driver_so", L::driver, 0},
    {S::stack, "cublas*", L::gemm_library, 0},
    {S::stack, "blas", L::gemm_library, 0},
    {S::stack, "blas_so", L::gemm_library, 0},
    {S::stack, "blas_threads", L::gemm_library, 0},
    {S::stack, "cudnn*", L::attention_library, 0},
    {S::stack, "nccl*", L::nccl, 0},
    {S::stack, "mpi_*", L::mpi, 0},
    {S::stack, "hdf5*", L::hdf5, 0},
    {S::stack, "compiler", L::compiler, 0},
    {S::stack, "cxx_flags", L::compiler, 0},
    {S::stack, "cuda_compiler", L::compiler, 0},
    {S::stack, "cuda_architectures", L::compiler, 0},
    {S::stack, "git_sha", L::build, 0}, // without "-dirty": that flag is run identity
    {S::stack, "ridgeline_version", L::build, 0},
    {S::stack, "build_type", L::build, 0},
    {S::stack, "debug_build", L::build, 0},
    {S::stack, "cuda_enabled", L::build, 0},
    {S::stack, "NCCL_*", L::environment, 0}, // set by the transport preset
    {S::stack, "clock", L::configuration, 0},
    {S::stack, "transport", L::configuration, 0},
    {S::stack, "communicator", L::configuration, 0},
    // /stack/env: Open MPI's and Slurm's bookkeeping of one launch (ids, URIs, session
    // directories, the command line, the rank the file was written by).
    {S::env, "OMPI_ARGV", L::not_compared, 0},
    {S::env, "OMPI_COMMAND", L::not_compared, 0},
    {S::env, "OMPI_FILE_LOCATION", L::not_compared, 0},
    {S::env, "OMPI_COMM_WORLD_RANK", L::not_compared, 0},
    {S::env, "OMPI_COMM_WORLD_LOCAL_RANK", L::not_compared, 0},
    {S::env, "OMPI_COMM_WORLD_NODE_RANK", L::not_compared, 0},
    {S::env, "OMPI_MCA_ess_base_jobid", L::not_compared, 0},
    {S::env, "OMPI_MCA_ess_base_vpid", L::not_compared, 0},
    {S::env, "OMPI_MCA_ess_base_nspace", L::not_compared, 0},
    {S::env, "OMPI_MCA_initial_wdir", L::not_compared, 0},
    {S::env, "OMPI_MCA_orte_*_uri", L::not_compared, 0},
    {S::env, "OMPI_MCA_orte_*_session_dir", L::not_compared, 0},
    {S::env, "OMPI_MCA_orte_ess_node_rank", L::not_compared, 0},
    {S::env, "OMPI_MCA_orte_precondition_transports", L::not_compared, 0},
    {S::env, "PMIX_RANK", L::not_compared, 0},
    {S::env, "SLURM_JOB_ID", L::not_compared, 0},
    {S::env, "SLURM_JOBID", L::not_compared, 0},
    {S::env, "SLURM_JOB_NAME", L::not_compared, 0},
    {S::env, "SLURM_JOB_START_TIME", L::not_compared, 0},
    {S::env, "SLURM_JOB_END_TIME", L::not_compared, 0},
    {S::env, "SLURM_STEP_ID", L::not_compared, 0},
    {S::env, "SLURM_STEPID", L::not_compared, 0},
    {S::env, "SLURM_TASK_PID", L::not_compared, 0},
    {S::env, "SLURM_PROCID", L::not_compared, 0},
    {S::env, "SLURM_LOCALID", L::not_compared, 0},
    {S::env, "SLURM_NODEID", L::not_compared, 0},
    {S::env, "SLURM_SUBMIT_DIR", L::not_compared, 0},
    {S::env, "SLURM_SRUN_COMM_*", L::not_compared, 0},
    {S::env, "SLURM_STEP_LAUNCHER_PORT", L::not_compared, 0},
    {S::env, "SLURM_LAUNCH_NODE_IPADDR", L::not_compared, 0},
    // Variables that name the machines and the process count belong with the hardware; the
    // container's library versions with their libraries.
    {S::env, "SLURM_JOB_NODELIST", L::hardware, 0},
    {S::env, "SLURM_STEP_NODELIST", L::hardware, 0},
    {S::env, "SLURM_NODELIST", L::hardware, 0},
    {S::env, "SLURMD_NODENAME", L::hardware, 0},
    {S::env, "SLURM_CLUSTER_NAME", L::hardware, 0},
    {S::env, "SLURM_NNODES", L::hardware, 0},
    {S::env, "SLURM_JOB_NUM_NODES", L::hardware, 0},
    {S::env, "SLURM_NTASKS", L::hardware, 0},
    {S::env, "OMPI_COMM_WORLD_SIZE", L::hardware, 0},
    {S::env, "OMPI_COMM_WORLD_LOCAL_SIZE", L::hardware, 0},
    {S::env, "OMPI_UNIVERSE_SIZE", L::hardware, 0},
    {S::env, "OMPI_APP_CTX_NUM_PROCS", L::hardware, 0},
    {S::env, "OMPI_MCA_orte_ess_num_procs", L::hardware, 0},
    {S::env, "OMPI_MCA_orte_num_nodes", L::hardware, 0},
    {S::env, "RIDGELINE_NODE_NAME", L::hardware, 0},
    {S::env, "CUDA_VERSION", L::cuda, 0},
    {S::env, "NCCL_VERSION", L::nccl, 0},
    {S::env, "*", L::environment, 0},
    // /config: every option, except where the results were written.
    {S::config, "out", L::not_compared, 0},
    {S::config, "json", L::not_compared, 0},
    {S::config, "markdown", L::not_compared, 0},
    {S::config, "*", L::configuration, 0},
    // /topology: process ids and readings taken once at start-up (free memory, the clocks of
    // a GPU that may still be idling) change from launch to launch; the limits do not.
    {S::topology, "pid", L::not_compared, 0},
    {S::topology, "gpu_memory_free_bytes", L::not_compared, 0},
    {S::topology, "host_memory_usable_bytes", L::not_compared, 0},
    {S::topology, "gpu_sm_clock_mhz", L::not_compared, 0},
    {S::topology, "gpu_mem_clock_mhz", L::not_compared, 0},
    {S::topology, "gpu_*_clock_max_mhz", L::clocks, 0},
    {S::topology, "gpu_power_limit_w", L::clocks, 0},
    {S::topology, "*", L::hardware, 0},
    // /summary: the NVML means inside the timed loops. Every other attribute is a result.
    {S::summary, "gpu.*.sm_clock_mhz", L::clocks, 0.02},
    {S::summary, "gpu.*.power_w", L::clocks, 0.05},
    {S::summary, "*", L::not_compared, 0},
};

struct LayerName {
  const char* id;
  const char* title;
};
// Indexed by StackLayer.
const LayerName kLayerNames[] = {
    {"hardware", "hardware and topology"},
    {"driver", "driver and kernel"},
    {"cuda", "CUDA runtime"},
    {"gemm_library", "cuBLASLt and host BLAS"},
    {"attention_library", "cuDNN"},
    {"nccl", "NCCL"},
    {"mpi", "MPI"},
    {"hdf5", "HDF5"},
    {"compiler", "compiler and flags"},
    {"build", "ridgeline commit and build type"},
    {"environment", "environment variables"},
    {"clocks", "clocks and power"},
    {"configuration", "configuration"},
    {"other", "other"},
    {"not_compared", "not compared (run identity)"},
};

bool glob_match(const std::string& pattern, const std::string& key) {
  const size_t star = pattern.find('*');
  if (star == std::string::npos) return pattern == key;
  const size_t tail = pattern.size() - star - 1;
  return key.size() >= star + tail && key.compare(0, star, pattern, 0, star) == 0 &&
         key.compare(key.size() - tail, tail, pattern, star + 1, tail) == 0;
}

const LayerRule* find_rule(KeySource source, const std::string& key) {
  for (const LayerRule& rule : kLayerRules)
    if (rule.source == source && glob_match(rule.pattern, key)) return &rule;
  return nullptr;
}

// ---- the stack diff ----

// A key's value: one element, or one per rank (/topology); empty when the file lacks the key.
using Values = std::vector<AttrValue>;
using KeyValues = std::vector<std::pair<std::string, Values>>;

KeyValues from_attrs(const Attrs& attrs) {
  KeyValues out;
  for (const auto& [key, value] : attrs)
    out.emplace_back(key, Values{value});
  return out;
}

KeyValues from_env(const std::vector<std::pair<std::string, std::string>>& env) {
  KeyValues out;
  for (const auto& [name, value] : env)
    out.emplace_back(name, Values{AttrValue(value)});
  return out;
}

KeyValues from_topology(const std::vector<Attrs>& ranks) {
  KeyValues out;
  if (ranks.empty()) return out;
  for (const auto& entry : ranks.front()) {
    Values values;
    for (const Attrs& rank : ranks)
      if (const AttrValue* v = find_attr(rank, entry.first)) values.push_back(*v);
    out.emplace_back(entry.first, std::move(values));
  }
  return out;
}

std::optional<double> number_of(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::nullopt;
}

std::string comparable_text(KeySource source, const std::string& key, const AttrValue& v) {
  std::string text = attr_to_string(v);
  const std::string dirty = "-dirty";
  if (source == KeySource::stack && key == "git_sha" && text.size() > dirty.size() &&
      text.compare(text.size() - dirty.size(), dirty.size(), dirty) == 0)
    text.resize(text.size() - dirty.size());
  return text;
}

// Topology keys compare the ranks both files have: a different rank count is the root's
// world_size, and it should not make every per-rank key differ too.
bool values_differ(KeySource source, const std::string& key, const Values& a, const Values& b,
                   double tolerance) {
  if (a.empty() != b.empty()) return true;
  if (source != KeySource::topology && a.size() != b.size()) return true;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const std::optional<double> x = number_of(a[i]);
    const std::optional<double> y = number_of(b[i]);
    if (tolerance > 0 && x && y) {
      const double scale = std::max(std::fabs(*x), std::fabs(*y));
      if (scale > 0 && std::fabs(*x - *y) > tolerance * scale) return true;
      continue;
    }
    if (comparable_text(source, key, a[i]) != comparable_text(source, key, b[i])) return true;
  }
  return false;
}

// One value when every rank agrees, else every rank's ("a, b, c").
std::string values_text(KeySource source, const Values& values) {
  if (values.empty()) return source == KeySource::env ? "(unset)" : "(absent)";
  std::vector<std::string> texts;
  for (const AttrValue& v : values)
    texts.push_back(attr_to_string(v));
  if (std::all_of(texts.begin(), texts.end(), [&](const std::string& t) { return t == texts[0]; }))
    return texts[0];
  return join(texts, ", ");
}

const Values* find_values(const KeyValues& kv, const std::string& key) {
  for (const auto& [k, v] : kv)
    if (k == key) return &v;
  return nullptr;
}

// Appends a difference for each key of `a` or `b` whose values differ. /summary attributes that
// no rule places in a layer are results, compared as timings, not stack keys: they are skipped.
void diff_keys(KeySource source, const KeyValues& a, const KeyValues& b, const std::string& prefix,
               std::vector<StackDifference>& out) {
  std::vector<std::string> keys;
  for (const auto& entry : a)
    keys.push_back(entry.first);
  for (const auto& entry : b)
    if (find_values(a, entry.first) == nullptr) keys.push_back(entry.first);
  const Values absent;
  for (const std::string& key : keys) {
    const LayerRule* rule = find_rule(source, key);
    const StackLayer layer = rule ? rule->layer : StackLayer::other;
    if (source == KeySource::summary && layer == StackLayer::not_compared) continue;
    const Values* va = find_values(a, key);
    const Values* vb = find_values(b, key);
    if (!values_differ(source, key, va ? *va : absent, vb ? *vb : absent,
                       rule ? rule->tolerance : 0))
      continue;
    out.push_back({layer, source, prefix + key, values_text(source, va ? *va : absent),
                   values_text(source, vb ? *vb : absent)});
  }
}

void sort_differences(std::vector<StackDifference>& diffs) {
  std::stable_sort(diffs.begin(), diffs.end(),
                   [](const StackDifference& x, const StackDifference& y) {
                     if (x.layer != y.layer) return x.layer < y.layer;
                     if (x.source != y.source) return x.source < y.source;
                     return x.key < y.key;
                   });
}

// ---- the bootstrap ----

double relative(double delta, double base) {
  if (base > 0) return delta / base;
  return delta == 0 ? 0 : INFINITY;
}

// (p75 - p25) / p50: the run's own spread.
double spread(const std::vector<double>& v) {
  const double p50 = percentile(v, 50);
  return p50 > 0 ? (percentile(v, 75) - percentile(v, 25)) / p50 : 0;
}
} // namespace

const char* stack_layer_id(StackLayer layer) {
  return kLayerNames[static_cast<int>(layer)].id;
}
const char* stack_layer_title(StackLayer layer) {
  return kLayerNames[static_cast<int>(layer)].title;
}

const char* key_source_name(KeySource source) {
  static const char* const names[] = {"root", "stack", "env", "config", "topology", "summary"};
  return names[static_cast<int>(source)];
}

StackLayer stack_layer_of(KeySource source, const std::string& key) {
  const LayerRule* rule = find_rule(source, key);
  return rule ? rule->layer : StackLayer::other;
}

std::vector<StackDifference> diff_stack(const RunData& a, const RunData& b) {
  std::vector<StackDifference> diffs;
  diff_keys(S::root, from_attrs(a.root), from_attrs(b.root), "", diffs);
  diff_keys(S::stack, from_attrs(a.stack), from_attrs(b.stack), "", diffs);
  diff_keys(S::env, from_env(a.env), from_env(b.env), "", diffs);
  diff_keys(S::config, from_attrs(a.config), from_attrs(b.config), "", diffs);
  diff_keys(S::topology, from_topology(a.topology), from_topology(b.topology), "", diffs);
  diff_keys(S::summary, from_attrs(a.summary.attrs), from_attrs(b.summary.attrs), "", diffs);
  sort_differences(diffs);
  return diffs;
}

MedianChange compare_medians(const std::vector<double>& a, const std::vector<double>& b) {
  MedianChange c;
  c.a_count = a.size();
  c.b_count = b.size();
  if (a.empty() || b.empty()) return c;
  c.a_p50_ns = percentile(a, 50);
  c.b_p50_ns = percentile(b, 50);
  c.change = relative(c.b_p50_ns - c.a_p50_ns, c.a_p50_ns);
  c.noise = std::max({spread(a), spread(b), kNoiseFloor});
  if (a.size() < kMinSamples || b.size() < kMinSamples) return c;
  std::mt19937_64 rng(kBootstrapSeed);
  std::vector<double> differences(kBootstrapResamples);
  std::vector<double> ra, rb;
  for (double& d : differences) {
    resample(a, ra, rng);
    resample(b, rb, rng);
    d = median_in_place(rb) - median_in_place(ra);
  }
  const double tail = 50.0 * (1.0 - kConfidence);
  c.ci_low = relative(percentile(differences, tail), c.a_p50_ns);
  c.ci_high = relative(percentile(differences, 100.0 - tail), c.a_p50_ns);
  c.has_interval = true;
  c.moved = (c.ci_low > 0 || c.ci_high < 0) && std::fabs(c.change) > c.noise;
  return c;
}

std::map<std::string, std::vector<double>>
op_totals_per_iteration(const OpTable& ops,
                        const std::vector<std::vector<TimelineRecord>>& timelines) {
  std::map<std::pair<int32_t, int32_t>, double> longest; // (op, iteration) -> max over ranks
  for (const auto& rank : timelines) {
    // (op, iteration) -> this rank's intervals, whose union is its time of the op
    std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<int64_t, int64_t>>> spans;
    for (const TimelineRecord& r : rank)
      if (r.warmup == 0) spans[{r.op_id, r.iteration}].emplace_back(r.t_start_ns, r.t_end_ns);
    for (auto& [key, list] : spans) {
      std::sort(list.begin(), list.end());
      int64_t covered = 0, begin = list.front().first, end = list.front().second;
      for (const auto& [b, e] : list) {
        if (b > end) {
          covered += end - begin;
          begin = b;
        }
        end = std::max(end, e);
      }
      longest[key] = std::max(longest[key], static_cast<double>(covered + end - begin));
    }
  }
  std::map<std::string, std::vector<double>> series;
  for (const auto& [key, t] : longest)
    if (key.first >= 0 && static_cast<size_t>(key.first) < ops.size())
      series[ops.name(key.first)].push_back(t);
  return series;
}

void diff_summary_attrs(const Attrs& a, const Attrs& b, const std::string& prefix,
                        std::vector<StackDifference>& out) {
  diff_keys(KeySource::summary, from_attrs(a), from_attrs(b), prefix, out);
}

void sort_stack_differences(std::vector<StackDifference>& diffs) {
  sort_differences(diffs);
}

double relative_change(double delta, double base) {
  return relative(delta, base);
}

} // namespace ridgeline
