// `ridgeline sweep` (see sweep.hpp): its options, the grid, and the job that measures it.
#include "app/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "app/attribution.hpp"
#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/config_file.hpp"
#include "app/config_mixed.hpp"
#include "app/file_layout.hpp"
#include "app/fingerprint.hpp"
#include "app/job.hpp"
#include "app/point.hpp"
#include "app/reporters.hpp"
#include "app/run_file.hpp"
#include "collectives/transport.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/ranges.hpp"
#include "core/stop.hpp"
#include "models/work_model.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {

namespace {

struct SweepOptions {
  RunConfig base;
  std::string lists[std::size(kSweepAxes)]; ///< as given; split by split_list (empty items kept)
  bool keep_timelines = false;
  int repeats = 3;
  std::string slice; ///< "I/N" as given, or empty: the whole grid
};

// --slice I/N: the I-th (1-based) of N slices of the grid's distinct points.
struct Slice {
  int64_t index = 1, count = 1;
};

Slice parse_slice(const std::string& text) {
  Slice s;
  const size_t slash = text.find('/');
  if (text.empty() || slash == std::string::npos) return s;
  s.index = std::stoll(text.substr(0, slash));
  s.count = std::stoll(text.substr(slash + 1));
  return s;
}

// The p50 step of `point`'s ok repeats that is their median (the lower middle of an even count),
// so that it names one repeat.
double median_repeat(const std::vector<SweepRepeat>& repeats, int64_t point) {
  std::vector<double> p50s;
  for (const SweepRepeat& r : repeats)
    if (r.point == point && r.status == "ok") p50s.push_back(r.step_p50_ns);
  std::sort(p50s.begin(), p50s.end());
  return p50s[(p50s.size() - 1) / 2];
}

// Ranks beyond a point's tp x pp run it as data-parallel replicas.
void replicate(RunConfig& cfg, int world) {
  cfg.dp =
      cfg.tp > 0 && cfg.pp > 0 && world % (cfg.tp * cfg.pp) == 0 ? world / (cfg.tp * cfg.pp) : 1;
}

} // namespace

void set_sweep_axis(RunConfig& cfg, const std::string& axis, const std::string& value) {
  if (axis == "tp") cfg.tp = value == "auto" ? 0 : std::stoi(value);
  if (axis == "batch") cfg.batch = std::stoll(value);
  if (axis == "seq") cfg.seq = std::stoll(value);
  if (axis == "context") cfg.context = std::stoll(value);
  if (axis == "hidden") {
    // The MLP keeps its ratio to the hidden size (a model given by its dimensions alone gets 4h
    // from the defaults).
    const int64_t hidden = std::stoll(value);
    if (cfg.hidden > 0 && cfg.ffn_hidden > 0) cfg.ffn_hidden = cfg.ffn_hidden * hidden / cfg.hidden;
    cfg.hidden = hidden;
  }
  if (axis == "phase") cfg.phase = value;
  if (axis == "overlap") cfg.overlap = value;
  if (axis == "transport") cfg.transport = value;
  if (axis == "dtype") cfg.dtype = value;
  if (axis == "prefill_share") cfg.prefill_share = std::stod(value);
  if (axis == kEpAxis) cfg.ep = std::stoi(value);
}

std::string sweep_axis_value(const RunConfig& cfg, const std::string& axis) {
  if (axis == "tp") return std::to_string(cfg.tp);
  if (axis == "batch") return std::to_string(cfg.batch);
  if (axis == "seq") return std::to_string(cfg.seq);
  if (axis == "context") return std::to_string(cfg.context);
  if (axis == "hidden") return std::to_string(cfg.hidden);
  if (axis == "phase") return cfg.phase;
  if (axis == "overlap") return cfg.overlap;
  if (axis == "transport") return cfg.transport;
  if (axis == "prefill_share") {
    const double share = prefill_share_of(cfg);
    return std::isnan(share) ? "" : share_text(share);
  }
  if (axis == kEpAxis) return std::to_string(cfg.ep);
  return cfg.dtype;
}

