// `ridgeline run`: one point (configuration) -> timed layers on every rank -> attribution against
// the roofs -> HDF5 file + summary. Also the small commands: env, validate, report.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>

#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/config.hpp"
#include "app/config_mixed.hpp"
#include "app/file_layout.hpp"
#include "app/fingerprint.hpp"
#include "app/job.hpp"
#include "app/node_summary.hpp"
#include "app/point.hpp"
#include "app/reporters.hpp"
#include "app/roofs.hpp"
#include "app/run_file.hpp"
#include "app/summary.hpp"
#include "app/sweep.hpp"
#include "app/trace_run.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/stats.hpp"
#include "models/cuda_backend.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

namespace {

// What --repeats adds to a run: each strategy's p50 step in every repeat, and the median over
// the repeats with its 95 % interval (repeated_median(), as a sweep point's).
struct RunRepeats {
  int count = 1;
  size_t used = 0; ///< the repeat the file's timelines and summaries come from
  Table table;     ///< /repeats: a row per strategy and repeat
};

// Runs the point `repeats` times (only the first checks its output: the output does not change
// between repeats) and keeps the repeat whose first strategy's p50 step is the median (the
// lower middle of an even count), with the first repeat's check. Rank 0 adds each strategy's
// median over the repeats and its interval to its summary. Stops at the first failed repeat.
PointResult run_repeats(JobContext& job, const PointSpec& spec, const Roofs& roofs,
                        Watchdog& watchdog, RunRepeats& out) {
  std::vector<PointResult> results;
  for (int rep = 0; rep < out.count; ++rep) {
    PointSpec repeat = spec;
    if (rep > 0) repeat.check = CheckMode::off;
    if (rep > 0) watchdog.rearm("repeat " + std::to_string(rep + 1) + " of the point");
    results.push_back(run_point(job, repeat, roofs, watchdog));
    if (!results.back().ok()) return std::move(results.back());
  }
  if (results.size() == 1) return std::move(results.front());
  std::vector<size_t> order(results.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  auto p50 = [&](size_t i) { return results[i].strategies.front().summary.step.p50; };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p50(a) < p50(b); });
  out.used = order[(order.size() - 1) / 2];
  // The check ran on the first repeat only: its verdicts are the run's (taken before the kept
  // repeat is moved out, which may be the first).
  std::vector<CheckOutcome> checks;
  for (const StrategyResult& r : results.front().strategies)
    checks.push_back(r.check);
  const bool check_failed = results.front().check_failed;
  PointResult point = std::move(results[out.used]);
  point.check_failed = check_failed;
  std::vector<std::string> names, statuses;
  std::vector<int64_t> repeat_index;
  std::vector<double> step_p50, step_p99;
  for (size_t s = 0; s < point.strategies.size(); ++s) {
    StrategyResult& r = point.strategies[s];
    std::vector<std::vector<double>> samples;
    for (size_t rep = 0; rep < results.size(); ++rep) {
      const StrategyResult& x = rep == out.used ? r : results[rep].strategies[s];
      samples.push_back(x.summary.step_ns);
      names.push_back(r.name);
      statuses.push_back("ok");
      repeat_index.push_back(static_cast<int64_t>(rep));
      step_p50.push_back(x.summary.step.p50);
      step_p99.push_back(x.summary.step.p99);
    }
    if (job.mpi().rank() != 0) continue;
    r.check = checks[s];
    for (auto& [key, value] : r.summary.attrs)
      for (const auto& [k, v] : check_attrs(checks[s]))
        if (key == k) value = v;
    const Interval step = repeated_median(samples);
    r.summary.attrs.insert(r.summary.attrs.end(),
                           {{"repeats", static_cast<int64_t>(results.size())},
                            {"repeat_used", static_cast<int64_t>(out.used)},
                            {"step_p50_median_ns", step.median},
                            {"step_p50_lo_ns", step.lo},
                            {"step_p50_hi_ns", step.hi},
                            {"interval", std::string(kIntervalMethod)}});
  }
  out.table = {{"strategy", names},
               {"repeat", repeat_index},
               {"status", statuses},
               {"step_p50_ns", step_p50},
               {"step_p99_ns", step_p99}};
  return point;
}

