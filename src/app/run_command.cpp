// `ridgeline run`: one configuration -> timed layers on every rank -> HDF5 file + summary.
// Also the small commands that share its plumbing: env, validate, report.
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <memory>

#include "app/build_info.hpp"
#include "app/commands.hpp"
#include "app/config.hpp"
#include "app/fingerprint.hpp"
#include "app/run_file.hpp"
#include "app/summary.hpp"
#include "collectives/communicator.hpp"
#include "collectives/nccl_communicator.hpp"
#include "core/error.hpp"
#include "core/watchdog.hpp"
#include "models/cuda_backend.hpp"
#include "models/work_model.hpp"
#include "parallel/grid.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {
namespace {

constexpr double kCheckAutoLimitBytes = 2.0 * 1024 * 1024 * 1024;

std::string utc_now(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, &tm);
  return buf;
}

std::string join_argv(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Prints the problems once (rank 0) and returns the usage exit code on every rank.
int reject(const CommandContext& ctx, const std::string& what, const std::vector<std::string>& problems) {
  if (ctx.mpi.rank() == 0) {
    std::cerr << "ridgeline: " << what << ":\n";
    for (const std::string& p : problems) std::cerr << "  - " << p << "\n";
  }
  return 2;
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

std::vector<std::vector<TimelineRecord>> gather_timelines(MPI_Comm comm,
                                                          const std::vector<TimelineRecord>& mine) {
  int rank = 0, size = 0;
  RIDGELINE_CHECK(MPI_Comm_rank(comm, &rank));
  RIDGELINE_CHECK(MPI_Comm_size(comm, &size));
  const size_t row = sizeof(TimelineRecord);
  const size_t my_bytes = mine.size() * row;
  if (my_bytes > static_cast<size_t>(INT32_MAX))
    throw Error("timeline of " + std::to_string(mine.size()) + " rows is too large to gather");
  int bytes = static_cast<int>(my_bytes);
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  RIDGELINE_CHECK(MPI_Gather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  std::vector<std::vector<TimelineRecord>> out;
  std::vector<char> all;
  if (rank == 0) {
    int64_t total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<size_t>(r)] = static_cast<int>(total);
      total += counts[static_cast<size_t>(r)];
    }
    if (total > INT32_MAX) throw Error("timelines are too large to gather on rank 0");
    all.resize(static_cast<size_t>(total));
  }
  RIDGELINE_CHECK(MPI_Gatherv(mine.data(), bytes, MPI_BYTE, all.data(), counts.data(), displs.data(),
                              MPI_BYTE, 0, comm));
  if (rank == 0)
    for (int r = 0; r < size; ++r) {
      const auto* first = reinterpret_cast<const TimelineRecord*>(all.data() + displs[static_cast<size_t>(r)]);
      out.emplace_back(first, first + counts[static_cast<size_t>(r)] / row);
    }
  return out;
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  if (!std::isfinite(num)) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct CheckOutcome {
  std::string status;  ///< passed | failed | skipped: reason
  double max_rel_error = 0;
  double tolerance = 0;
};

// The last stage's output against the whole model (every layer) recomputed at TP=1 from the
// same generated input, on the last stage's TP rank 0 of each data-parallel replica: this
// checks the TP shards, the collectives and the pipeline transfers together.
CheckOutcome check_against_reference(const CommandContext& ctx, Backend& backend, TpStage& stage,
                                     const StageSpec& spec, bool last_stage, int64_t all_layers,
                                     bool enabled, const std::string& why_not) {
  CheckOutcome c;
  c.tolerance = backend.dtype() == DType::f32 ? 1e-4 : 2e-2;
  if (!enabled) {
    c.status = "skipped: " + why_not;
    return c;
  }
  double err = 0;
  if (last_stage && spec.tp_rank == 0) {
    StageSpec ref_spec = spec;
    ref_spec.shape.tp = 1;
    ref_spec.first_layer = 0;
    ref_spec.num_layers = all_layers;
    OpTable scratch_ops;
    TpStage ref(backend, nullptr, ref_spec, scratch_ops);
    ref.fill_input(0);
    Recorder silent(backend.clock(), scratch_ops);
    silent.set_enabled(false);
    ref.forward(silent);
    err = relative_l2(backend.to_host(stage.output()), backend.to_host(ref.output()));
  }
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, ctx.mpi.world()));
  c.max_rel_error = err;
  c.status = err <= c.tolerance ? "passed" : "failed";
  return c;
}