namespace {

// When a sweep rewrites its file: after runs 1, 2, 4, 8, ... (the early points are safe at
// once) and whenever kCheckpointSeconds and twenty times the last write's duration have passed,
// so that a run costs the same at run 1 and at run 5,000 (the writes take at most about 5 % of
// the time however long the file grows) and a job killed without warning loses that much time
// at most. Rank 0 keeps the clock; every rank takes part in each write.
class Checkpoints {
public:
  static constexpr double kCheckpointSeconds = 30;
  static constexpr double kWriteShare = 20;
  bool due(const MpiSession& mpi) {
    ++m_runs;
    using clock = std::chrono::steady_clock;
    int due = (m_runs & (m_runs - 1)) == 0 || clock::now() >= m_next;
    RIDGELINE_CHECK(MPI_Bcast(&due, 1, MPI_INT, 0, mpi.world()));
    if (due) ++m_writes;
    return due != 0;
  }
  /// After a write that took `seconds`: the next time-based checkpoint.
  void wrote(double seconds) {
    m_next =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(std::max(kCheckpointSeconds, kWriteShare * seconds)));
  }
  int64_t runs() const { return m_runs; }
  int64_t writes() const { return m_writes; }

private:
  int64_t m_runs = 0, m_writes = 0;
  std::chrono::steady_clock::time_point m_next =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(kCheckpointSeconds));
};

// One sweep job: its shared checks, the roofs, the planned points, every repeat of every point
// taking turns, the checkpoints of the file, and the crossovers and reports at the end.
class SweepRun {
public:
  SweepRun(CommandContext& ctx, SweepOptions o)
      : m_ctx(ctx), m_o(std::move(o)), m_job(ctx, m_o.base.backend, m_o.base.allow_shared_gpu),
        m_mpi(m_job.mpi()), m_slice(parse_slice(m_o.slice)),
        m_console(m_mpi,
                  [this](std::ostream& out) { print_sweep(out, m_rows, m_axes, m_crossovers); }) {}

  int run() {
    if (reject_if_any(m_ctx, "invalid GPU placement", m_job.placement_problems())) return 2;
    split_sweep_axis_lists(m_o.lists, m_lists, m_axes);
    if (reject_if_any(m_ctx, "invalid sweep", shared_problems())) return 2;
    if (m_mpi.rank() == 0 && !m_o.base.quiet) progress::enable_line("sweep");
    // The grid: every combination, the last axis fastest; a point's options are those of the
    // base configuration with its axis values.
    m_grid = sweep_grid(m_o.base, m_lists);
    if (m_slice.count > static_cast<int64_t>(m_grid.size())) {
      reject_if_any(m_ctx, "invalid sweep", {slice_problem(m_grid.size())});
      return 2;
    }
    const std::vector<std::string>& transports = m_lists[transport_axis()];
    for (const std::string& warning :
         m_job.use_transport(transports.empty() ? m_o.base.transport : transports.front()))
      if (m_mpi.rank() == 0) std::cerr << "ridgeline: warning: " << warning << "\n";
    obtain_sweep_roofs();
    start_file();
    plan_points();
    if (m_rows.empty()) {
      reject_if_any(m_ctx, "invalid sweep", {slice_problem(m_seen)});
      return 2;
    }
    const int stopped = run_repeats();
    if (stopped != 0) return stopped_status(stopped);
    return finish();
  }

private:
  static size_t axis_index(const char* axis) {
    return static_cast<size_t>(
        std::find(std::begin(kSweepAxes), std::end(kSweepAxes), std::string(axis)) -
        std::begin(kSweepAxes));
  }
  static size_t transport_axis() { return axis_index("transport"); }

  // --prefill-share moves the tokens of a mixed step: every point of the sweep must be one.
  std::string share_axis_problem() const {
    if (m_lists[axis_index("prefill_share")].empty()) return "";
    const std::vector<std::string>& listed = m_lists[axis_index("phase")];
    const std::vector<std::string> phases = listed.empty() ? std::vector{m_o.base.phase} : listed;
    for (const std::string& phase : phases)
      if (phase != "mixed")
        return "--prefill-share moves a mixed step's tokens between prefill chunks and decode "
               "tokens: it needs --phase mixed (got --phase " +
               phase + ")";
    return "";
  }

  // --ep: each point runs the world's ranks as data-parallel replicas (tp 1, pp 1) in EP groups
  // of ep consecutive ones, each rank holding experts / ep experts; so every listed degree must
  // divide both, and a dense model has nothing to split.
  std::string ep_axis_problem() const {
    const std::vector<std::string>& eps = m_lists[axis_index(kEpAxis)];
    const int world = m_mpi.size();
    const int64_t experts = m_o.base.experts;
    if (eps.empty()) return "";
    if (experts == 0)
      return "--ep " + join(eps, ",") +
             ": the expert-parallel degree splits an MoE model's experts; this model is dense "
             "(--experts 0)";
    for (const std::string& text : eps) {
      const int ep = std::stoi(text);
      if (world % ep != 0 || experts % ep != 0)
        return "--ep " + text + " does not divide " +
               (world % ep != 0 ? "the " + std::to_string(world) + " ranks"
                                : "the " + std::to_string(experts) + " experts") +
               ": a sweep runs every MoE point on all ranks as data-parallel replicas, in EP "
               "groups of ep consecutive replicas each holding experts / ep experts";
    }
    return "";
  }