// The run's file contents (rank 0 holds all but the rows) and this rank's rows: one strategy's
// timelines at the root, several under /points/<k> (the root's /ranks then links to point 0's).
RunData run_file_data(JobContext& job, const RunConfig& cfg, const PointSpec& spec, int repeats,
                      const Roofs& roofs, const PointResult& point, const RunRepeats& repeated,
                      RankRows& mine) {
  const std::vector<StrategyResult>& results = point.strategies;
  RunData data;
  data.root = job.root_attrs("run");
  data.stack = point_stack(job, point);
  data.env = performance_env();
  data.config = config_attrs(cfg);
  data.config.emplace_back("repeats", static_cast<int64_t>(repeats));
  data.topology = job.topology(point.coords);
  for (size_t k = 0; k < results.size(); ++k) {
    mine.groups.push_back(results.size() > 1 ? "/points/" + std::to_string(k) : "");
    mine.timelines.push_back(&results[k].rows);
  }
  mine.samples = point.samples;
  mine.sample_period_ms = cfg.sample_ms;
  if (job.mpi().rank() == 0) {
    data.ops = point.ops;
    data.summary = results.front().summary;
    if (results.size() > 1)
      for (const StrategyResult& r : results) {
        RunData::Point p;
        p.config = data.config;
        p.config.emplace_back("strategy", r.name);
        // Each point ran one attention implementation of the list.
        for (auto& kv : p.config)
          if (kv.first == "attention") kv.second = r.attention;
        p.ops = point.ops;
        p.summary = r.summary;
        data.points.push_back(std::move(p));
      }
    if (!roofs.empty()) add_roofs(data, roofs, {{"transport", job.transport()}});
    if (repeats > 1) data.tables.push_back({"/repeats", repeated.table, {}});
    if (point.serving) {
      const ServingPlan& plan = *spec.serving;
      data.tables.push_back({"/serving/steps", serving_steps_table(*point.serving), {}});
      data.tables.push_back(
          {"/serving/requests", serving_requests_table(plan, *point.serving), {}});
      data.group_attrs.emplace_back("/serving", serving_attrs(plan, *point.serving));
    }
  }
  return data;
}

// The run's console tables: the roofs measured for it, each strategy's summary, then the
// tables that set the strategies side by side.
void print_run(std::ostream& out, const RunConfig& cfg, const PointSpec& spec, const Roofs& roofs,
               const RunData& data, const std::vector<StrategyResult>& results,
               const RunRepeats& repeated, const TraceRunResult* serving) {
  if (!roofs.empty() && cfg.roofs.empty()) print_roofs_summary(out, roofs);
  for (const StrategyResult& r : results) {
    RunData shown = data;
    shown.summary = r.summary;
    if (results.size() > 1) out << "\n== " << r.name << "\n";
    print_report(out, shown);
  }
  if (spec.scheduled())
    print_pipeline_table(out, results, spec.pp);
  else if (!spec.graphs && !spec.model.moe() && (results.size() > 1 || spec.tp > 1))
    // (An MoE step's lanes are not measured apart: its all-to-alls wait on its routing.)
    print_overlap_table(out, results);
  if (spec.attentions.size() > 1) print_attention_table(out, results);
  print_gpu_table(out, results, cfg.sample_ms);
  if (repeated.count > 1) print_repeats(out, results, repeated.used);
  if (serving != nullptr) print_serving(out, *spec.serving, *serving);
}