int run_one(CommandContext& ctx, RunConfig cfg) {
  MpiSession& mpi = ctx.mpi;
  const int gpus = cuda_device_count();
  const bool want_cuda = cfg.backend == "cuda" || (cfg.backend == "auto" && gpus > 0);
  if (cfg.backend == "auto" && gpus == 0 && mpi.rank() == 0)
    std::cout << "ridgeline: no GPU found; using the host backend (fp32, OpenBLAS, MPI) and "
              << (cfg.hidden > 0 ? "the given model" : "the embedded default model") << "\n";
  apply_defaults(cfg, want_cuda ? "cuda" : "host");
  std::vector<std::string> problems = validate(cfg, mpi.size());
  if (cfg.backend == "cuda" && gpus == 0) problems.push_back("--backend cuda: no CUDA device is visible");
  if (!all_ranks_true(mpi.world(), problems.empty()))
    return reject(ctx, "invalid configuration", problems.empty() ? std::vector<std::string>{"another rank rejected the configuration"} : problems);

  const ModelSpec model = model_spec(cfg);
  const LayerShape shape = layer_shape(cfg);
  const int64_t stage_layers = cfg.layers / cfg.pp;
  const int device = want_cuda ? mpi.local_rank() % std::max(1, gpus) : -1;

  // Memory: this stage, plus the TP=1 reference stage when checking, against the smallest
  // free memory of any rank, before anything is allocated.
  LayerShape tp1 = shape;
  tp1.tp = 1;
  const double ref_bytes = stage_memory_bytes(model, tp1, cfg.layers);
  const bool check_possible = cfg.tp > 1 || cfg.pp > 1;
  const bool check = check_possible && (cfg.check == "on" || (cfg.check == "auto" && ref_bytes <= kCheckAutoLimitBytes));
  const double need = stage_memory_bytes(model, shape, stage_layers) + (check ? ref_bytes : 0.0);
  int64_t free_bytes = want_cuda ? query_gpu(device).memory_free_bytes : available_host_bytes(mpi.local_size());
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &free_bytes, 1, MPI_INT64_T, MPI_MIN, mpi.world()));
  if (free_bytes >= 0 && need > 0.9 * static_cast<double>(free_bytes)) {
    char msg[256];
    std::snprintf(msg, sizeof(msg),
                  "needs about %.2f GiB per rank (weights, caches, activations%s) but the smallest "
                  "free memory of any rank is %.2f GiB",
                  need / 1073741824.0, check ? ", TP=1 check" : "", static_cast<double>(free_bytes) / 1073741824.0);
    return reject(ctx, "configuration does not fit in memory", {msg});
  }

  if (cfg.out.empty()) {
    mkdir("results", 0755);
    cfg.out = broadcast_string(mpi.world(), "results/ridgeline-" + utc_now("%Y%m%dT%H%M%SZ") + ".h5", 0);
  }

  Watchdog watchdog(cfg.timeout_s, "creating communicators and allocating weights");
  ProcessGrid grid(mpi.world(), cfg.tp, cfg.pp, cfg.dp);
  const GridCoords& gc = grid.coords();
  std::unique_ptr<Backend> backend =
      want_cuda ? make_cuda_backend(device, parse_dtype(cfg.dtype)) : make_host_backend();
  std::unique_ptr<Communicator> tp_comm, pp_comm;
  auto make_comm = [&](MPI_Comm c) {
    return want_cuda ? make_nccl_communicator(c, NcclOptions{}) : make_mpi_communicator(c);
  };
  if (cfg.tp > 1) tp_comm = make_comm(grid.tp_comm());
  if (cfg.pp > 1) pp_comm = make_comm(grid.pp_comm());

  OpTable ops;
  StageSpec spec;
  spec.model = model;
  spec.shape = shape;
  spec.attention = cfg.attention == "naive" ? AttentionImpl::naive : AttentionImpl::fused;
  spec.tp_rank = gc.tp_rank;
  spec.first_layer = gc.pp_rank * stage_layers;
  spec.num_layers = stage_layers;
  spec.seed = cfg.seed;
  TpStage stage(*backend, tp_comm.get(), spec, ops);
  const double act_bytes = static_cast<double>(shape.tokens() * model.hidden * static_cast<int64_t>(dtype_size(shape.dtype)));
  const OpCost p2p_cost{0, act_bytes, act_bytes};
  const int32_t recv_id = ops.intern(op::recv_act, OpKind::p2p);
  const int32_t send_id = ops.intern(op::send_act, OpKind::p2p);
  if (gc.pp_rank == 0) stage.fill_input(0);

  Recorder rec(backend->clock(), ops);
  backend->synchronize();
  RIDGELINE_CHECK(MPI_Barrier(mpi.world()));
  backend->clock().start_epoch();
  const Stream compute = backend->stream(Lane::compute);
  for (int it = 0; it < cfg.warmup + cfg.iters; ++it) {
    watchdog.rearm("iteration " + std::to_string(it) + " (a collective or pipeline transfer is waiting)");
    rec.set_iteration(it, it < cfg.warmup);
    for (int64_t mb = 0; mb < cfg.microbatches; ++mb) {
      rec.set_microbatch(static_cast<int32_t>(mb));
      if (gc.pp_rank > 0) {
        ScopedOp s(rec, recv_id, static_cast<int32_t>(spec.first_layer), Lane::p2p, p2p_cost, Lane::compute);
        const Tensor in = stage.input();
        pp_comm->recv(in.data, static_cast<size_t>(in.elements()), in.dtype, gc.pp_rank - 1, compute);
        pp_comm->complete(compute);
      }
      stage.forward(rec);
      if (gc.pp_rank < cfg.pp - 1) {
        ScopedOp s(rec, send_id, static_cast<int32_t>(spec.first_layer + stage_layers - 1), Lane::p2p,
                   p2p_cost, Lane::compute);
        const Tensor out = stage.output();
        pp_comm->send(out.data, static_cast<size_t>(out.elements()), out.dtype, gc.pp_rank + 1, compute);
        pp_comm->complete(compute);
      }
    }
  }
  watchdog.rearm("waiting for the device to finish the timed iterations");
  backend->synchronize();
  rec.flush();
  watchdog.rearm("checking the result and gathering timelines");

  const std::string why_not =
      check_possible ? "--check " + cfg.check + " (the TP=1 reference model needs " +
                           std::to_string(static_cast<int64_t>(ref_bytes / 1048576)) + " MiB)"
                     : "tp=1 and pp=1: the run is itself the reference";
  const CheckOutcome chk = check_against_reference(ctx, *backend, stage, spec, gc.pp_rank == cfg.pp - 1,
                                                   cfg.layers, check, why_not);

  RunData data;
  data.root = {{"schema_version", kSchemaVersion},
               {"ridgeline_version", std::string(build::version)},
               {"git_sha", std::string(build::git_sha)},
               {"created_utc", utc_now("%Y-%m-%dT%H:%M:%SZ")},
               {"argv", join_argv(ctx.argv)},
               {"world_size", static_cast<int64_t>(mpi.size())},
               {"command", std::string("run")}};
  data.stack = stack_attrs();
  data.stack.emplace_back("clock", std::string(backend->clock().name()));
  data.env = performance_env();
  data.config = config_attrs(cfg);
  const Attrs coords = {{"tp_rank", static_cast<int64_t>(gc.tp_rank)},
                        {"pp_rank", static_cast<int64_t>(gc.pp_rank)},
                        {"dp_rank", static_cast<int64_t>(gc.dp_rank)}};
  data.topology = gather_attrs(mpi.world(), rank_topology(mpi, cfg.backend, device, coords));
  data.timelines = gather_timelines(mpi.world(), rec.records());
  int ok = 1;
  if (mpi.rank() == 0) {
    data.ops = ops;
    data.summary = summarize_run(ops, data.timelines);
    data.summary.attrs = {{"check", chk.status},
                          {"check_max_rel_error", chk.max_rel_error},
                          {"check_tolerance", chk.tolerance}};
    write_run_file(cfg.out, data);
    print_report(std::cout, data);
    std::cout << "wrote " << cfg.out << "\n";
    if (chk.status == "failed") {
      std::cerr << "ridgeline: check FAILED: relative L2 error " << chk.max_rel_error
                << " exceeds the tolerance " << chk.tolerance << " (tp=" << cfg.tp << " pp=" << cfg.pp
                << " output vs the TP=1 single-stage recomputation)\n";
      ok = 0;
    }
  }
  RIDGELINE_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, mpi.world()));
  return ok ? 0 : 3;
}

}  // namespace

