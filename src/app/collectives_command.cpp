// `ridgeline collectives`: an nccl-tests-style sweep of every collective on NCCL (GPU) or MPI
// (host), with transport presets, exact #wrong checks, an HDF5 file and the interconnect roof.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "app/build_info.hpp"
#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/fingerprint.hpp"
#include "app/job.hpp"
#include "app/reporters.hpp"
#include "app/run_file.hpp"
#include "collectives/collective_bench.hpp"
#include "collectives/collective_runner.hpp"
#include "collectives/communicator.hpp"
#include "collectives/ipc_allreduce.hpp"
#include "collectives/nccl_communicator.hpp"
#include "collectives/transport.hpp"
#include "core/error.hpp"
#include "core/watchdog.hpp"
#include "models/cuda_backend.hpp"
#include "models/kernel_tuning.hpp"
#include "parallel/grid.hpp"

namespace ridgeline {
namespace {

/// The element types --dtype takes, in the order its help gives them.
const std::vector<DType> kCollectiveDtypes = {DType::bf16, DType::f16, DType::f32, DType::i32};

/// Every option of the command, as given (strings parsed and checked in validate()).
struct CollectivesConfig {
  std::string collectives = "all";
  std::string allreduce = "nccl";
  std::string min_bytes = "8";
  std::string max_bytes; ///< empty: 1G on cuda, 4M on host
  double step_factor = 2.0;
  std::string dtype; ///< empty: bf16 on cuda, fp32 on host
  std::string op = "sum";
  int root = 0;
  bool in_place = false;
  int warmup = 5;
  int iters = 20;
  bool graph = false;
  bool batch = false;
  std::string backend = "auto";
  int group_size = 0; ///< 0 (never given: the option takes >= 1): the world size
  std::string transport = "auto";
  bool allow_shared_gpu = false;
  int nccl_max_ctas = -1;
  int nccl_min_ctas = -1;
  std::string nccl_cta_policy; ///< "" = NCCL's
  std::string buffers = "ordinary";
  std::string out;
  double timeout_s = 300;
};

// One item of --collectives: a collective's name.
std::string collective_item(const std::string& name, std::string& canonical) {
  if (find_collective(name) != nullptr) return "";
  if (name == "all") return "'all' stands alone, not in a list";
  std::vector<std::string> known;
  for (const CollectiveSpec& s : collective_registry())
    known.emplace_back(s.name);
  return "unknown collective '" + name + "' (expected all or " + join(known, ", ") + ")";
}

// One item of --allreduce: an all-reduce implementation.
std::string allreduce_item(const std::string& name, std::string&) {
  const std::vector<std::string>& custom = ipc_algo_names();
  if (name == "nccl" || std::find(custom.begin(), custom.end(), name) != custom.end()) return "";
  return "unknown all-reduce '" + name + "' (expected nccl, " + join(custom, ", ") + ")";
}

// The name suffix of a sweep on symmetric buffers (--buffers symmetric).
constexpr const char* kSymmetricSuffix = "_symm";

// One item of --buffers.
std::string buffers_item(const std::string& name, std::string&) {
  if (name == "ordinary" || name == "symmetric") return "";
  return "unknown buffers '" + name + "' (expected ordinary or symmetric)";
}

/// What validate() derived from the options.
struct Resolved {
  std::vector<const CollectiveSpec*> collectives;
  bool ordinary = true;           ///< --buffers lists ordinary
  bool symmetric = false;         ///< --buffers lists symmetric (NCCL windows)
  bool library_all_reduce = true; ///< --allreduce lists nccl (the communicator's own)
  /// Some sweep calls the communicator's own collectives (NCCL on GPUs): anything but the
  /// custom all-reduce alone.
  bool nccl_swept = true;
  /// Whether a sweep runs on ordinary buffers: --buffers ordinary, or the custom all-reduce
  /// (which copies from and to them).
  bool ordinary_buffers() const { return ordinary || !custom.empty(); }
  std::vector<IpcAlgo> custom; ///< the custom all-reduces --allreduce lists
  std::vector<size_t> sizes;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
};

// Every problem with the options at once; identical on every rank (no rank-local facts).
std::vector<std::string> validate(const CollectivesConfig& c, bool cuda, int gpus, int world,
                                  Resolved& r) {
  std::vector<std::string> p;
  if (c.backend != "auto" && c.backend != "host" && c.backend != "cuda")
    p.push_back("--backend '" + c.backend + "': expected auto, host or cuda");
  if (c.backend == "cuda" && gpus == 0) p.push_back("--backend cuda: no CUDA device is visible");
  if (c.collectives == "all") {
    for (const CollectiveSpec& spec : collective_registry())
      r.collectives.push_back(&spec);
  } else {
    const std::vector<std::string> names = split_list(c.collectives);
    const std::string problem = list_problem(names, collective_item);
    if (!problem.empty())
      p.push_back("--collectives: " + problem);
    else
      for (const std::string& name : names)
        r.collectives.push_back(find_collective(name));
  }
  try {
    r.sizes = size_sweep(parse_size_bytes(c.min_bytes, "--min-bytes"),
                         parse_size_bytes(c.max_bytes, "--max-bytes"), c.step_factor);
  } catch (const UsageError& e) {
    p.emplace_back(e.what());
  }
  try {
    r.dtype = parse_dtype_of(c.dtype, kCollectiveDtypes);
  } catch (const UsageError& e) {
    p.push_back(std::string("--dtype: ") + e.what());
  }
  try {
    r.op = parse_reduce_op(c.op);
  } catch (const UsageError& e) {
    p.push_back(std::string("--op: ") + e.what());
  }
  const int group = c.group_size;
  if (group < 1 || world % group != 0)
    p.push_back("--group-size " + std::to_string(group) + " must divide the " +
                std::to_string(world) + " ranks");
  else if (c.root < 0 || c.root >= group)
    p.push_back("--root " + std::to_string(c.root) + " is not a rank of a group of " +
                std::to_string(group));
  if (group >= 1 && p.empty())
    for (const CollectiveSpec* spec : r.collectives)
      if (spec->reduces) {
        const std::string problem = exactness_problem(r.dtype, r.op, group);
        if (!problem.empty()) p.push_back("--op/--dtype: " + problem + " (results not checkable)");
        break;
      }
  const std::vector<std::string> impls = split_list(c.allreduce);
  const std::string impl_problem = list_problem(impls, allreduce_item);
  if (!impl_problem.empty()) {
    p.push_back("--allreduce: " + impl_problem);
  } else {
    r.library_all_reduce = std::find(impls.begin(), impls.end(), "nccl") != impls.end();
    for (const std::string& name : impls)
      if (name != "nccl") r.custom.push_back(parse_ipc_algo(name));
    const bool swept = std::find(r.collectives.begin(), r.collectives.end(),
                                 find_collective("all_reduce")) != r.collectives.end();
    if (!r.custom.empty()) {
      const std::string what = "--allreduce " + c.allreduce + ": the custom all-reduce ";
      if (!cuda) p.push_back(what + "runs on GPUs (needs the cuda backend)");
      if (!swept) p.push_back(what + "is a form of all_reduce: --collectives must include it");
      if (r.op != ReduceOp::sum) p.push_back(what + "sums only (--op sum)");
      if (r.dtype == DType::i32) p.push_back(what + "takes bf16, fp16 or fp32");
      if (c.group_size > 8) p.push_back(what + "takes groups of at most 8 ranks, on one node");
    }
  }
  if (c.warmup < 0) p.push_back("--warmup must be >= 0");
  if (c.iters < 1) p.push_back("--iters must be >= 1");
  if (!(c.timeout_s > 0)) p.push_back("--timeout must be positive");
  if (c.graph && !cuda) p.push_back("--graph needs the cuda backend (CUDA graphs)");
  if (c.graph && c.batch) p.push_back("--graph and --batch are two timings: choose one");
  if (find_transport(c.transport) == nullptr)
    p.push_back("--transport '" + c.transport + "': expected " + transport_names());
  else if (c.transport != "auto" && !cuda)
    p.push_back("--transport " + c.transport +
                " selects an NCCL transport: needs the cuda backend");
  if (!cuda && (c.nccl_max_ctas >= 0 || c.nccl_min_ctas >= 0))
    p.emplace_back("--nccl-max-ctas/--nccl-min-ctas need the cuda backend (NCCL)");
  if (c.nccl_max_ctas == 0 || c.nccl_min_ctas == 0 || c.nccl_max_ctas < -1 || c.nccl_min_ctas < -1)
    p.emplace_back("--nccl-max-ctas/--nccl-min-ctas must be >= 1 (or -1 for NCCL's default)");
  if (c.nccl_max_ctas > 0 && c.nccl_min_ctas > c.nccl_max_ctas)
    p.emplace_back("--nccl-min-ctas is larger than --nccl-max-ctas");
  if (!cuda && !c.nccl_cta_policy.empty())
    p.emplace_back("--nccl-cta-policy needs the cuda backend (NCCL)");
  r.nccl_swept = r.library_all_reduce || std::any_of(r.collectives.begin(), r.collectives.end(),
                                                     [](const CollectiveSpec* spec) {
                                                       return spec->id != Collective::all_reduce;
                                                     });
  const std::vector<std::string> kinds = split_list(c.buffers);
  const std::string buffers_problem = list_problem(kinds, buffers_item);
  if (!buffers_problem.empty()) {
    p.push_back("--buffers: " + buffers_problem);
  } else {
    r.ordinary = std::find(kinds.begin(), kinds.end(), "ordinary") != kinds.end();
    r.symmetric = std::find(kinds.begin(), kinds.end(), "symmetric") != kinds.end();
    if (r.symmetric && !cuda)
      p.emplace_back("--buffers symmetric registers NCCL windows: needs the cuda backend");
    else if (r.symmetric && !r.nccl_swept)
      p.emplace_back("--buffers symmetric: no NCCL collective is swept (the custom all-reduce has "
                     "buffers of its own)");
  }
  return p;
}

// The options a sweep reads, from the checked configuration.
SweepOptions sweep_options(const CollectivesConfig& c, const Resolved& r) {
  SweepOptions o;
  o.sizes = r.sizes;
  o.dtype = r.dtype;
  o.op = r.op;
  o.root = c.root;
  o.in_place = c.in_place;
  o.warmup = c.warmup;
  o.iters = c.iters;
  o.graph = c.graph;
  o.batch = c.batch;
  o.timeout_s = c.timeout_s;
  return o;
}

// ---- output ----

std::string fixed(double value, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << value;
  return s.str();
}

Attrs config_attrs(const CollectivesConfig& c, const Resolved& r, const std::string& backend) {
  std::vector<std::string> names;
  for (const CollectiveSpec* spec : r.collectives)
    names.emplace_back(spec->name);
  return {{"collectives", join(names, ",")},
          {"allreduce", c.allreduce},
          {"min_bytes", static_cast<int64_t>(r.sizes.front())},
          {"max_bytes", static_cast<int64_t>(r.sizes.back())},
          {"step_factor", c.step_factor},
          {"dtype", std::string(dtype_name(r.dtype))},
          {"op", std::string(reduce_op_name(r.op))},
          {"root", static_cast<int64_t>(c.root)},
          {"in_place", static_cast<int64_t>(c.in_place)},
          {"warmup", static_cast<int64_t>(c.warmup)},
          {"iters", static_cast<int64_t>(c.iters)},
          {"graph", static_cast<int64_t>(c.graph)},
          {"graph_replays", static_cast<int64_t>(c.graph ? kTimedBatches : 0)},
          {"batch", static_cast<int64_t>(c.batch)},
          {"batches", static_cast<int64_t>(c.batch ? kTimedBatches : 0)},
          {"backend", backend},
          {"group_size", static_cast<int64_t>(c.group_size)},
          {"transport", c.transport},
          {"allow_shared_gpu", static_cast<int64_t>(c.allow_shared_gpu ? 1 : 0)},
          {"nccl_max_ctas", static_cast<int64_t>(c.nccl_max_ctas)},
          {"nccl_min_ctas", static_cast<int64_t>(c.nccl_min_ctas)},
          {"nccl_cta_policy", c.nccl_cta_policy},
          {"buffers", c.buffers},
          {"out", c.out},
          {"timeout_s", c.timeout_s}};
}

// `symmetric`: how the _symm sweeps' window was allocated (SymmetricMemory::describe()).
std::vector<NamedTable> result_tables(const std::vector<CollectiveResult>& results,
                                      const CollectivesConfig& c, const Resolved& r,
                                      const std::string& comm_backend, int groups,
                                      const std::string& symmetric, Scope scope, int group_nodes) {
  std::vector<NamedTable> tables;
  const int n = c.group_size;
  std::vector<std::string> roof_names, roof_dtypes, roof_transports, roof_scopes;
  std::vector<int64_t> roof_groups, roof_min, roof_max, roof_nodes;
  std::vector<double> roof_alpha, roof_beta, roof_floor_alpha, roof_floor_beta;
  for (const CollectiveResult& res : results) {
    const CollectiveSpec& spec = *res.spec;
    std::vector<int64_t> size, count, wrong, iters, size_index, iteration;
    std::vector<double> mean_ns, p50, p95, p99, minimum, algbw, busbw, busbw_p50, mean_all,
        busbw_all, sample_ns;
    for (size_t i = 0; i < res.rows.size(); ++i) {
      const SizeRow& row = res.rows[i];
      const auto bytes = static_cast<double>(row.shape.size_bytes);
      size.push_back(static_cast<int64_t>(row.shape.size_bytes));
      count.push_back(static_cast<int64_t>(row.shape.count));
      mean_ns.push_back(row.time_ns.mean);
      p50.push_back(row.time_ns.p50);
      p95.push_back(row.time_ns.p95);
      p99.push_back(row.time_ns.p99);
      minimum.push_back(row.time_ns.min);
      algbw.push_back(algbw_gbps(bytes, row.time_ns.mean));
      busbw.push_back(busbw_gbps(spec, n, bytes, row.time_ns.mean));
      busbw_p50.push_back(busbw_gbps(spec, n, bytes, row.time_ns.p50));
      wrong.push_back(row.wrong);
      iters.push_back(row.iters);
      mean_all.push_back(row.time_mean_all_ns);
      busbw_all.push_back(busbw_gbps(spec, n, bytes, row.time_mean_all_ns));
      for (size_t k = 0; k < row.samples_ns.size(); ++k) {
        size_index.push_back(static_cast<int64_t>(i));
        iteration.push_back(static_cast<int64_t>(k));
        sample_ns.push_back(row.samples_ns[k]);
      }
    }
    const std::string path = "/collectives/" + res.name;
    const bool on_symmetric = res.name == std::string(spec.name) + kSymmetricSuffix;
    const Attrs attrs = {
        {"group_size", static_cast<int64_t>(n)},
        {"groups", static_cast<int64_t>(groups)},
        {"busbw_factor", spec.busbw_factor(n)},
        // The custom all-reduce's own path, whatever the communicator.
        {"backend", res.name == spec.name || on_symmetric ? comm_backend : std::string("cuda_ipc")},
        {"buffers", on_symmetric ? symmetric : std::string("ordinary")},
        {"transport", c.transport},
        {"dtype", std::string(dtype_name(r.dtype))},
        {"redop", std::string(spec.reduces ? reduce_op_name(r.op) : "none")},
        {"root", static_cast<int64_t>(spec.rooted ? c.root : -1)},
        {"in_place", static_cast<int64_t>(res.in_place)},
        {"scope", std::string(scope_name(scope))},
        {"group_nodes", static_cast<int64_t>(group_nodes)},
        {"timing", std::string(c.graph   ? "graph_replay"
                               : c.batch ? "batch_mean"
                                         : "per_iteration")}};
    tables.push_back({path,
                      {{"size_bytes", size},
                       {"count", count},
                       {"time_mean_ns", mean_ns},
                       {"time_p50_ns", p50},
                       {"time_p95_ns", p95},
                       {"time_p99_ns", p99},
                       {"time_min_ns", minimum},
                       {"algbw_gbps", algbw},
                       {"busbw_gbps", busbw},
                       {"busbw_p50_gbps", busbw_p50},
                       {"wrong", wrong},
                       {"iters", iters},
                       {"time_mean_all_groups_ns", mean_all},
                       {"busbw_all_groups_gbps", busbw_all}},
                      attrs});
    tables.push_back(
        {path + "_samples_ns",
         {{"size_index", size_index}, {"iteration", iteration}, {"time_ns", sample_ns}},
         {}});
    if (res.fitted) {
      roof_names.push_back(res.name);
      roof_groups.push_back(n);
      roof_dtypes.emplace_back(dtype_name(r.dtype));
      roof_transports.push_back(c.transport);
      roof_alpha.push_back(res.fit.alpha_us);
      roof_beta.push_back(res.fit.beta_gbps);
      roof_floor_alpha.push_back(res.floor_alpha_us);
      roof_floor_beta.push_back(res.floor_beta_gbps);
      roof_min.push_back(size.front());
      roof_max.push_back(size.back());
      roof_scopes.emplace_back(scope_name(scope));
      roof_nodes.push_back(group_nodes);
    }
  }
  tables.push_back({"/roofs/interconnect",
                    {{"collective", roof_names},
                     {"group_size", roof_groups},
                     {"dtype", roof_dtypes},
                     {"transport", roof_transports},
                     {"alpha_us", roof_alpha},
                     {"beta_gbps", roof_beta},
                     {"floor_alpha_us", roof_floor_alpha},
                     {"floor_beta_gbps", roof_floor_beta},
                     {"fit_min_bytes", roof_min},
                     {"fit_max_bytes", roof_max},
                     {"scope", roof_scopes},
                     {"group_nodes", roof_nodes}},
                    {{"backend", comm_backend},
                     {"fit", std::string("least squares on relative error, of time_p50_ns")}}});
  return tables;
}

// One collectives job: the options checked against every rank's memory, the transport, the
// communicator and the benches, the file's fixed parts, then every sweep, its rows printed and
// the file rewritten as they are measured.
class CollectivesRun {
public:
  CollectivesRun(CommandContext& ctx, CollectivesConfig cfg)
      : m_ctx(ctx), m_cfg(std::move(cfg)), m_mpi(ctx.mpi),
        m_console(m_mpi, [this](std::ostream& out) {
          print_collectives_summary(out, m_data.tables, &m_data.tables.back());
        }) {}