  // What every point shares is checked once, before anything is measured: the backend, the
  // output files and the roofs file (a point's own problems fail only that point).
  std::vector<std::string> shared_problems() {
    std::vector<std::string> problems;
    RunConfig shared = m_o.base;
    apply_defaults(shared, m_job.backend_name(), m_mpi.nodes());
    m_o.base.file_layout = shared.file_layout; // one layout for every rewrite of the file
    for (std::string& problem : validate_shared(shared))
      problems.push_back(std::move(problem));
    if (shared.backend == "cuda" && m_job.gpus() == 0)
      problems.emplace_back("--backend cuda: no CUDA device is visible");
    for (const std::string& problem : {share_axis_problem(), ep_axis_problem()})
      if (!problem.empty()) problems.push_back(problem);
    if (m_lists[transport_axis()].size() > 1)
      problems.emplace_back(
          "--transport: NCCL reads its environment once per process, so a job runs one "
          "transport: run one sweep per transport and join them with `ridgeline report A.h5 "
          "B.h5`");
    m_o.base.out = output_path(m_mpi.world(), m_o.base.out, "sweep");
    // Every rank takes part in each write of the file, at rank 0's fallback path from the first
    // write that fails on. Only the last write's note is printed: the checkpoints are counted
    // before they write, the complete file is not one.
    m_h5.emplace(m_mpi, m_o.base.out, true, [this](const std::string& path) {
      write_run_files(m_mpi.world(), path, m_data, m_mine, m_layout);
      return " (written " + std::to_string(m_checkpoints.writes() + 1) + " times during the sweep)";
    });
    m_summary_files.emplace(m_mpi, m_o.base.json, m_o.base.markdown, "ridgeline sweep");
    m_reports.emplace(m_ctx, std::vector<Reporter*>{&m_console, &*m_h5, &*m_summary_files});
    // Every file the sweep will write is checked before anything is measured.
    for (std::string& problem : m_reports->file_problems(input_files(m_o.base)))
      problems.push_back(std::move(problem));
    return problems;
  }

  // Roofs: one file, or one short measurement for every point with the GEMM shapes of every
  // point that can run.
  void obtain_sweep_roofs() {
    const int world = m_mpi.size();
    std::vector<RoofsPlan::Shape> shapes;
    std::vector<DType> dtypes;
    const NodeMap nodes = map_nodes(m_mpi.hosts());
    for (RunConfig cfg : m_grid) {
      apply_defaults(cfg, m_job.backend_name());
      replicate(cfg, world);
      if (!resolve_grid(cfg, nodes, world).empty()) continue;
      const ValidatedPoint validated = validate_point(cfg, world);
      if (!validated.problems.empty()) continue;
      const PointSpec& point = validated.spec;
      if (std::find(dtypes.begin(), dtypes.end(), point.dtype) == dtypes.end())
        dtypes.push_back(point.dtype);
      for (const RoofsPlan::Shape& shape : layer_gemm_shapes(point))
        if (std::none_of(shapes.begin(), shapes.end(), [&](const RoofsPlan::Shape& s) {
              return s.m == shape.m && s.n == shape.n && s.k == shape.k;
            }))
          shapes.push_back(shape);
    }
    m_roofs = obtain_roofs(m_job, m_o.base.roofs, dtypes, shapes, m_o.base.timeout_s);
    if (m_mpi.rank() == 0 && !m_roofs.empty() && m_o.base.roofs.empty())
      print_roofs_summary(std::cout, m_roofs);
    if (m_mpi.rank() == 0)
      std::cout << "ridgeline sweep: " << m_grid.size() << " point(s) on " << world
                << " rank(s); a point with tp x pp below the ranks runs as data-parallel "
                   "replicas (gradient traffic in the train phase only, the global --batch "
                   "shared), its step the longest replica's\n";
  }