// The --json and --markdown summaries: the run's attributes, and each strategy's summary, ops
// and decode bins.
void set_run_summaries(SummaryReporter& summaries, const RunData& data,
                       const std::vector<StrategyResult>& results, const RunRepeats& repeated,
                       const PointSpec& spec, const TraceRunResult* serving) {
  std::vector<std::pair<std::string, Attrs>> attrs = {{"run", data.root}, {"config", data.config}};
  std::vector<std::pair<std::string, Table>> tables;
  for (const StrategyResult& r : results) {
    Attrs summary = r.summary.attrs;
    summary.insert(summary.begin(), {{"strategy", r.name},
                                     {"step_p50_ns", r.summary.step.p50},
                                     {"step_p95_ns", r.summary.step.p95},
                                     {"step_p99_ns", r.summary.step.p99}});
    if (!r.summary.nodes.empty()) summary.emplace_back("slow_nodes", slow_nodes(r.summary.nodes));
    attrs.emplace_back("summary " + r.name, summary);
    tables.emplace_back("ops " + r.name, aggregates_table(r.summary.ops));
    if (!r.summary.step_context.empty())
      tables.emplace_back("decode " + r.name, decode_bins_table(decode_bins(r.summary)));
    if (!r.summary.nodes.empty())
      tables.emplace_back("nodes " + r.name, nodes_table(r.summary.nodes));
  }
  if (repeated.count > 1) tables.emplace_back("repeats", repeated.table);
  if (serving != nullptr) {
    attrs.emplace_back("serving", serving_attrs(*spec.serving, *serving));
    tables.emplace_back("serving steps", serving_steps_table(*serving));
    tables.emplace_back("serving requests", serving_requests_table(*spec.serving, *serving));
  }
  summaries.set(std::move(attrs), std::move(tables));
}

// The answer last: the step's ceiling and shares, and where along tp the interconnect is or
// would become the ceiling (the full summary is in the file, --json and `report`); then each
// failed check.
void print_run_answer(std::ostream& out, JobContext& job, const RunConfig& cfg, const Roofs& roofs,
                      const std::vector<StrategyResult>& results) {
  Crossover next;
  if (!roofs.empty() && cfg.pp == 1)
    next = predict_crossover("tp", "", cfg, cfg, roofs, job.transport());
  std::string label = "tp=" + std::to_string(cfg.tp) + " " + cfg.phase;
  if (results.size() > 1) label += " (" + results.front().name + ")";
  print_headline(out, results.front().summary, label, results.front().check.status, "tp",
                 next.at_value, next.note);
  for (const StrategyResult& r : results)
    if (r.check.status == "failed")
      std::cerr << "ridgeline: check FAILED for " << r.name << ": relative L2 error "
                << r.check.max_rel_error << " exceeds the tolerance " << r.check.tolerance
                << " (tp=" << cfg.tp << " pp=" << cfg.pp
                << " output vs the whole model recomputed at TP=1)\n";
}