  int run() {
    // The CUDA backend's environment switches are checked before any work, as every job does.
    tuning_env();
    m_gpus = cuda_device_count();
    m_cuda = m_cfg.backend == "cuda" || (m_cfg.backend == "auto" && m_gpus > 0);
    if (m_cfg.dtype.empty()) m_cfg.dtype = m_cuda ? "bf16" : "fp32";
    if (m_cfg.max_bytes.empty()) m_cfg.max_bytes = m_cuda ? "1G" : "4M";
    if (m_cfg.group_size == 0) m_cfg.group_size = m_mpi.size();
    m_bound = bind_gpu(m_mpi, m_cuda, m_cfg.allow_shared_gpu);
    if (reject_if_any(m_ctx, "invalid GPU placement", m_bound.problems)) return 2;
    if (reject_if_any(m_ctx, "invalid collectives configuration", problems())) return 2;
    apply_transport_settings();
    m_cfg.out = output_path(m_mpi.world(), m_cfg.out, "collectives");
    // Rank 0 writes the file, rewritten as the sizes are measured, then the closing table.
    m_h5.emplace(m_mpi, m_cfg.out, false, [this](const std::string& path) {
      write_run_file(path, m_data);
      return std::string();
    });
    m_reports.emplace(m_ctx, std::vector<Reporter*>{&*m_h5, &m_console});
    if (reject_if_any(m_ctx, "cannot write the results", m_reports->file_problems())) return 2;
    m_watchdog.emplace(m_cfg.timeout_s, "creating communicators and allocating buffers");
    make_communicator();
    if (m_r.symmetric && !make_symmetric_bench()) return 2;
    if (!m_r.custom.empty()) {
      m_watchdog->rearm("mapping the custom all-reduce's buffers between the ranks");
      m_ipc = make_ipc_all_reduce(m_group->get(), m_r.sizes.back());
    }
    start_file();
    run_sweeps();
    return finish();
  }

private:
  // Rank 0 rewrites the file between sizes once kRewriteEvery times its last write took has
  // passed (at least 1 s).
  static constexpr double kRewriteEvery = 20;
  using clock = std::chrono::steady_clock;