  // The file's fixed parts: root, stack, environment, configuration, topology and roofs. Rank 0
  // holds the sweep's tables after them. With --keep-timelines every rank keeps its own
  // timeline of each point and writes it (or sends it to its node's writer) at every rewrite of
  // the file.
  void start_file() {
    m_data.root = m_job.root_attrs("sweep");
    m_data.stack = m_job.stack();
    m_data.env = performance_env();
    m_data.config = config_attrs(m_o.base);
    for (size_t a = 0; a < std::size(kSweepAxes); ++a)
      if (!m_lists[a].empty())
        m_data.config.emplace_back(std::string("sweep_") + kSweepAxes[a], join(m_lists[a], ","));
    m_data.config.emplace_back("keep_timelines", static_cast<int64_t>(m_o.keep_timelines));
    m_data.config.emplace_back("repeats", static_cast<int64_t>(m_o.repeats));
    if (!m_o.slice.empty()) m_data.config.emplace_back("sweep_slice", m_o.slice);
    m_data.topology = m_job.topology({});
    if (!m_roofs.empty()) add_roofs(m_data, m_roofs, {{"transport", m_job.transport()}});
    m_fixed_tables = m_data.tables.size();
    m_fixed_groups = m_data.group_attrs.size();
    m_layout = {parse_file_layout(m_o.base.file_layout), m_o.base.ranks_per_file};
  }

  std::string slice_problem(size_t points) const {
    return "--slice " + m_o.slice + " selects no point: the grid has " + std::to_string(points) +
           " distinct point(s), fewer than its " + std::to_string(m_slice.count) + " slices";
  }

  // The points, each once: decode ignores --seq, prefill --context and a mixed step --batch (its
  // options give its sequences), so such combinations repeat a point. A slice I/N keeps the I-th,
  // (I+N)-th, ... of them: the slices of one grid are disjoint, together they are the grid, and
  // each gets its share of small and large points.
  void plan_points() {
    std::set<std::string> labels;
    const std::vector<std::string> all_axes(std::begin(kSweepAxes), std::end(kSweepAxes));
    for (const RunConfig& point : m_grid) {
      RunConfig cfg = point;
      replicate(cfg, m_mpi.size());
      ResolvedPoint resolved = resolve_point(m_job, cfg);
      std::vector<std::string>& problems = resolved.problems;
      if (cfg.phase == "prefill") cfg.context = 0;
      if (cfg.phase == "mixed") cfg.batch = 1;
      SweepRow row;
      row.point = static_cast<int64_t>(m_rows.size());
      for (const char* a : kSweepAxes)
        row.axis[a] = sweep_axis_value(cfg, a);
      row.label = m_axes.empty() ? "point" : sweep_row_label(row, m_axes);
      if (!labels.insert(sweep_row_label(row, all_axes)).second) continue;
      m_seen = labels.size();
      if (static_cast<int64_t>(labels.size() - 1) % m_slice.count != m_slice.index - 1) continue;
      row.repeats = 0;
      // "pending" until its first repeat runs (what a file written midway shows).
      row.status = problems.empty() ? "pending" : "failed: " + join(problems, "; ");
      RunData::Point p;
      p.config = config_attrs(cfg);
      p.has_summary = false;
      p.attrs = {{"status", row.status}, {"label", row.label}};
      m_rows.push_back(row);
      m_configs.push_back(cfg);
      m_points.push_back(resolved.spec);
      m_data.points.push_back(std::move(p));
      m_problems.push_back(std::move(problems));
    }
    m_step_samples.resize(m_rows.size());
    m_summaries.resize(m_rows.size());
  }