int run_one(CommandContext& ctx, RunConfig cfg, int repeats) {
  JobContext job(ctx, cfg.backend, cfg.allow_shared_gpu);
  MpiSession& mpi = job.mpi();
  if (reject_if_any(ctx, "invalid GPU placement", job.placement_problems())) return 2;
  if (cfg.backend == "auto" && job.gpus() == 0 && mpi.rank() == 0)
    std::cout << "ridgeline: no GPU found; using the host backend (fp32, OpenBLAS, MPI) and "
              << (cfg.hidden > 0 ? "the given model" : "the embedded default model") << "\n";
  ResolvedPoint resolved = resolve_point(job, cfg);
  if (repeats > 1 && trace_run(cfg))
    resolved.problems.emplace_back("--repeats: a trace run replays its trace once (give "
                                   "--repeats 1)");
  if (reject_if_any(ctx, "invalid configuration", resolved.problems)) return 2;
  const PointSpec& spec = resolved.spec;
  for (const std::string& warning : job.use_transport(cfg.transport))
    if (mpi.rank() == 0) std::cerr << "ridgeline: warning: " << warning << "\n";
  cfg.out = output_path(mpi.world(), cfg.out, "");
  // What the run prints and writes once measured, in that order, from these.
  Roofs roofs;
  RunRepeats repeated;
  repeated.count = repeats;
  PointResult point;
  RunData data;
  RankRows mine;
  ConsoleReporter console(mpi, [&](std::ostream& out) {
    print_run(out, cfg, spec, roofs, data, point.strategies, repeated, point.serving.get());
  });
  const FileWriteOptions layout{parse_file_layout(cfg.file_layout), cfg.ranks_per_file};
  Hdf5Reporter h5(mpi, cfg.out, true, [&](const std::string& path) {
    const FilesWritten written = write_run_files(mpi.world(), path, data, mine, layout);
    if (written.node_files == 0) return std::string();
    return " (per-node layout: links to " + std::to_string(written.node_files) + " node file" +
           (written.node_files > 1 ? "s" : "") + ")";
  });
  SummaryReporter summaries(mpi, cfg.json, cfg.markdown, "ridgeline run: " + cfg.model);
  JobReports reports(ctx, {&console, &h5, &summaries});
  // Every file this run will write is checked before anything is measured.
  if (reject_if_any(ctx, "cannot write the results", reports.file_problems(input_files(cfg))))
    return 2;
  if (mpi.rank() == 0 && !cfg.quiet) progress::enable_line("run");

  roofs = obtain_roofs(job, cfg.roofs, {spec.dtype}, layer_gemm_shapes(spec), cfg.timeout_s);
  Watchdog watchdog(cfg.timeout_s, "creating communicators and allocating weights");
  point = run_repeats(job, spec, roofs, watchdog, repeated);
  if (!point.ok()) {
    if (mpi.rank() == 0) {
      progress::finish_line("failed");
      std::cerr << "ridgeline: " << point.status << "\n";
    }
    return 1;
  }
  watchdog.rearm("gathering the topology and writing the file");
  data = run_file_data(job, cfg, spec, repeats, roofs, point, repeated, mine);
  if (mpi.rank() == 0) {
    progress::finish_line("");
    set_run_summaries(summaries, data, point.strategies, repeated, spec, point.serving.get());
  }
  // A wrong result outranks a file written elsewhere.
  const int status = reports.finish(point.check_failed ? 3 : 0);
  if (mpi.rank() == 0) print_run_answer(std::cout, job, cfg, roofs, point.strategies);
  return status;
}

} // namespace

void setup_run_command(CLI::App& app, CommandAction& action) {
  auto cfg = std::make_shared<RunConfig>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run one configuration: timed tensor/pipeline-parallel layers on every rank, each op and the "
      "step placed against the roofs -> HDF5 + summary");
  bind_run_options(*cmd, *cfg);
  bind_mixed_options(*cmd, *cfg);
  bind_trace_options(*cmd, *cfg);
  auto repeats = std::make_shared<int>(1);
  cmd->add_option("--repeats", *repeats,
                  "Measure the point R times: the file keeps the repeat whose step p50 is the "
                  "median (its timelines and summaries; the first repeat's check), every "
                  "repeat's p50 in /repeats, and each strategy's median over the repeats with "
                  "its 95 % interval. 1: one measurement; 3 or more on GPUs for an interval")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->callback([cfg, repeats, &action] {
    action = [cfg, repeats](CommandContext& ctx) { return run_one(ctx, *cfg, *repeats); };
  });
}

void setup_env_command(CLI::App& app, CommandAction& action) {
  CLI::App* cmd = app.add_subcommand(
      "env", "Print the software-stack fingerprint and every rank's host and devices");
  cmd->callback([&action] {
    action = [](CommandContext& ctx) {
      const int gpus = cuda_device_count();
      const std::string backend = gpus > 0 ? "cuda" : "host";
      // Where each rank's GPU is, shared or not: env only reports, it refuses nothing.
      const GpuBinding gpu = bind_gpu(ctx.mpi, gpus > 0, true).binding;
      const std::vector<Attrs> ranks =
          gather_attrs(ctx.mpi.world(), rank_topology(ctx.mpi, backend, gpu.device,
                                                      gpu_binding_attrs(ctx.mpi, gpu)));
      if (ctx.mpi.rank() != 0) return 0;
      std::cout << "[stack]\n";
      for (const auto& [k, v] : stack_attrs())
        std::cout << "  " << k << " = " << attr_to_string(v) << "\n";
      std::cout << "[environment]\n";
      for (const auto& [k, v] : performance_env())
        std::cout << "  " << k << " = " << v << "\n";
      for (const Attrs& r : ranks) {
        std::cout << "[rank " << attr_to_string(*find_attr(r, "rank")) << "]\n";
        for (const auto& [k, v] : r)
          std::cout << "  " << k << " = " << attr_to_string(v) << "\n";
      }
      const auto links = gpu_link_matrix();
      if (!links.empty()) {
        std::cout << "[links]\n";
        for (const auto& row : links) {
          std::cout << " ";
          for (const std::string& c : row)
            std::cout << " " << c;
          std::cout << "\n";
        }
      }
      return 0;
    };
  });
}