void setup_run_command(CLI::App& app, CommandAction& action) {
  auto cfg = std::make_shared<RunConfig>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run one configuration: timed tensor/pipeline-parallel layers on every rank -> HDF5 + summary");
  bind_run_options(*cmd, *cfg);
  cmd->callback([cfg, &action] { action = [cfg](CommandContext& ctx) { return run_one(ctx, *cfg); }; });
}

void setup_env_command(CLI::App& app, CommandAction& action) {
  CLI::App* cmd = app.add_subcommand("env", "Print the software-stack fingerprint and every rank's host and devices");
  cmd->callback([&action] {
    action = [](CommandContext& ctx) {
      const int gpus = cuda_device_count();
      const std::string backend = gpus > 0 ? "cuda" : "host";
      const int device = gpus > 0 ? ctx.mpi.local_rank() % gpus : -1;
      const std::vector<Attrs> ranks = gather_attrs(ctx.mpi.world(), rank_topology(ctx.mpi, backend, device, {}));
      if (ctx.mpi.rank() != 0) return 0;
      std::cout << "[stack]\n";
      for (const auto& [k, v] : stack_attrs()) std::cout << "  " << k << " = " << attr_to_string(v) << "\n";
      std::cout << "[environment]\n";
      for (const auto& [k, v] : performance_env()) std::cout << "  " << k << " = " << v << "\n";
      for (const Attrs& r : ranks) {
        std::cout << "[rank " << attr_to_string(*find_attr(r, "rank")) << "]\n";
        for (const auto& [k, v] : r) std::cout << "  " << k << " = " << attr_to_string(v) << "\n";
      }
      const auto links = gpu_link_matrix();
      if (!links.empty()) {
        std::cout << "[links]\n";
        for (const auto& row : links) {
          std::cout << " ";
          for (const std::string& c : row) std::cout << " " << c;
          std::cout << "\n";
        }
      }
      return 0;
    };
  });
}