  // Every repeat of every point, the points taking turns (1..n, 1..n, ...) so that the clock's
  // drift at the power cap spreads over all of them. SIGTERM or SIGINT (a time limit, Ctrl-C):
  // the point in flight finishes, then the file keeps every run so far, marked incomplete.
  // Every rank learns of it before the next point. Returns the signal that stopped it, or 0.
  int run_repeats() {
    const stop::BetweenPoints between_points;
    for (int rep = 0; rep < m_o.repeats; ++rep)
      for (size_t k = 0; k < m_rows.size(); ++k) {
        if (!m_problems[k].empty()) continue;
        int stopped = stop::requested();
        RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &stopped, 1, MPI_INT, MPI_MAX, m_mpi.world()));
        if (stopped != 0) return stopped;
        // A repeat after a failure of the same point would fail the same way.
        if (rep > 0 && m_rows[k].status != "ok") continue;
        run_repeat(k, rep);
        // The file is rewritten (complete = 0 until the last) at checkpoints, so a job killed
        // midway keeps the repeats it finished up to the last one, marked as incomplete.
        if (m_checkpoints.due(m_mpi)) {
          const double started = MPI_Wtime();
          write(crossovers_so_far(), false);
          m_checkpoints.wrote(MPI_Wtime() - started);
        }
      }
    return 0;
  }

  int64_t runs() const { return static_cast<int64_t>(m_rows.size()) * m_o.repeats; }

  void run_repeat(size_t k, int rep) {
    SweepRow& row = m_rows[k];
    PointSpec spec = m_points[k];
    // The output does not change between repeats: the first repeat checks it.
    if (rep > 0) spec.check = CheckMode::off;
    if (m_mpi.rank() == 0)
      progress::set_point(static_cast<int64_t>(rep) * static_cast<int64_t>(m_rows.size()) +
                              static_cast<int64_t>(k) + 1,
                          runs(),
                          m_o.repeats > 1 ? row.label + " (repeat " + std::to_string(rep + 1) +
                                                "/" + std::to_string(m_o.repeats) + ")"
                                          : row.label);
    Watchdog watchdog(spec.timeout_s, "point " + row.label);
    const ranges::Scope range(
        [&] { return "point " + std::to_string(row.point) + ": " + row.label; });
    PointResult result = run_point(m_job, spec, m_roofs, watchdog);
    // A library loaded on first use (cuDNN) joins the fingerprint once a point loaded it.
    if (!result.attention_plans.empty()) m_data.stack = point_stack(m_job, result);
    m_any_failed_check = m_any_failed_check || result.check_failed;
    if (rep == 0) row.status = result.status;
    row.setup_s += result.setup_s;
    row.measure_s += result.measure_s;
    if (m_mpi.rank() == 0) record_repeat(k, rep, result);
    if (rep == 0 && result.ok() && m_o.keep_timelines) {
      m_kept.push_back(
          std::make_unique<std::vector<TimelineRecord>>(std::move(result.strategies.front().rows)));
      m_mine.groups.push_back("/points/" + std::to_string(k));
      m_mine.timelines.push_back(m_kept.back().get());
    }
    m_data.points[k].attrs = {{"status", row.status},
                              {"label", row.label},
                              {"repeats", static_cast<int64_t>(row.repeats)}};
  }

  // Rank 0: a repeat's figures into the repeats, the point's row and its summary group.
  void record_repeat(size_t k, int rep, const PointResult& result) {
    SweepRow& row = m_rows[k];
    SweepRepeat measured;
    measured.point = row.point;
    measured.repeat = rep;
    measured.status = result.status;
    if (!result.ok()) {
      m_repeats.push_back(measured);
      return;
    }
    const StrategyResult& r = result.strategies.front();
    const Attrs& a = r.summary.attrs;
    auto num = [&](const char* key) {
      const AttrValue* v = find_attr(a, key);
      return v ? std::get<double>(*v) : 0.0;
    };
    measured.step_p50_ns = r.summary.step.p50;
    measured.step_p99_ns = r.summary.step.p99;
    const char* keys[] = {"step_compute_ns", "step_hbm_ns", "step_interconnect_ns",
                          "step_launch_ns"};
    for (int c = 0; c < 4; ++c)
      measured.class_ns[c] = num(keys[c]);
    measured.exposed_interconnect_ns = num("exposed_interconnect_ns");
    if (const AttrValue* v = find_attr(a, "ceiling")) measured.ceiling = attr_to_string(*v);
    if (rep == 0) {
      row.step_flops = num("step_flops");
      row.step_hbm_bytes = num("step_hbm_bytes");
      row.step_comm_bytes = num("step_comm_bytes");
      row.check = r.check.status;
    }
    m_step_samples[k].push_back(r.summary.step_ns);
    m_repeats.push_back(measured);
    aggregate_repeats(row, m_repeats, m_step_samples[k]);
    // The point's summary group holds the repeat whose step is the median so far (kept for
    // every repeat: a later repeat can make an earlier one the median).
    RunData::Point& p = m_data.points[k];
    m_summaries[k].emplace_back(measured.step_p50_ns, r.summary);
    const double median = median_repeat(m_repeats, row.point);
    for (const auto& [p50, summary] : m_summaries[k])
      if (p50 == median) {
        p.summary = summary;
        break;
      }
    if (!p.has_summary && m_o.keep_timelines) p.ops = result.ops;
    p.has_summary = true;
  }

  std::vector<Crossover> crossovers_so_far() const {
    return m_mpi.rank() == 0 ? find_crossovers(m_rows, m_axes) : std::vector<Crossover>{};
  }

  void write(const std::vector<Crossover>& crossovers, bool complete) {
    set_file_contents(crossovers, complete);
    m_h5->write();
  }

  // The file's sweep tables and attributes as they stand (rank 0's hold the rows).
  void set_file_contents(const std::vector<Crossover>& crossovers, bool complete) {
    m_data.tables.resize(m_fixed_tables);
    m_data.group_attrs.resize(m_fixed_groups);
    m_data.tables.push_back({"/sweep/points", sweep_points_table(m_rows), {}});
    m_data.tables.push_back({"/sweep/repeats", sweep_repeats_table(m_repeats), {}});
    m_data.tables.push_back({"/sweep/crossovers", crossovers_table(crossovers), {}});
    int64_t failed = 0;
    for (const SweepRow& r : m_rows)
      failed += r.status.rfind("failed", 0) == 0 ? 1 : 0;
    m_data.group_attrs.emplace_back("/sweep", Attrs{{"axes", join(m_axes, ",")},
                                                    {"points", static_cast<int64_t>(m_rows.size())},
                                                    {"failed", failed},
                                                    {"repeats", static_cast<int64_t>(m_o.repeats)},
                                                    {"interval", std::string(kIntervalMethod)},
                                                    {"complete", static_cast<int64_t>(complete)}});
  }

  int stopped_status(int stopped) {
    write(crossovers_so_far(), false);
    progress::finish_line("");
    if (m_mpi.rank() == 0) {
      print_sweep(std::cout, m_rows, m_axes, {});
      std::cerr << "ridgeline: sweep stopped by " << (stopped == SIGINT ? "SIGINT" : "SIGTERM")
                << " after " << m_checkpoints.runs() << " of " << runs() << " runs";
      if (!m_h5->file().lost())
        std::cerr << "; '" << m_h5->file().path() << "' keeps them, marked incomplete";
      std::cerr << "\n";
    }
    return stop::exit_status(stopped);
  }

  // The crossovers (and, where a line of the grid holds no interconnect crossover, the roofs'
  // prediction), the table on stdout, the complete file and the summaries; the exit status.
  int finish() {
    if (m_mpi.rank() == 0) {
      m_crossovers = find_crossovers(m_rows, m_axes);
      add_predicted_crossovers(m_crossovers, m_rows, m_axes, m_configs, m_roofs, m_job.transport());
      progress::finish_line("");
      m_summary_files->set({{"sweep", m_data.root}, {"config", m_data.config}},
                           {{"points", sweep_points_table(m_rows)},
                            {"repeats", sweep_repeats_table(m_repeats)},
                            {"crossovers", crossovers_table(m_crossovers)}});
    }
    set_file_contents(m_crossovers, true);
    const int status = m_reports->finish();
    if (m_any_failed_check) return 3;
    // Every rank knows the statuses: a sweep of which no point ran has measured nothing.
    if (std::none_of(m_rows.begin(), m_rows.end(),
                     [](const SweepRow& r) { return r.status == "ok"; })) {
      if (m_mpi.rank() == 0)
        std::cerr << "ridgeline: no point of the sweep could run (see the status of each)\n";
      return 1;
    }
    return status;
  }

  CommandContext& m_ctx;
  SweepOptions m_o;
  JobContext m_job;
  MpiSession& m_mpi;
  Slice m_slice;
  size_t m_seen = 0; ///< distinct points of the whole grid
  std::vector<std::string> m_lists[std::size(kSweepAxes)];
  std::vector<std::string> m_axes;
  std::vector<RunConfig> m_grid;
  Roofs m_roofs;
  RunData m_data;
  size_t m_fixed_tables = 0, m_fixed_groups = 0;
  FileWriteOptions m_layout;
  std::vector<SweepRow> m_rows;
  std::vector<SweepRepeat> m_repeats; ///< rank 0: every repeat that ran, in the order run
  std::vector<RunConfig> m_configs;   ///< per row: its completed configuration
  std::vector<PointSpec> m_points;    ///< per row: its typed point (when it has no problem)
  std::vector<std::vector<std::string>> m_problems; ///< per row: why it cannot run
  std::vector<std::vector<std::vector<double>>> m_step_samples;
  std::vector<std::vector<std::pair<double, RunSummary>>> m_summaries;
  std::vector<std::unique_ptr<std::vector<TimelineRecord>>> m_kept;
  RankRows m_mine;
  Checkpoints m_checkpoints;
  bool m_any_failed_check = false;
  std::vector<Crossover> m_crossovers; ///< rank 0, at the end: the sweep's crossovers
  // What the sweep writes at the end (the file also at every checkpoint), in this order.
  ConsoleReporter m_console;
  std::optional<Hdf5Reporter> m_h5;
  std::optional<SummaryReporter> m_summary_files;
  std::optional<JobReports> m_reports;
};