void setup_validate_command(CLI::App& app, CommandAction& action) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Check an HDF5 file against the schema; non-zero exit on any problem");
  cmd->add_option("file", *path, "ridgeline HDF5 file")->required()->check(regular_file());
  cmd->callback([path, &action] {
    action = [path](CommandContext& ctx) {
      int bad = 0;
      if (ctx.mpi.rank() == 0) {
        const std::vector<std::string> problems = validate_run_file(*path);
        for (const std::string& p : problems)
          std::cerr << *path << ": " << p << "\n";
        if (problems.empty())
          std::cout << *path << ": valid (schema version " << kSchemaVersion << ")\n";
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

// Roofs back from the file's /roofs tables (for printing), with the origin the file stored
// (measured by which job, read from which file, or a hardware description's data sheet).
Roofs roofs_of(const std::string& path, const RunData& d) {
  if (find_table(d, "/roofs/gemm") == nullptr) return {};
  Roofs roofs = read_roofs(path);
  for (const auto& [group, attrs] : d.group_attrs)
    if (const AttrValue* source = find_attr(attrs, "source"); group == "/roofs" && source)
      roofs.source = attr_to_string(*source);
  return roofs;
}

// Prints one file; sweep rows are appended to `joined` (tagged with the file) for the join.
void report_file(std::ostream& out, const std::string& path, std::vector<SweepRow>& joined,
                 std::vector<std::string>& axes, AxisOrder& order) {
  const RunData d = read_run_file(path, false);
  const std::string command = command_of(d);
  if (command != "run" && command != "sweep" && command != "roofs" && command != "collectives")
    throw UsageError(path + ": a file of `ridgeline " + command +
                     "`: report prints run, sweep, roofs and collectives files");
  out << "== " << path << " (ridgeline " << command << ")\n";
  if (const std::string note = incomplete_note(d); !note.empty())
    out << "PARTIAL: " << note << "\n";
  if (command == "collectives") {
    print_collectives_file(out, d);
    if (const AttrValue* check = find_attr(d.root, "check"))
      out << "check: " << attr_to_string(*check) << "\n";
    return;
  }
  const Roofs roofs = roofs_of(path, d);
  if (command == "roofs" || (!roofs.empty() && command == "sweep")) print_roofs(out, roofs);
  if (command == "run") print_report(out, d);
  if (command != "sweep") return;
  const NamedTable* points = find_table(d, "/sweep/points");
  const NamedTable* crossings = find_table(d, "/sweep/crossovers");
  if (points == nullptr || crossings == nullptr)
    throw UsageError(path + ": a sweep file without /sweep tables");
  std::vector<SweepRow> rows = sweep_rows_from(points->table);
  // Which link this file measured, so that its own crossovers and predictions are read as such.
  if (!rows.empty()) {
    const std::string transport = rows.front().axis.at("transport");
    const double gbps = interconnect_gbps(roofs);
    char text[160];
    std::snprintf(text, sizeof(text), "transport %s: all-reduce roof %.1f GB/s bus bandwidth\n",
                  transport.c_str(), gbps);
    out << (gbps > 0 ? text : "transport " + transport + ": no interconnect roof in the file\n");
    if (gbps > 0) order["transport"].emplace(transport, gbps);
  }
  std::vector<Crossover> crossovers;
  const Table& ct = crossings->table;
  auto col = [&](const char* name) -> const ColumnValues& {
    for (const Column& c : ct)
      if (c.name == name) return c.values;
    throw UsageError(path + ": /sweep/crossovers has no field " + name);
  };
  auto has = [&](const char* name) {
    return std::any_of(ct.begin(), ct.end(), [&](const Column& c) { return c.name == name; });
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
    // Files written before repeats carry no status: each crossover then rests on one repeat.
    if (has("status"))
      c.status = std::get<std::vector<std::string>>(col("status"))[i];
    else
      c.status = c.predicted ? "predicted" : "unrepeated";
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

} // namespace

void setup_report_command(CLI::App& app, CommandAction& action) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Print the tables of run, sweep, roofs and collectives files: per-op time, ceiling and "
      "efficiency, the step by ceiling, sweep points and crossovers, each collective's sizes and "
      "fitted roof; several sweep files (one per transport) are joined into one table and their "
      "crossovers found along the transport too; a file its job left incomplete is marked PARTIAL");
  cmd->add_option("files", *paths, "ridgeline HDF5 files")->required()->check(regular_file());
  cmd->callback([paths, &action] {
    const std::string problem =
        list_problem(*paths, [](const std::string&, std::string&) { return std::string(); });
    if (!problem.empty()) throw CLI::ValidationError("files", problem);
    action = [paths](CommandContext& ctx) {
      int bad = 0;
      if (ctx.mpi.rank() == 0) {
        std::vector<SweepRow> joined;
        std::vector<std::string> axes;
        AxisOrder order;
        for (const std::string& path : *paths) {
          // A partial file (its job was killed) is reported, marked PARTIAL.
          const std::vector<std::string> problems = validate_run_file(path, true);
          if (!problems.empty()) {
            for (const std::string& p : problems)
              std::cerr << path << ": " << p << "\n";
            bad = std::max(bad, 1);
            continue;
          }
          try {
            report_file(std::cout, path, joined, axes, order);
          } catch (const UsageError& e) {
            std::cerr << "ridgeline: " << e.what() << "\n";
            bad = 2;
          }
        }
        std::set<std::string> files, transports;
        for (const SweepRow& r : joined)
          files.insert(r.file), transports.insert(r.axis.at("transport"));
        if (!bad && files.size() > 1) {
          if (transports.size() > 1 &&
              std::find(axes.begin(), axes.end(), "transport") == axes.end())
            axes.push_back("transport");
          for (size_t i = 0; i < joined.size(); ++i)
            joined[i].point = static_cast<int64_t>(i);
          for (SweepRow& r : joined) {
            r.label.clear();
            for (const std::string& axis : axes)
              r.label += (r.label.empty() ? "" : " ") + axis + "=" + r.axis.at(axis);
          }
          std::cout << "== joined: " << files.size() << " files, " << joined.size() << " points\n";
          if (transports.size() > 1) {
            std::vector<std::pair<double, std::string>> ranked;
            for (const std::string& t : transports) {
              const auto it = order["transport"].find(t);
              ranked.emplace_back(it == order["transport"].end() ? -1.0 : it->second, t);
            }
            std::sort(ranked.rbegin(), ranked.rend());
            std::cout << "transport, fastest link first (each file's all-reduce roof):";
            for (const auto& [gbps, t] : ranked)
              std::cout << " " << t
                        << (gbps < 0
                                ? " (no roof: text order)"
                                : " (" + std::to_string(static_cast<int>(gbps + 0.5)) + " GB/s)");
            std::cout << "\n";
          }
          print_sweep(std::cout, joined, axes, find_crossovers(joined, axes, order));
        }
      }
      RIDGELINE_CHECK(MPI_Bcast(&bad, 1, MPI_INT, 0, ctx.mpi.world()));
      return bad;
    };
  });
}

} // namespace ridgeline
