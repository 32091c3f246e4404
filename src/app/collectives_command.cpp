// `ridgeline collectives`: an nccl-tests-style sweep of every collective on NCCL (GPU) or MPI
// (host), with transport presets, exact #wrong checks, an HDF5 file and the interconnect roof.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "app/build_info.hpp"
#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/fingerprint.hpp"
#include "app/job.hpp"
#include "app/run_file.hpp"
#include "collectives/collective_bench.hpp"
#include "collectives/collective_runner.hpp"
#include "collectives/communicator.hpp"
#include "collectives/nccl_communicator.hpp"
#include "collectives/transport.hpp"
#include "core/error.hpp"
#include "core/watchdog.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {
namespace {

/// Every option of the command, as given (strings parsed and checked in validate()).
struct CollectivesConfig {
  std::string collectives = "all";
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
  std::string backend = "auto";
  int group_size = 0; ///< 0: the world size
  std::string transport = "auto";
  bool allow_shared_gpu = false;
  int nccl_max_ctas = -1;
  int nccl_min_ctas = -1;
  std::string out;
  double timeout_s = 300;
};

/// What validate() derived from the options.
struct Resolved {
  std::vector<const CollectiveSpec*> collectives;
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
    std::stringstream list(c.collectives);
    std::string name;
    while (std::getline(list, name, ',')) {
      const CollectiveSpec* spec = find_collective(name);
      if (spec == nullptr) {
        std::vector<std::string> known;
        for (const CollectiveSpec& s : collective_registry())
          known.emplace_back(s.name);
        p.push_back("--collectives: unknown collective '" + name + "' (expected all or " +
                    join(known, ", ") + ")");
      } else if (std::find(r.collectives.begin(), r.collectives.end(), spec) ==
                 r.collectives.end()) {
        r.collectives.push_back(spec);
      }
    }
    if (r.collectives.empty() && p.empty()) p.emplace_back("--collectives: empty list");
  }
  try {
    r.sizes = size_sweep(parse_size_bytes(c.min_bytes, "--min-bytes"),
                         parse_size_bytes(c.max_bytes, "--max-bytes"), c.step_factor);
  } catch (const UsageError& e) {
    p.emplace_back(e.what());
  }
  try {
    r.dtype = parse_dtype(c.dtype);
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
  if (c.warmup < 0) p.push_back("--warmup must be >= 0");
  if (c.iters < 1) p.push_back("--iters must be >= 1");
  if (!(c.timeout_s > 0)) p.push_back("--timeout must be positive");
  if (c.graph && !cuda) p.push_back("--graph needs the cuda backend (CUDA graphs)");
  if (find_transport(c.transport) == nullptr)
    p.push_back("--transport '" + c.transport + "': expected " + transport_names());
  else if (c.transport != "auto" && !cuda)
    p.push_back("--transport " + c.transport +
                " selects an NCCL transport: needs the cuda backend");
  if (!cuda && (c.nccl_max_ctas >= 0 || c.nccl_min_ctas >= 0))
    p.emplace_back("--nccl-max-ctas/--nccl-min-ctas need the cuda backend (NCCL)");
  if (c.nccl_max_ctas == 0 || c.nccl_min_ctas == 0)
    p.emplace_back("--nccl-max-ctas/--nccl-min-ctas must be >= 1 (or -1 for NCCL's default)");
  if (c.nccl_max_ctas > 0 && c.nccl_min_ctas > c.nccl_max_ctas)
    p.emplace_back("--nccl-min-ctas is larger than --nccl-max-ctas");
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
  o.timeout_s = c.timeout_s;
  return o;
}

// ---- output ----

std::string fixed(double value, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << value;
  return s.str();
}

double average_busbw(const CollectiveResult& res, int n) {
  double sum = 0;
  for (const SizeRow& row : res.rows)
    sum += busbw_gbps(*res.spec, n, static_cast<double>(row.shape.size_bytes), row.time_ns.mean);
  return res.rows.empty() ? 0 : sum / static_cast<double>(res.rows.size());
}

void print_section(std::ostream& os, const CollectiveResult& res, const CollectivesConfig& c,
                   const Resolved& r, const std::string& comm_backend, int groups) {
  const CollectiveSpec& spec = *res.spec;
  const int n = c.group_size;
  os << "#\n# " << spec.name << ": group size " << n << " x " << groups << " group(s), backend "
     << comm_backend << ", transport " << c.transport << ", "
     << (res.in_place ? "in-place" : "out-of-place")
     << (c.in_place && !res.in_place ? " (no in-place form)" : "")
     << (c.graph ? ", CUDA graph of " + std::to_string(c.iters) + " launches" : "")
     << ", busbw factor " << fixed(spec.busbw_factor(n), 4) << "\n";
  os << "#" << std::setw(13) << "size(B)" << std::setw(14) << "count(elems)" << std::setw(8)
     << "type" << std::setw(7) << "redop" << std::setw(6) << "root" << std::setw(11) << "time(us)"
     << std::setw(13) << "algbw(GB/s)" << std::setw(13) << "busbw(GB/s)" << std::setw(8) << "#wrong"
     << std::setw(11) << "p50(us)" << std::setw(11) << "p99(us)";
  if (groups > 1) os << std::setw(17) << "busbw_all(GB/s)";
  os << "\n";
  for (const SizeRow& row : res.rows) {
    const auto size = static_cast<double>(row.shape.size_bytes);
    os << std::setw(14) << row.shape.size_bytes << std::setw(14) << row.shape.count << std::setw(8)
       << dtype_name(r.dtype) << std::setw(7) << (spec.reduces ? reduce_op_name(r.op) : "none")
       << std::setw(6) << (spec.rooted ? c.root : -1) << std::setw(11)
       << fixed(row.time_ns.mean / 1e3, 2) << std::setw(13)
       << fixed(algbw_gbps(size, row.time_ns.mean), 3) << std::setw(13)
       << fixed(busbw_gbps(spec, n, size, row.time_ns.mean), 3) << std::setw(8) << row.wrong
       << std::setw(11) << fixed(row.time_ns.p50 / 1e3, 2) << std::setw(11)
       << fixed(row.time_ns.p99 / 1e3, 2);
    if (groups > 1)
      os << std::setw(17) << fixed(busbw_gbps(spec, n, size, row.time_mean_all_ns), 3);
    os << "\n";
  }
  os << "# Avg bus bandwidth    : " << fixed(average_busbw(res, n), 3) << " GB/s\n";
}

void print_summary(std::ostream& os, const std::vector<CollectiveResult>& results, int n) {
  os << "#\n# Avg bus bandwidth and interconnect roof (time = alpha + size * factor / beta)\n";
  os << "#" << std::setw(16) << "collective" << std::setw(22) << "avg busbw(GB/s)" << std::setw(12)
     << "alpha(us)" << std::setw(13) << "beta(GB/s)"
     << "\n";
  for (const CollectiveResult& res : results) {
    os << "#" << std::setw(16) << res.spec->name << std::setw(22)
       << fixed(average_busbw(res, n), 3);
    if (res.fitted)
      os << std::setw(12) << fixed(res.fit.alpha_us, 2) << std::setw(13)
         << fixed(res.fit.beta_gbps, 3);
    else
      os << std::setw(25) << "(not fitted)";
    os << "\n";
  }
}

Attrs config_attrs(const CollectivesConfig& c, const Resolved& r, const std::string& backend) {
  std::vector<std::string> names;
  for (const CollectiveSpec* spec : r.collectives)
    names.emplace_back(spec->name);
  return {{"collectives", join(names, ",")},
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
          {"graph_replays", static_cast<int64_t>(c.graph ? kGraphReplays : 0)},
          {"backend", backend},
          {"group_size", static_cast<int64_t>(c.group_size)},
          {"transport", c.transport},
          {"allow_shared_gpu", static_cast<int64_t>(c.allow_shared_gpu ? 1 : 0)},
          {"nccl_max_ctas", static_cast<int64_t>(c.nccl_max_ctas)},
          {"nccl_min_ctas", static_cast<int64_t>(c.nccl_min_ctas)},
          {"out", c.out},
          {"timeout_s", c.timeout_s}};
}

std::vector<NamedTable> result_tables(const std::vector<CollectiveResult>& results,
                                      const CollectivesConfig& c, const Resolved& r,
                                      const std::string& comm_backend, int groups) {
  std::vector<NamedTable> tables;
  const int n = c.group_size;
  std::vector<std::string> roof_names, roof_dtypes, roof_transports;
  std::vector<int64_t> roof_groups, roof_min, roof_max;
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
    const std::string path = std::string("/collectives/") + spec.name;
    const Attrs attrs = {{"group_size", static_cast<int64_t>(n)},
                         {"groups", static_cast<int64_t>(groups)},
                         {"busbw_factor", spec.busbw_factor(n)},
                         {"backend", comm_backend},
                         {"transport", c.transport},
                         {"dtype", std::string(dtype_name(r.dtype))},
                         {"redop", std::string(spec.reduces ? reduce_op_name(r.op) : "none")},
                         {"root", static_cast<int64_t>(spec.rooted ? c.root : -1)},
                         {"in_place", static_cast<int64_t>(res.in_place)},
                         {"timing", std::string(c.graph ? "graph_replay" : "per_iteration")}};
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
      roof_names.emplace_back(spec.name);
      roof_groups.push_back(n);
      roof_dtypes.emplace_back(dtype_name(r.dtype));
      roof_transports.push_back(c.transport);
      roof_alpha.push_back(res.fit.alpha_us);
      roof_beta.push_back(res.fit.beta_gbps);
      roof_floor_alpha.push_back(res.floor_alpha_us);
      roof_floor_beta.push_back(res.floor_beta_gbps);
      roof_min.push_back(size.front());
      roof_max.push_back(size.back());
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
                     {"fit_max_bytes", roof_max}},
                    {{"backend", comm_backend},
                     {"fit", std::string("least squares on relative error, of time_p50_ns")}}});
  return tables;
}