int run_sweep(CommandContext& ctx, SweepOptions o) {
  return SweepRun(ctx, std::move(o)).run();
}

} // namespace

void split_sweep_axis_lists(const std::string (&given)[std::size(kSweepAxes)],
                            std::vector<std::string> (&lists)[std::size(kSweepAxes)],
                            std::vector<std::string>& axes) {
  for (size_t a = 0; a < std::size(kSweepAxes); ++a) {
    if (!given[a].empty()) lists[a] = split_list(given[a]);
    if (sweep_numeric_axis(kSweepAxes[a]))
      for (std::string& v : lists[a])
        if (v != "auto") v = std::to_string(std::stoll(v)); // +4 -> 4
    if (kSweepAxes[a] == std::string("prefill_share"))
      for (std::string& v : lists[a])
        v = share_text(std::stod(v)); // .50 -> 0.5
    if (lists[a].size() > 1) axes.emplace_back(kSweepAxes[a]);
  }
}

void apply_run_table(CLI::App& app, CLI::App& cmd) {
  CLI::Option* config = app.get_option("--config");
  if (config->count() == 0) return;
  for (const CLI::ConfigItem& item : read_config_file(config->as<std::string>(), app)) {
    if (item.parents != std::vector<std::string>{"run"}) continue;
    CLI::Option* opt = cmd.get_option_no_throw("--" + item.name);
    if (opt == nullptr || opt->count() > 0) continue;
    opt->add_result(item.inputs);
    opt->run_callback();
  }
}