  // A sweep: a collective on one bench, under its options (its name, its own issue).
  struct Sweep {
    const CollectiveSpec* spec;
    SweepOptions opts;
    CollectiveBench* bench;
  };

  // The options' problems, then whether the largest size fits every rank's memory.
  std::vector<std::string> problems() {
    std::vector<std::string> problems = validate(m_cfg, m_cuda, m_gpus, m_mpi.size(), m_r);
    if (!problems.empty()) return problems;
    // Two buffers of the largest size (ordinary, symmetric, or both: two each), plus host
    // staging (one more on the host backend, where the "device" buffers are host memory too),
    // against the smallest free memory of any rank. The custom all-reduce maps two more (its
    // staging and result regions).
    const double buffers = (m_r.ordinary_buffers() ? 2.0 : 0.0) + (m_r.symmetric ? 2.0 : 0.0) +
                           (m_cuda ? 0.0 : 1.0) + (m_r.custom.empty() ? 0.0 : 2.0);
    const double need = static_cast<double>(m_r.sizes.back()) * buffers;
    int64_t free_bytes = m_cuda ? query_gpu(m_bound.binding.device).memory_free_bytes
                                : available_host_bytes(m_mpi.local_size());
    RIDGELINE_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, &free_bytes, 1, MPI_INT64_T, MPI_MIN, m_mpi.world()));
    if (free_bytes >= 0 && need > 0.9 * static_cast<double>(free_bytes))
      problems.push_back("--max-bytes " + std::to_string(m_r.sizes.back()) + " needs about " +
                         fixed(need / 1073741824.0, 2) + " GiB per rank but the smallest free " +
                         "memory of any rank is " +
                         fixed(static_cast<double>(free_bytes) / 1073741824.0, 2) + " GiB");
    return problems;
  }