int run_collectives(CommandContext& ctx, CollectivesConfig cfg) {
  MpiSession& mpi = ctx.mpi;
  const int gpus = cuda_device_count();
  const bool cuda = cfg.backend == "cuda" || (cfg.backend == "auto" && gpus > 0);
  if (cfg.dtype.empty()) cfg.dtype = cuda ? "bf16" : "fp32";
  if (cfg.max_bytes.empty()) cfg.max_bytes = cuda ? "1G" : "4M";
  if (cfg.group_size == 0) cfg.group_size = mpi.size();
  const GpuBindingResult bound = bind_gpu(mpi, cuda, cfg.allow_shared_gpu);
  if (reject_if_any(ctx, "invalid GPU placement", bound.problems)) return 2;
  const int device = bound.binding.device;
  Resolved r;
  std::vector<std::string> problems = validate(cfg, cuda, gpus, mpi.size(), r);
  if (problems.empty()) {
    // Two buffers of the largest size, plus host staging (one more on the host backend, where
    // the "device" buffers are host memory too), against the smallest free memory of any rank.
    const double need = static_cast<double>(r.sizes.back()) * (cuda ? 2.0 : 3.0);
    int64_t free_bytes =
        cuda ? query_gpu(device).memory_free_bytes : available_host_bytes(mpi.local_size());
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &free_bytes, 1, MPI_INT64_T, MPI_MIN, mpi.world()));
    if (free_bytes >= 0 && need > 0.9 * static_cast<double>(free_bytes))
      problems.push_back("--max-bytes " + std::to_string(r.sizes.back()) + " needs about " +
                         fixed(need / 1073741824.0, 2) + " GiB per rank but the smallest free " +
                         "memory of any rank is " +
                         fixed(static_cast<double>(free_bytes) / 1073741824.0, 2) + " GiB");
  }
  if (reject_if_any(ctx, "invalid collectives configuration", problems)) return 2;

  std::vector<std::string> warnings;
  std::vector<EnvSetting> nccl_env;
  if (cuda) {
    nccl_env = apply_transport(*find_transport(cfg.transport), warnings);
    if (cfg.transport == "nvlink")
      check_nvlink(std::min(gpus, mpi.local_size()), gpu_link_matrix(), warnings);
  }
  if (mpi.rank() == 0)
    for (const std::string& w : warnings)
      std::cerr << "ridgeline: warning: " << w << "\n";
  cfg.out = output_path(mpi.world(), cfg.out, "collectives");

  Watchdog watchdog(cfg.timeout_s, "creating communicators and allocating buffers");
  const int groups = mpi.size() / cfg.group_size;
  const int group_index = mpi.rank() / cfg.group_size;
  GroupComm group(mpi.world(), group_index, mpi.rank());
  // The communicator is declared first so that it is destroyed last: an NCCL communicator must
  // outlive the CUDA graphs (owned by the backend) that captured its collectives.
  std::unique_ptr<Communicator> comm;
  // The backend's own element type only matters for its kernels, not for collective buffers.
  std::unique_ptr<Backend> backend =
      cuda ? make_cuda_backend(device, r.dtype == DType::f16 ? DType::f16 : DType::bf16)
           : make_host_backend();
  NcclOptions nccl;
  nccl.max_ctas = cfg.nccl_max_ctas;
  nccl.min_ctas = cfg.nccl_min_ctas;
  nccl.timeout_s = static_cast<int>(std::ceil(cfg.timeout_s));
  comm = cuda ? make_nccl_communicator(group.get(), nccl) : make_mpi_communicator(group.get());
  CollectiveBench bench(*backend, *comm, group.get(), mpi.world(), r.sizes.back());
  const SweepOptions opts = sweep_options(cfg, r);

  backend->synchronize();
  RIDGELINE_CHECK(MPI_Barrier(mpi.world()));
  backend->clock().start_epoch();
  std::vector<CollectiveResult> results;
  for (const CollectiveSpec* spec : r.collectives)
    results.push_back(bench.sweep(*spec, opts, watchdog));
  watchdog.rearm("gathering the topology and writing the file");

  int64_t wrong = 0;
  for (const CollectiveResult& res : results)
    for (const SizeRow& row : res.rows)
      wrong += row.wrong;
  const std::string check = wrong == 0 ? "passed" : "failed";
  RunData data;
  data.root = {{"schema_version", kSchemaVersion},
               {"ridgeline_version", std::string(build::version)},
               {"git_sha", std::string(build::git_sha)},
               {"created_utc", utc_now("%Y-%m-%dT%H:%M:%SZ")},
               {"argv", join(ctx.argv, " ")},
               {"world_size", static_cast<int64_t>(mpi.size())},
               {"command", std::string("collectives")},
               {"check", check}};
  data.stack = stack_attrs();
  data.stack.emplace_back("clock", std::string(backend->clock().name()));
  data.stack.emplace_back("communicator", std::string(comm->backend()));
  data.stack.emplace_back("transport", cfg.transport);
  for (const EnvSetting& e : nccl_env)
    data.stack.emplace_back(e.name, std::string(e.value));
  if (cuda) data.stack.emplace_back("gpu_links", link_matrix_text());
  data.env = performance_env();
  data.config = config_attrs(cfg, r, cuda ? "cuda" : "host");
  Attrs coords = gpu_binding_attrs(mpi, bound.binding);
  coords.emplace_back("group", static_cast<int64_t>(group_index));
  coords.emplace_back("group_rank", static_cast<int64_t>(comm->rank()));
  data.topology =
      gather_attrs(mpi.world(), rank_topology(mpi, cuda ? "cuda" : "host", device, coords));
  if (mpi.rank() == 0) {
    data.tables = result_tables(results, cfg, r, comm->backend(), groups);
    for (const CollectiveResult& res : results)
      print_section(std::cout, res, cfg, r, comm->backend(), groups);
    print_summary(std::cout, results, cfg.group_size);
    write_run_file(cfg.out, data);
    std::cout << "wrote " << cfg.out << "\n";
    if (wrong > 0)
      std::cerr << "ridgeline: check FAILED: " << wrong << " wrong elements (see #wrong)\n";
  }
  return wrong == 0 ? 0 : 3;
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
      ->capture_default_str();
  cmd->add_option("-b,--min-bytes", c.min_bytes, "Smallest size (8, 1K, 4M, 1G: powers of 1024)")
      ->capture_default_str();
  cmd->add_option("-e,--max-bytes", c.max_bytes, "Largest size (default: 1G on cuda, 4M on host)");
  cmd->add_option("-f,--step-factor", c.step_factor, "Size multiplier between steps (> 1)")
      ->capture_default_str();
  cmd->add_option("-d,--dtype", c.dtype,
                  "bf16, fp16, fp32 or int32 (default: bf16 on cuda, fp32 on host)");
  cmd->add_option("-o,--op", c.op, "Reduction: sum, prod, max, min or avg")->capture_default_str();
  cmd->add_option("-r,--root", c.root, "Root rank (within the group) of broadcast and reduce")
      ->capture_default_str();
  cmd->add_flag("--in-place", c.in_place, "Run in place (default: out of place)");
  cmd->add_option("-w,--warmup", c.warmup, "Untimed iterations per size")->capture_default_str();
  cmd->add_option("-n,--iters", c.iters, "Timed iterations per size (--graph: launches per graph)")
      ->capture_default_str();
  cmd->add_flag("--graph", c.graph,
                "Capture --iters launches into one CUDA graph and time its replays");
  cmd->add_option("--backend", c.backend,
                  "auto, host (MPI on host memory) or cuda (NCCL, one GPU per rank)")
      ->capture_default_str();
  cmd->add_flag("--allow-shared-gpu", c.allow_shared_gpu,
                "Run even where a node has more ranks than GPUs (refused otherwise)");
  cmd->add_option("--group-size", c.group_size,
                  "Ranks per communicator: consecutive groups running concurrently (default: all)");
  cmd->add_option("--transport", c.transport, "NCCL transport preset: " + transport_names())
      ->capture_default_str();
  cmd->add_option("--nccl-max-ctas", c.nccl_max_ctas, "ncclConfig_t::maxCTAs (-1: NCCL's default)")
      ->capture_default_str();
  cmd->add_option("--nccl-min-ctas", c.nccl_min_ctas, "ncclConfig_t::minCTAs (-1: NCCL's default)")
      ->capture_default_str();
  cmd->add_option("--out", c.out, "Output file (default: results/ridgeline-collectives-<UTC>.h5)");
  cmd->add_option("--timeout", c.timeout_s, "Seconds one size may take before the job is aborted")
      ->capture_default_str();
  cmd->callback([cfg, &action] {
    action = [cfg](CommandContext& ctx) { return run_collectives(ctx, *cfg); };
  });
}

} // namespace ridgeline