std::vector<RunConfig> sweep_grid(const RunConfig& base,
                                  const std::vector<std::string> (&lists)[std::size(kSweepAxes)]) {
  std::vector<RunConfig> grid = {base};
  for (size_t a = 0; a < std::size(kSweepAxes); ++a) {
    if (lists[a].empty()) continue;
    std::vector<RunConfig> next;
    for (const RunConfig& cfg : grid)
      for (const std::string& v : lists[a]) {
        RunConfig c = cfg;
        set_sweep_axis(c, kSweepAxes[a], v);
        next.push_back(c);
      }
    grid.swap(next);
  }
  return grid;
}

void bind_sweep_axis_lists(CLI::App& cmd, std::string (&lists)[std::size(kSweepAxes)]) {
  for (size_t a = 0; a < std::size(kSweepAxes); ++a) {
    std::string flag = std::string("--") + kSweepAxes[a];
    std::replace(flag.begin(), flag.end(), '_', '-'); // prefill_share: --prefill-share
    // `model` binds no mixed step's options: it takes no --prefill-share.
    CLI::Option* scalar = cmd.get_option_no_throw(flag);
    if (scalar == nullptr) continue;
    const std::string group = scalar->get_group();
    std::string description = scalar->get_description();
    // `run` runs its --overlap list back to back in one point; here each value is a point.
    const std::string back_to_back = "Comma list of strategies run back to back: ";
    if (description.rfind(back_to_back, 0) == 0)
      description = "Overlap strategy: " + description.substr(back_to_back.size());
    // `run --tp auto` resolves one degree; a list names its degrees.
    if (kSweepAxes[a] == std::string("tp")) description = "Tensor-parallel degree";
    cmd.remove_option(scalar);
    const std::string axis = kSweepAxes[a];
    cmd.add_option(flag, lists[a], description + " (comma list: one point per value)")
        ->check(comma_list([axis](const std::string& item, std::string& canonical) {
          return sweep_axis_item(axis, item, canonical);
        }))
        ->group(group);
  }
}