  // The transport's NCCL environment (GPUs), its warnings printed once.
  void apply_transport_settings() {
    std::vector<std::string> warnings;
    if (m_cuda) {
      m_nccl_env = apply_transport(*find_transport(m_cfg.transport), warnings);
      if (m_cfg.transport == "nvlink")
        check_nvlink(std::min(m_gpus, m_mpi.local_size()), gpu_link_matrix(), warnings);
    }
    if (m_mpi.rank() == 0)
      for (const std::string& w : warnings)
        std::cerr << "ridgeline: warning: " << w << "\n";
  }

  // The rank's group, its backend and communicator, and the bench on ordinary buffers.
  void make_communicator() {
    m_groups = m_mpi.size() / m_cfg.group_size;
    m_group_index = m_mpi.rank() / m_cfg.group_size;
    m_group.emplace(m_mpi.world(), m_group_index, m_mpi.rank());
    // Where group 0 (the one the results report) sits on the nodes.
    const NodeMap nodes = map_nodes(m_mpi.hosts());
    std::vector<int> first(static_cast<size_t>(m_cfg.group_size));
    std::iota(first.begin(), first.end(), 0);
    m_group0_scope = group_scope(nodes, first);
    m_group0_nodes = static_cast<int>(
        std::set<int>(nodes.node_of_rank.begin(), nodes.node_of_rank.begin() + m_cfg.group_size)
            .size());
    // The backend's own element type only matters for its kernels, not for collective buffers.
    m_backend = m_cuda ? make_cuda_backend(m_bound.binding.device,
                                           m_r.dtype == DType::f16 ? DType::f16 : DType::bf16)
                       : make_host_backend();
    NcclOptions nccl;
    nccl.max_ctas = m_cfg.nccl_max_ctas;
    nccl.min_ctas = m_cfg.nccl_min_ctas;
    nccl.cta_policy = m_cfg.nccl_cta_policy;
    nccl.timeout_s = whole_seconds(m_cfg.timeout_s);
    // NCCL only where a sweep calls it: the custom all-reduce alone needs MPI to exchange its
    // handles (and then runs where NCCL would refuse, e.g. ranks sharing a GPU).
    m_comm = m_cuda && m_r.nccl_swept ? make_nccl_communicator(m_group->get(), nccl)
                                      : make_mpi_communicator(m_group->get());
    if (m_r.ordinary_buffers())
      m_bench = std::make_unique<CollectiveBench>(*m_backend, *m_comm, m_group->get(),
                                                  m_mpi.world(), m_r.sizes.back());
  }