void setup_validate_command(CLI::App& app, CommandAction& action) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("validate", "Check an HDF5 file against the schema; non-zero exit on any problem");
  cmd->add_option("file", *path, "ridgeline HDF5 file")->required();
  cmd->callback([path, &action] {
    action = [path](CommandContext& ctx) {
      int bad = 0;
      if (ctx.mpi.rank() == 0) {
        const std::vector<std::string> problems = validate_run_file(*path);
        for (const std::string& p : problems) std::cerr << *path << ": " << p << "\n";
        if (problems.empty()) std::cout << *path << ": valid (schema version " << kSchemaVersion << ")\n";
        bad = problems.empty() ? 0 : 1;
      }
      RIDGELINE_CHECK(MPI_Bcast(&bad, 1, MPI_INT, 0, ctx.mpi.world()));
      return bad;
    };
  });
}

void setup_report_command(CLI::App& app, CommandAction& action) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("report", "Print the summary tables of an HDF5 file");
  cmd->add_option("file", *path, "ridgeline HDF5 file")->required();
  cmd->callback([path, &action] {
    action = [path](CommandContext& ctx) {
      int bad = 0;
      if (ctx.mpi.rank() == 0) {
        const std::vector<std::string> problems = validate_run_file(*path);
        if (!problems.empty()) {
          for (const std::string& p : problems) std::cerr << *path << ": " << p << "\n";
          bad = 1;
        } else {
          print_report(std::cout, read_run_file(*path));
        }
      }
      RIDGELINE_CHECK(MPI_Bcast(&bad, 1, MPI_INT, 0, ctx.mpi.world()));
      return bad;
    };
  });
}

}  // namespace ridgeline
