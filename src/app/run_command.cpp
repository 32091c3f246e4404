// `ridgeline run`: one point (configuration) -> timed layers on every rank -> attribution against
// the roofs -> HDF5 file + summary. Also the small commands: env, validate, report.
#include <algorithm>
#include <iostream>
#include <memory>
#include <set>

#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/config.hpp"
#include "app/fingerprint.hpp"
#include "app/job.hpp"
#include "app/point.hpp"
#include "app/reporters.hpp"
#include "app/roofs.hpp"
#include "app/run_file.hpp"
#include "app/sweep.hpp"
#include "core/error.hpp"
#include "models/cuda_backend.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

namespace {

int run_one(CommandContext& ctx, RunConfig cfg) {
  JobContext job(ctx, cfg.backend, cfg.allow_shared_gpu);
  MpiSession& mpi = job.mpi();
  if (reject_if_any(ctx, "invalid GPU placement", job.placement_problems())) return 2;
  if (cfg.backend == "auto" && job.gpus() == 0 && mpi.rank() == 0)
    std::cout << "ridgeline: no GPU found; using the host backend (fp32, OpenBLAS, MPI) and "
              << (cfg.hidden > 0 ? "the given model" : "the embedded default model") << "\n";
  if (reject_if_any(ctx, "invalid configuration", resolve_point(job, cfg))) return 2;
  for (const std::string& warning : job.use_transport(cfg.transport))
    if (mpi.rank() == 0) std::cerr << "ridgeline: warning: " << warning << "\n";
  cfg.out = output_path(mpi.world(), cfg.out, "");

  const Roofs roofs = obtain_roofs(job, cfg.roofs, {parse_dtype(cfg.dtype)}, layer_gemm_shapes(cfg), cfg.timeout_s);
  Watchdog watchdog(cfg.timeout_s, "creating communicators and allocating weights");
  PointResult point = run_point(job, cfg, roofs, watchdog);
  if (!point.ok()) {
    if (mpi.rank() == 0) std::cerr << "ridgeline: " << point.status << "\n";
    return 1;
  }
  watchdog.rearm("gathering the topology and writing the file");
  RunData data;
  data.root = job.root_attrs("run");
  data.stack = job.stack();
  data.env = performance_env();
  data.config = config_attrs(cfg);
  data.topology = job.topology(point.coords);
  if (mpi.rank() == 0) {
    const std::vector<StrategyResult>& results = point.strategies;
    data.ops = point.ops;
    data.timelines = results.front().timelines;
    data.summary = results.front().summary;
    if (results.size() > 1)
      for (const StrategyResult& r : results) {
        RunData::Point p;
        p.config = data.config;
        p.config.emplace_back("strategy", r.name);
        p.ops = point.ops;
        p.timelines = r.timelines;
        p.summary = r.summary;
        data.points.push_back(std::move(p));
      }
    for (size_t rank = 0; rank < point.rank_samples.size(); ++rank)
      if (!point.rank_samples[rank].empty())
        data.tables.push_back({"/ranks/" + std::to_string(rank) + "/samples",
                               samples_table(point.rank_samples[rank]),
                               {{"period_ms", static_cast<int64_t>(cfg.sample_ms)}}});
    if (!roofs.empty()) add_roofs(data, roofs, {{"transport", job.transport()}});
    write_run_file(cfg.out, data);
    if (!roofs.empty() && cfg.roofs.empty()) print_roofs_summary(std::cout, roofs);
    for (const StrategyResult& r : results) {
      RunData shown = data;
      shown.summary = r.summary;
      if (results.size() > 1) std::cout << "\n== overlap " << r.name << "\n";
      print_report(std::cout, shown);
    }
    if (!cfg.graphs && (results.size() > 1 || cfg.tp > 1)) print_overlap_table(std::cout, results);
    print_gpu_table(std::cout, results, cfg.sample_ms);
    std::vector<std::pair<std::string, Attrs>> attrs = {{"run", data.root}, {"config", data.config}};
    std::vector<std::pair<std::string, Table>> tables;
    for (const StrategyResult& r : results) {
      Attrs summary = r.summary.attrs;
      summary.insert(summary.begin(), {{"strategy", r.name}, {"step_p50_ns", r.summary.step.p50},
                                       {"step_p95_ns", r.summary.step.p95}, {"step_p99_ns", r.summary.step.p99}});
      attrs.emplace_back("summary " + r.name, summary);
      tables.emplace_back("ops " + r.name, aggregates_table(r.summary.ops));
    }
    if (!cfg.json.empty()) write_json(cfg.json, attrs, tables);
    if (!cfg.markdown.empty()) write_markdown(cfg.markdown, "ridgeline run: " + cfg.model, attrs, tables);
    std::cout << "wrote " << cfg.out << "\n";
    for (const StrategyResult& r : results)
      if (r.check.status == "failed")
        std::cerr << "ridgeline: check FAILED for overlap " << r.name << ": relative L2 error "
                  << r.check.max_rel_error << " exceeds the tolerance " << r.check.tolerance
                  << " (tp=" << cfg.tp << " pp=" << cfg.pp
                  << " output vs the whole model recomputed at TP=1)\n";
  }
  int ok = point.check_failed ? 0 : 1;
  RIDGELINE_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, mpi.world()));
  return ok ? 0 : 3;
}

}  // namespace