  // --buffers symmetric: a bench whose two buffers lie in one symmetric window (collective;
  // every rank gets the same layout, so the same offsets). False where there is none.
  bool make_symmetric_bench() {
    m_watchdog->rearm("registering the symmetric window");
    const size_t half = (m_r.sizes.back() + 4095) / 4096 * 4096;
    std::string why;
    m_symmetric = m_comm->symmetric_memory(2 * half, why);
    if (!m_symmetric) {
      if (m_mpi.rank() == 0) std::cerr << "ridgeline: --buffers symmetric: " << why << "\n";
      return false;
    }
    auto keep = [](void*) {};
    char* base = static_cast<char*>(m_symmetric->data());
    m_symmetric_bench = std::make_unique<CollectiveBench>(
        *m_backend, *m_comm, m_group->get(), m_mpi.world(), m_r.sizes.back(),
        Buffer(base, half, keep), Buffer(base + half, half, keep));
    m_symmetric_path = m_symmetric->describe();
    return true;
  }

  // Everything but the results, up front (the topology is gathered from every rank): the file
  // is rewritten after every size, marked complete = 0 until the last.
  void start_file() {
    m_watchdog->rearm("gathering the topology");
    m_data.root = {{"schema_version", kSchemaVersion},
                   {"ridgeline_version", std::string(build::version)},
                   {"git_sha", std::string(build::git_sha)},
                   {"created_utc", utc_now("%Y-%m-%dT%H:%M:%SZ")},
                   {"argv", join(m_ctx.argv, " ")},
                   {"world_size", static_cast<int64_t>(m_mpi.size())},
                   {"nodes", static_cast<int64_t>(m_mpi.nodes())},
                   {"command", std::string("collectives")},
                   {"check", std::string("passed")},
                   {"complete", int64_t{0}}};
    m_data.stack = stack_attrs();
    for (auto& kv : node_name_attrs(m_mpi))
      m_data.stack.push_back(std::move(kv));
    m_data.stack.emplace_back("clock", std::string(m_backend->clock().name()));
    m_data.stack.emplace_back("communicator", std::string(m_comm->backend()));
    m_data.stack.emplace_back("transport", m_cfg.transport);
    for (const EnvSetting& e : m_nccl_env)
      m_data.stack.emplace_back(e.name, std::string(e.value));
    if (m_cuda) m_data.stack.emplace_back("gpu_links", link_matrix_text());
    m_data.env = performance_env();
    m_data.config = config_attrs(m_cfg, m_r, m_cuda ? "cuda" : "host");
    Attrs coords = gpu_binding_attrs(m_mpi, m_bound.binding);
    coords.emplace_back("group", static_cast<int64_t>(m_group_index));
    coords.emplace_back("group_rank", static_cast<int64_t>(m_comm->rank()));
    m_data.topology = gather_attrs(m_mpi.world(), rank_topology(m_mpi, m_cuda ? "cuda" : "host",
                                                                m_bound.binding.device, coords));
    m_next_write = clock::now();
  }