void setup_sweep_command(CLI::App& app, CommandAction& action) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Run every point of a grid of configurations in one job -> one HDF5 file with a group per "
      "point, the step's time by ceiling per point, and the crossovers along each axis");
  bind_run_options(*cmd, o->base);
  bind_mixed_options(*cmd, o->base);
  bind_sweep_axis_lists(*cmd, o->lists);
  // What `run` takes as a list or a degree, a sweep takes as one value or not at all.
  cmd->get_option("--transport")
      ->description(
          "NCCL transport preset: auto, nvlink (checked against the link matrix), host "
          "(NCCL_P2P_DISABLE=1: NCCL's shared-memory path through host memory over PCIe) or net "
          "(sockets, as between nodes); one value: NCCL reads its environment once per process, "
          "so a job runs one transport (join one sweep per transport with `ridgeline report`)");
  cmd->get_option("--attention")
      ->description(
          "Attention implementation, one per sweep: fused (the project's kernel, online "
          "softmax), naive (materialised scores) or cudnn (cuDNN's fused SDPA; cuda backend, a "
          "build with cuDNN); `run --attention a,b` compares them side by side");
  cmd->get_option("--dp")->description(
      "Not taken: each point runs ranks / (tp x pp) data-parallel replicas");
  cmd->get_option("--ep")->description(
      "Expert-parallel degrees of an MoE model (comma list: one point per value): each point "
      "runs every rank as a data-parallel replica, in EP groups of ep consecutive replicas; "
      "each degree must divide the ranks and --experts");
  cmd->get_option("--tp")->description(
      "Tensor-parallel degrees (comma list: one point per value; auto: the ranks of one "
      "node, as for run, a point equal to a listed degree running once). TP is innermost: with "
      "ranks "
      "placed node by node, a TP group of at most a node's ranks stays inside one node and the "
      "replicas go across nodes; a point whose TP group would span nodes fails");
  cmd->add_flag("--keep-timelines", o->keep_timelines,
                "Store every point's per-rank timelines of its first repeat (large)")
      ->group("Measurement");
  cmd->add_option("--repeats", o->repeats,
                  "Measure every point this many times, the points taking turns (1..n, 1..n, ...) "
                  "so that clock drift spreads over all of them; each point reports the median "
                  "step and time by ceiling with 95 % intervals, and a crossover is found only "
                  "where the crossing times differ beyond their intervals (1: no intervals)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str()
      ->group("Measurement");
  cmd->add_option(
         "--slice", o->slice,
         "I/N: run only the I-th of N slices of the grid (its I-th, (I+N)-th, ... distinct "
         "point), e.g. one per task of a Slurm job array; the slices' files, joined with "
         "`ridgeline report` or ridgeline_analysis, are the whole sweep")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            const size_t slash = v.find('/');
            std::string i = v.substr(0, slash),
                        n = slash == std::string::npos ? "" : v.substr(slash + 1);
            const CLI::Validator count = integer_in(1, 1000000);
            if (!count(i).empty() || !count(n).empty() || std::stoll(i) > std::stoll(n))
              return "expected I/N with 1 <= I <= N <= 1000000, got '" + v + "'";
            return "";
          },
          ""))
      ->type_name("I/N")
      ->group("Measurement");
  cmd->footer(
      "Every combination of the listed values is one point, run in turn by every rank, --repeats "
      "times with the points taking turns; a point that fails (invalid, out of memory) is "
      "recorded with its reason and the sweep goes on. Each point: the median step and time by "
      "ceiling over its repeats, with 95 % intervals. One transport per job: NCCL reads its "
      "environment once (join one sweep per transport with `ridgeline report A.h5 B.h5`, the "
      "transports ordered by measured bandwidth). Crossover: along each listed axis, the first "
      "point where the interconnect becomes the step's ceiling, found only where the two "
      "crossing times differ beyond their intervals at both points (else 'within noise'); where "
      "the grid holds none, the roofs' prediction (a point estimate).");
  // Presets are [run] tables (CLI11 applies a table to the subcommand of its name, [sweep] to
  // this one): a sweep takes the [run] table too, read as strictly, for every option that the
  // command line and the [sweep] table left unset.
  cmd->callback([o, &action, &app, cmd] {
    apply_run_table(app, *cmd);
    // Each point's data-parallel degree is ranks / (tp x pp): a given one would be replaced.
    if (cmd->get_option("--dp")->count() > 0)
      throw CLI::ValidationError(
          "--dp", "a sweep runs each point as ranks / (tp x pp) data-parallel replicas: "
                  "give no --dp (nor dp in the [run] table)");
    // A point runs one attention implementation (`run --attention a,b` compares them).
    if (o->base.attention.find(',') != std::string::npos)
      throw CLI::ValidationError("--attention",
                                 "a sweep point runs one implementation: give one (run --attention "
                                 "fused,cudnn,naive compares them side by side)");
    action = [o](CommandContext& ctx) { return run_sweep(ctx, *o); };
  });
}

} // namespace ridgeline