void setup_run_command(CLI::App& app, CommandAction& action) {
  auto cfg = std::make_shared<RunConfig>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run one configuration: timed tensor/pipeline-parallel layers on every rank, each op and the "
             "step placed against the roofs -> HDF5 + summary");
  bind_run_options(*cmd, *cfg);
  cmd->callback([cfg, &action] { action = [cfg](CommandContext& ctx) { return run_one(ctx, *cfg); }; });
}

void setup_env_command(CLI::App& app, CommandAction& action) {
  CLI::App* cmd = app.add_subcommand("env", "Print the software-stack fingerprint and every rank's host and devices");
  cmd->callback([&action] {
    action = [](CommandContext& ctx) {
      const int gpus = cuda_device_count();
      const std::string backend = gpus > 0 ? "cuda" : "host";
      // Where each rank's GPU is, shared or not: env only reports, it refuses nothing.
      const GpuBinding gpu = bind_gpu(ctx.mpi, gpus > 0, true).binding;
      const std::vector<Attrs> ranks = gather_attrs(
          ctx.mpi.world(), rank_topology(ctx.mpi, backend, gpu.device, gpu_binding_attrs(ctx.mpi, gpu)));
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

namespace {

const NamedTable* find_table(const RunData& d, const std::string& path) {
  for (const NamedTable& t : d.tables)
    if (t.path == path) return &t;
  return nullptr;
}

std::string command_of(const RunData& d) {
  const AttrValue* c = find_attr(d.root, "command");
  return c ? attr_to_string(*c) : "run";
}

// Roofs back from the file's /roofs tables (for printing).
Roofs roofs_of(const std::string& path, const RunData& d) {
  if (find_table(d, "/roofs/gemm") == nullptr) return {};
  return read_roofs(path);
}

// Prints one file; sweep rows are appended to `joined` (tagged with the file) for the join.
void report_file(std::ostream& out, const std::string& path, std::vector<SweepRow>& joined,
                 std::vector<std::string>& axes) {
  const RunData d = read_run_file(path);
  const std::string command = command_of(d);
  out << "== " << path << " (ridgeline " << command << ")\n";
  if (command == "collectives")
    throw UsageError(path + ": a collectives file: its tables are printed by the collectives run itself; "
                            "read /collectives/<name> with h5py or python3 -m ridgeline_analysis");
  const Roofs roofs = roofs_of(path, d);
  if (command == "roofs" || (!roofs.empty() && command == "sweep")) print_roofs(out, roofs);
  if (command == "run") print_report(out, d);
  if (command != "sweep") return;
  const NamedTable* points = find_table(d, "/sweep/points");
  const NamedTable* crossings = find_table(d, "/sweep/crossovers");
  if (points == nullptr || crossings == nullptr) throw UsageError(path + ": a sweep file without /sweep tables");
  std::vector<SweepRow> rows = sweep_rows_from(points->table);
  std::vector<Crossover> crossovers;
  const Table& ct = crossings->table;
  auto col = [&](const char* name) -> const ColumnValues& {
    for (const Column& c : ct)
      if (c.name == name) return c.values;
    throw UsageError(path + ": /sweep/crossovers has no field " + name);
  };
  const auto& cax = std::get<std::vector<std::string>>(col("axis"));
  for (size_t i = 0; i < cax.size(); ++i) {
    Crossover c;
    c.axis = cax[i];
    c.fixed = std::get<std::vector<std::string>>(col("fixed"))[i];
    c.kind = std::get<std::vector<std::string>>(col("kind"))[i];
    c.predicted = std::get<std::vector<int64_t>>(col("predicted"))[i] != 0;
    c.before_value = std::get<std::vector<std::string>>(col("before_value"))[i];
    c.at_value = std::get<std::vector<std::string>>(col("at_value"))[i];
    c.note = std::get<std::vector<std::string>>(col("note"))[i];
    crossovers.push_back(c);
  }
  std::vector<std::string> file_axes;
  const AttrValue* a = nullptr;
  for (const auto& [group, attrs] : d.group_attrs)
    if (group == "/sweep") a = find_attr(attrs, "axes");
  const std::string axes_text = a ? attr_to_string(*a) : "";
  if (!axes_text.empty()) file_axes = split_list(axes_text);
  print_sweep(out, rows, file_axes, crossovers);
  for (const std::string& axis : file_axes)
    if (std::find(axes.begin(), axes.end(), axis) == axes.end()) axes.push_back(axis);
  for (SweepRow& r : rows) {
    r.file = path;
    joined.push_back(r);
  }
}

}  // namespace

void setup_report_command(CLI::App& app, CommandAction& action) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Print the tables of run, sweep and roofs files: per-op time, ceiling and efficiency, the "
                "step by ceiling, sweep points and crossovers; several sweep files (one per transport) are "
                "joined into one table and their crossovers found along the transport too");
  cmd->add_option("files", *paths, "ridgeline HDF5 files")->required();
  cmd->callback([paths, &action] {
    action = [paths](CommandContext& ctx) {
      int bad = 0;
      if (ctx.mpi.rank() == 0) {
        std::vector<SweepRow> joined;
        std::vector<std::string> axes;
        for (const std::string& path : *paths) {
          const std::vector<std::string> problems = validate_run_file(path);
          if (!problems.empty()) {
            for (const std::string& p : problems) std::cerr << path << ": " << p << "\n";
            bad = 1;
            continue;
          }
          try {
            report_file(std::cout, path, joined, axes);
          } catch (const UsageError& e) {
            std::cerr << "ridgeline: " << e.what() << "\n";
            bad = 1;
          }
        }
        std::set<std::string> files, transports;
        for (const SweepRow& r : joined) files.insert(r.file), transports.insert(r.axis.at("transport"));
        if (!bad && files.size() > 1) {
          if (transports.size() > 1 && std::find(axes.begin(), axes.end(), "transport") == axes.end())
            axes.push_back("transport");
          for (size_t i = 0; i < joined.size(); ++i) joined[i].point = static_cast<int64_t>(i);
          for (SweepRow& r : joined) {
            r.label.clear();
            for (const std::string& axis : axes) r.label += (r.label.empty() ? "" : " ") + axis + "=" + r.axis.at(axis);
          }
          std::cout << "== joined: " << files.size() << " files, " << joined.size() << " points\n";
          print_sweep(std::cout, joined, axes, find_crossovers(joined, axes));
        }
      }
      RIDGELINE_CHECK(MPI_Bcast(&bad, 1, MPI_INT, 0, ctx.mpi.world()));
      return bad;
    };
  });
}

}  // namespace ridgeline