  std::vector<NamedTable> tables_of(const std::vector<CollectiveResult>& results) const {
    return result_tables(results, m_cfg, m_r, m_comm->backend(), m_groups, m_symmetric_path,
                         m_group0_scope, m_group0_nodes);
  }

  // Rank 0: the results so far into the file (renamed into place: never a torn file). The
  // other ranks wait at the next size's barrier meanwhile, so the rewrites keep the job's extra
  // time under 5 %; stdout has every row at once.
  void save(const std::vector<CollectiveResult>& so_far, bool complete) {
    const clock::time_point started = clock::now();
    set_file_contents(so_far, complete);
    m_h5->write();
    const clock::time_point now = clock::now();
    m_next_write = now + std::max<clock::duration>(std::chrono::seconds(1),
                                                   std::chrono::duration_cast<clock::duration>(
                                                       (now - started) * kRewriteEvery));
  }

  // Rank 0: the file's root attributes and tables of the results so far.
  void set_file_contents(const std::vector<CollectiveResult>& so_far, bool complete) {
    m_wrong = 0;
    for (const CollectiveResult& res : so_far)
      for (const SizeRow& row : res.rows)
        m_wrong += row.wrong;
    for (auto& [key, value] : m_data.root) {
      if (key == "check") value = std::string(m_wrong == 0 ? "passed" : "failed");
      if (key == "complete") value = static_cast<int64_t>(complete);
    }
    m_data.tables = tables_of(so_far);
  }

  // Every collective listed once per --buffers kind, all_reduce also once per custom
  // implementation of --allreduce.
  std::vector<Sweep> plan_sweeps() const {
    const SweepOptions opts = sweep_options(m_cfg, m_r);
    std::vector<Sweep> sweeps;
    for (const CollectiveSpec* spec : m_r.collectives) {
      const bool library = spec->id != Collective::all_reduce || m_r.library_all_reduce;
      if (library && m_r.ordinary) sweeps.push_back({spec, opts, m_bench.get()});
      if (library && m_r.symmetric) {
        SweepOptions symm = opts;
        symm.name = std::string(spec->name) + kSymmetricSuffix;
        sweeps.push_back({spec, std::move(symm), m_symmetric_bench.get()});
      }
      if (spec->id != Collective::all_reduce) continue;
      for (IpcAlgo algo : m_r.custom) {
        SweepOptions custom = opts;
        custom.name = std::string("all_reduce_") + ipc_algo_name(algo);
        custom.issue = [ipc = m_ipc.get(), algo, dtype = m_r.dtype](
                           const CallBuffers& buf, const CollectiveShape& shape, Stream stream) {
          ipc->all_reduce(buf.send, buf.recv, shape.count, dtype, algo, stream);
        };
        sweeps.push_back({spec, std::move(custom), m_bench.get()});
      }
    }
    return sweeps;
  }

  void run_sweeps() {
    m_backend->synchronize();
    RIDGELINE_CHECK(MPI_Barrier(m_mpi.world()));
    m_backend->clock().start_epoch();
    const std::vector<Sweep> sweeps = plan_sweeps();
    for (const Sweep& sweep : sweeps) {
      // Each size's row is printed (and the file rewritten) as soon as it is measured, as
      // nccl-tests does: a job killed at size k keeps sizes 1 .. k-1.
      CollectiveResult res = sweep.bench->sweep(
          *sweep.spec, sweep.opts, *m_watchdog,
          [&](const CollectiveResult& partial) { print_measured_size(partial); });
      m_results.push_back(std::move(res));
      if (m_mpi.rank() != 0) continue;
      if (m_results.size() < sweeps.size()) save(m_results, false);
      const std::vector<NamedTable> tables = tables_of(m_results);
      const NamedTable& table = tables[2 * (m_results.size() - 1)];
      if (m_results.back().rows.empty()) print_collective_header(std::cout, table, m_data.config);
      print_collective_footer(std::cout, table);
    }
  }

  // Rank 0: the row of the size just measured (the header before the first), and the file
  // rewritten when due.
  void print_measured_size(const CollectiveResult& partial) {
    if (m_mpi.rank() != 0) return;
    std::vector<CollectiveResult> so_far = m_results;
    so_far.push_back(partial);
    const std::vector<NamedTable> tables = tables_of(so_far);
    const NamedTable& table = tables[2 * m_results.size()];
    if (partial.rows.size() == 1) print_collective_header(std::cout, table, m_data.config);
    print_collective_rows(std::cout, table, partial.rows.size() - 1, partial.rows.size());
    std::cout.flush();
    if (clock::now() >= m_next_write) save(so_far, false);
  }

  int finish() {
    m_watchdog->rearm("writing the file");
    if (m_mpi.rank() == 0) set_file_contents(m_results, true);
    // Wrong elements outrank a file written elsewhere.
    const int status = m_reports->finish(m_wrong > 0 ? 3 : 0);
    if (m_mpi.rank() == 0 && m_wrong > 0)
      std::cerr << "ridgeline: check FAILED: " << m_wrong << " wrong elements (see #wrong)\n";
    return status;
  }

  CommandContext& m_ctx;
  CollectivesConfig m_cfg;
  MpiSession& m_mpi;
  int m_gpus = 0;
  bool m_cuda = false;
  GpuBindingResult m_bound;
  Resolved m_r;
  std::vector<EnvSetting> m_nccl_env;
  std::optional<Watchdog> m_watchdog;
  int m_groups = 0, m_group_index = 0;
  Scope m_group0_scope = Scope::intra; ///< where group 0, which the results report, sits
  int m_group0_nodes = 1;
  std::optional<GroupComm> m_group;
  // The communicator is declared first so that it is destroyed last: an NCCL communicator must
  // outlive the CUDA graphs (owned by the backend) that captured its collectives.
  std::unique_ptr<Communicator> m_comm;
  // Likewise the custom all-reduce's mapped buffers, read by the kernels the graphs captured.
  std::unique_ptr<IpcAllReduce> m_ipc;
  std::unique_ptr<Backend> m_backend;
  std::unique_ptr<CollectiveBench> m_bench;
  std::unique_ptr<SymmetricMemory> m_symmetric;
  std::unique_ptr<CollectiveBench> m_symmetric_bench;
  std::string m_symmetric_path;
  RunData m_data;
  // What the job writes at the end: the file (also rewritten as it goes on), the closing table.
  std::optional<Hdf5Reporter> m_h5;
  ConsoleReporter m_console;
  std::optional<JobReports> m_reports;
  std::vector<CollectiveResult> m_results;
  int64_t m_wrong = 0;
  clock::time_point m_next_write;
};

int run_collectives(CommandContext& ctx, CollectivesConfig cfg) {
  return CollectivesRun(ctx, std::move(cfg)).run();
}

} // namespace

void setup_collectives_command(CLI::App& app, CommandAction& action) {
  auto cfg = std::make_shared<CollectivesConfig>();
  CollectivesConfig& c = *cfg;
  CLI::App* cmd = app.add_subcommand(
      "collectives", "nccl-tests-style sweep of collectives (NCCL on GPUs, MPI on the host): "
                     "time, algbw, busbw, #wrong, and the fitted interconnect roof -> HDF5");
  cmd->add_option("--collectives", c.collectives,
                  "Comma-separated list or 'all': all_reduce, all_gather, reduce_scatter, "
                  "all_to_all, broadcast, reduce, sendrecv")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text == "all") return "";
            const std::string problem = list_problem(split_list(text), collective_item);
            return problem;
          },
          "LIST", "collectives"))
      ->capture_default_str();
  cmd->add_option("--allreduce", c.allreduce,
                  "All-reduce implementations, each swept as all_reduce_NAME: nccl (the "
                  "communicator's own: NCCL, or MPI on the host; swept as all_reduce), oneshot, "
                  "push, push-ll and twoshot (the custom all-reduce over CUDA-IPC peer buffers, "
                  "GPUs of one node); a comma list")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return list_problem(split_list(text), allreduce_item);
          },
          "LIST", "allreduce"))
      ->capture_default_str();
  cmd->add_option("-b,--min-bytes", c.min_bytes, "Smallest size (8, 1K, 4M, 1G: powers of 1024)")
      ->check(byte_count())
      ->capture_default_str();
  cmd->add_option("-e,--max-bytes", c.max_bytes, "Largest size (default: 1G on cuda, 4M on host)")
      ->check(byte_count());
  cmd->add_option("-f,--step-factor", c.step_factor,
                  "Size multiplier between steps (> 1; at most " + std::to_string(kMaxSweepSizes) +
                      " sizes in all)")
      ->check(number_above(1))
      ->capture_default_str();
  cmd->add_option("-d,--dtype", c.dtype,
                  "bf16, fp16, fp32 or int32 (default: bf16 on cuda, fp32 on host)")
      ->check(CLI::Validator(
          [](std::string& v) {
            if (v.empty()) return std::string(); // refused as an empty value
            try {
              parse_dtype_of(v, kCollectiveDtypes);
            } catch (const UsageError& e) {
              return std::string(e.what());
            }
            return std::string();
          },
          "DTYPE"));
  cmd->add_option("-o,--op", c.op, "Reduction: sum, prod, max, min or avg")->capture_default_str();
  cmd->add_option("-r,--root", c.root, "Root rank (within the group) of broadcast and reduce")
      ->check(integer_in(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_flag("--in-place", c.in_place, "Run in place (default: out of place)");
  cmd->add_option("-w,--warmup", c.warmup, "Untimed iterations per size")
      ->check(integer_in(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("-n,--iters", c.iters,
                  "Timed iterations per size (--graph: launches per graph, --batch: per batch)")
      ->check(integer_in(1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_flag("--graph", c.graph,
                "Capture --iters launches into one CUDA graph and time its replays");
  cmd->add_flag("--batch", c.batch,
                "Time batches of --iters back-to-back launches, as nccl-tests does without -G "
                "(default: every launch timed alone)");
  cmd->add_option("--backend", c.backend,
                  "auto, host (MPI on host memory) or cuda (NCCL, one GPU per rank)")
      ->capture_default_str();
  cmd->add_flag("--allow-shared-gpu", c.allow_shared_gpu,
                "Run even where a node has more ranks than GPUs (refused otherwise)");
  cmd->add_option("--group-size", c.group_size,
                  "Ranks per communicator: consecutive groups running concurrently (default: all)")
      ->check(integer_in(1, std::numeric_limits<int>::max()));
  cmd->add_option("--transport", c.transport, "NCCL transport preset: " + transport_names())
      ->capture_default_str();
  cmd->add_option("--nccl-max-ctas", c.nccl_max_ctas, "ncclConfig_t::maxCTAs (-1: NCCL's default)")
      ->check(nccl_ctas())
      ->capture_default_str();
  cmd->add_option("--nccl-min-ctas", c.nccl_min_ctas, "ncclConfig_t::minCTAs (-1: NCCL's default)")
      ->check(nccl_ctas())
      ->capture_default_str();
  cmd->add_option("--nccl-cta-policy", c.nccl_cta_policy,
                  "ncclConfig_t::CTAPolicy: default, efficiency or zero (no CTA where NCCL can: "
                  "copy-engine collectives on symmetric buffers, NCCL >= 2.28); unset: NCCL's")
      ->check(nccl_cta_policy());
  cmd->add_option("--buffers", c.buffers,
                  "Where the swept buffers live: ordinary (cudaMalloc), symmetric (one NCCL "
                  "window: ncclMemAlloc + ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC, "
                  "swept as <collective>_symm), or both as a comma list")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return list_problem(split_list(text), buffers_item);
          },
          "LIST", "buffers"))
      ->capture_default_str();
  cmd->add_option("--out", c.out, "Output file (default: results/ridgeline-collectives-<UTC>.h5)");
  cmd->add_option("--timeout", c.timeout_s,
                  "Seconds one size may take before the job is aborted (1e9 or more: never)")
      ->check(number_above(0))
      ->capture_default_str();
  cmd->callback([cfg, &action] {
    action = [cfg](CommandContext& ctx) { return run_collectives(ctx, *cfg); };
  });
}

} // namespace ridgeline
