// `ridgeline model` (see model.hpp).
#include "app/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "app/attribution.hpp"
#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/config_file.hpp"
#include "app/config_mixed.hpp"
#include "app/fingerprint.hpp"
#include "app/job.hpp"
#include "app/model_detail.hpp"
#include "app/reporters.hpp"
#include "app/run_file.hpp"
#include "app/sweep.hpp"
#include "app/trace_run.hpp"
#include "core/error.hpp"
#include "models/layer_plan.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

namespace {

using namespace model_detail;

// Nanoseconds as milliseconds, 4 decimals.
std::string ms_text(double ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4f", ns / 1e6);
  return text;
}

// A what-if link's figure as an axis value and in a list ("%g": 2.5, 100).
std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}
std::string number_list(const std::vector<double>& values) {
  std::vector<std::string> texts;
  for (double v : values)
    texts.push_back(number_text(v));
  return join(texts, ",");
}

// `text` without the intervals of point estimates: " [a, a]" (an interval whose two ends
// are the same text) is dropped, any other kept.
std::string without_point_intervals(const std::string& text) {
  std::string out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find(" [", at);
    const size_t comma = open == std::string::npos ? open : text.find(", ", open);
    const size_t close = comma == std::string::npos ? comma : text.find(']', comma);
    if (close == std::string::npos) break;
    const std::string lo = text.substr(open + 2, comma - open - 2);
    const std::string hi = text.substr(comma + 2, close - comma - 2);
    out += text.substr(at, open - at);
    if (lo != hi) out += text.substr(open, close + 1 - open);
    at = close + 1;
  }
  return out + text.substr(std::min(at, text.size()));
}

// The gap between two launches of `cfg`'s step: --graphs, the roofs' graph node floor; eager,
// the calibration's measured gap of `phase`, the one cfg calibrates (--gap auto), where it has
// one, else the roofs' eager launch floor (back-to-back launches from the host).
void set_gap(Placed& p, const RunConfig& cfg, const std::string& phase, const ModelOptions& o,
             const Machine& m, const Calibration& cal) {
  if (o.gap == "none") {
    p.gap_source = "none (--gap none)";
    return;
  }
  const auto measured = cal.gap_ns.find(phase);
  if (!cfg.graphs && o.gap == "auto" && measured != cal.gap_ns.end()) {
    p.options.gap_ns = measured->second;
    p.gap_source = "calibrated (" + phase + " gaps of --calibrate)";
    return;
  }
  p.options.gap_ns = launch_floor_ns(m.roofs, cfg.graphs);
  p.gap_source = cfg.graphs ? "roofs (graph node floor)" : "roofs (eager launch floor)";
}

// The train phase's ops of a step rather than a microbatch: the gradient buffer zeroed before
// the first backward (a write of every gradient) and, with --sgd-lr, the update after the
// reduction (reads the gradient and the weight, writes the weight: one kernel per weight
// tensor, 8 a layer).
void add_step_ops(std::vector<PredictOp>& ops, double gradient_bytes, const RunConfig& cfg,
                  int64_t layers, DType dtype) {
  PredictOp zero;
  zero.name = op::grad_zero;
  zero.work.kind = kOpRows[layer_op::op_grad_zero].kind;
  zero.work.dtype = dtype;
  zero.work.hbm_bytes = gradient_bytes;
  zero.per_step = true;
  ops.push_back(zero);
  if (cfg.sgd_lr <= 0) return;
  PredictOp update = zero;
  update.name = op::sgd_update;
  update.work.hbm_bytes = 3.0 * gradient_bytes;
  update.work.flops = 2.0 * gradient_bytes / static_cast<double>(dtype_size(dtype));
  update.work.kernels = static_cast<int>(8 * layers);
  ops.push_back(update);
}

} // namespace

namespace model_detail {

std::vector<PredictOp> predict_ops(const std::vector<OpSpec>& plan, int tp, DType dtype,
                                   const GridScopes& scopes, int64_t layers) {
  std::vector<PredictOp> ops;
  for (const OpSpec& s : plan) {
    PredictOp op;
    op.name = s.name;
    op.work = op_work(s, s.cost, tp, dtype, scopes);
    op.m = s.m, op.n = s.n, op.k = s.k;
    op.instances = static_cast<double>(layers);
    op.comm_lane = s.lane != Lane::compute;
    op.backward = s.pass != Pass::forward;
    op.group = s.group;
    ops.push_back(op);
  }
  return ops;
}

Placed place(const RunConfig& cfg, const ModelOptions& o, const Machine& m, const Calibration& cal,
             const LinkPreset* what_if) {
  Placed p;
  const ModelSpec spec = model_spec(cfg);
  const LayerShape shape = layer_shape(cfg);
  const DType dtype = parse_dtype(cfg.dtype);
  const int64_t gpus = static_cast<int64_t>(o.nodes) * o.gpus_per_node;
  const int64_t ranks = static_cast<int64_t>(cfg.tp) * cfg.pp * cfg.dp;
  if (ranks > gpus) {
    p.problem = "tp x pp x dp = " + std::to_string(ranks) + " GPUs, but --nodes x " +
                "--gpus-per-node = " + std::to_string(gpus);
    return p;
  }
  const LinkPreset* intra = m.have_links ? m.hw.link(o.link) : nullptr;
  const LinkPreset* inter = m.have_links ? m.hw.link(o.inter_node) : nullptr;
  if (what_if != nullptr) intra = inter = what_if;
  // An MoE layer: each rank of an EP group (ep consecutive ranks of the stage, TP innermost)
  // holds experts / ep experts and routes its block of its TP group's tokens; its experts
  // unsplit by TP, its training not modelled.
  const bool moe = spec.moe();
  if (moe && (cfg.phase == "train" || cfg.pp != 1 || (cfg.tp * cfg.dp) % cfg.ep != 0 ||
              shape.tokens() % cfg.tp != 0)) {
    p.problem = "an MoE layer is predicted in prefill or decode, at --pp 1, with --ep dividing "
                "tp x dp (EP groups are ep consecutive ranks) and the tokens dividing by --tp; "
                "got " +
                cfg.phase + ", pp " + std::to_string(cfg.pp) + ", tp " + std::to_string(cfg.tp) +
                ", ep " + std::to_string(cfg.ep) + ", dp " + std::to_string(cfg.dp) + ", " +
                std::to_string(shape.tokens()) + " tokens";
    return p;
  }
  // The groups placed node by node, --gpus-per-node ranks a node, TP innermost: a group within a
  // node takes the link within one, any other the link between nodes.
  NodeMap nodes;
  for (int64_t r = 0; r < ranks; ++r)
    nodes.node_of_rank.push_back(static_cast<int>(r / o.gpus_per_node));
  const GridScopes scopes = grid_scopes(nodes, cfg.tp, cfg.pp, moe ? cfg.ep : 1);
  auto link = [&](Scope s) { return s == Scope::intra ? intra : inter; };
  PredictOptions& po = p.options;
  po.graphs = cfg.graphs;
  po.overlap = cfg.overlap != "none";
  po.pp = cfg.pp;
  po.microbatches = cfg.microbatches;
  po.dp = cfg.dp;
  po.transport = o.link == kMeasuredHost ? "host" : cfg.transport;
  po.tp_link = link(scopes.tp);
  po.pp_link = link(scopes.p2p);
  po.dp_link = link(scopes.dp);
  po.ep_link = link(scopes.ep);
  po.p2p_scope = scopes.p2p;
  po.dp_scope = scopes.dp;
  po.p2p_bytes = static_cast<double>(shape.tokens() * cfg.hidden * dtype_size(dtype));
  const int64_t layers = std::max<int64_t>(1, cfg.layers / cfg.pp);
  po.gradient_bytes = layer_weight_bytes(spec, cfg.tp, dtype) * static_cast<double>(layers);
  po.train = cfg.phase == "train";
  po.bucket_bytes = cfg.bucket_mb * 1048576.0;
  po.dp_overlap = cfg.dp_overlap != "off";
  po.dp_shard = cfg.dp_shard;
  po.layers = layers;
  const std::string phase = calibration_phase(cfg);
  if (const auto e = cal.efficiency.find(phase); e != cal.efficiency.end())
    po.efficiency = e->second;
  set_gap(p, cfg, phase, o, m, cal);
  const AttentionImpl attn = cfg.attention == "naive" ? AttentionImpl::naive : AttentionImpl::fused;
  // The train phase runs the layer plan's backward after its forward.
  std::vector<OpSpec> plan;
  if (moe) {
    const MoeLoad load = moe_load(moe_routing(o, shape.tokens() / cfg.tp * cfg.ep, spec), cfg.ep);
    plan = moe_layer_ops(spec, shape, attn, load);
    p.rank_imbalance = load.rank_imbalance();
  } else if (cfg.phase == "mixed") {
    // A measured mixed step (--validate): priced as `run` attributed it.
    plan = mixed_step_ops(spec, mixed_step_of(cfg), cfg.tp, dtype, attn, cfg.sequence_parallel);
  } else {
    plan =
        cfg.phase == "train" ? train_layer_plan(spec, shape, attn) : layer_ops(spec, shape, attn);
  }
  p.scopes = scopes;
  p.ops = predict_ops(plan, cfg.tp, dtype, scopes, layers);
  if (po.train) add_step_ops(p.ops, po.gradient_bytes, cfg, layers, dtype);
  return p;
}

Roofs roofs_for(const Machine& m, const ModelOptions& o, bool what_if) {
  Roofs r = m.roofs;
  auto drop = [&r](auto unwanted) {
    r.interconnect.erase(std::remove_if(r.interconnect.begin(), r.interconnect.end(), unwanted),
                         r.interconnect.end());
  };
  if (o.link == kMeasuredHost)
    drop([](const InterconnectRoof& i) { return i.transport != "host"; });
  // A preset chosen for the links within a node replaces the rows measured within one.
  if (o.link != "nvlink" && o.link != kMeasuredHost)
    drop([](const InterconnectRoof& i) { return i.scope == Scope::intra; });
  if (what_if) r.interconnect.clear();
  return r;
}

} // namespace model_detail

namespace {

using namespace model_detail;

// How a collective of a prediction was priced: the measured roof of its scope, or the preset
// assumed where the roofs have none ("" for compute ops).
std::string roof_used(const OpPrediction& p) {
  if (p.interconnect_source.empty()) return "";
  const std::string scope = scope_name(p.scope);
  const std::string what = p.collective + " x" + std::to_string(p.group_size) + " " + scope;
  if (p.interconnect_source == "roofs") return what + ": the measured " + scope + " roof";
  return what + ": preset " + p.interconnect_source + " (assumed: the roofs hold no " + scope +
         " row of it)";
}

Table prediction_table(const StepPrediction& s) {
  std::vector<std::string> name, kind, ceiling, source, scope;
  std::vector<double> inst, comp, hbm, ic, launch, eff, time;
  for (const OpPrediction& p : s.ops) {
    name.push_back(p.name), kind.push_back(p.kind), ceiling.push_back(ceiling_name(p.ceiling));
    source.push_back(p.interconnect_source);
    scope.emplace_back(p.interconnect_source.empty() ? "" : scope_name(p.scope));
    inst.push_back(p.instances), comp.push_back(p.compute_ns), hbm.push_back(p.hbm_ns);
    ic.push_back(p.interconnect_ns), launch.push_back(p.launch_ns), eff.push_back(p.efficiency);
    time.push_back(p.time_ns);
  }
  return {{"name", name},
          {"kind", kind},
          {"instances", inst},
          {"compute_ns", comp},
          {"hbm_ns", hbm},
          {"interconnect_ns", ic},
          {"launch_ns", launch},
          {"efficiency", eff},
          {"time_ns", time},
          {"ceiling", ceiling},
          {"interconnect_source", source},
          {"interconnect_scope", scope}};
}

SweepRow predicted_row(const RunConfig& cfg, const StepPrediction& s,
                       const std::vector<PredictOp>& ops) {
  SweepRow r;
  for (const char* a : kSweepAxes)
    r.axis[a] = sweep_axis_value(cfg, a);
  r.step_p50_ns = r.step_p99_ns = s.step_ns;
  for (int c = 0; c < kCeilingClasses; ++c)
    r.class_ns[c] = s.class_ns[c];
  r.exposed_interconnect_ns = s.exposed_interconnect_ns;
  r.ceiling = ceiling_name(s.ceiling);
  const double slots = static_cast<double>(cfg.microbatches + cfg.pp - 1);
  for (const PredictOp& op : ops) {
    const double per_step = op.instances * (op.per_step ? 1.0 : slots);
    r.step_flops += op.work.flops * per_step;
    r.step_hbm_bytes += op.work.hbm_bytes * per_step;
    r.step_comm_bytes += op.work.comm_bytes * per_step;
  }
  r.check = "predicted";
  return r;
}

// One `model` job: the inputs read and checked, the points (a measured file's, or the grid of
// the axis lists, each over every what-if link), each predicted, then the crossovers, the
// console report and the files of sweep's layout.
class ModelRun {
public:
  ModelRun(CommandContext& ctx, ModelOptions o)
      : m_ctx(ctx), m_o(std::move(o)), m_job(ctx, "host"), m_mpi(m_job.mpi()),
        m_console(m_mpi, [this](std::ostream& out) { print_model(out); }),
        m_h5(m_mpi, m_o.base.out, false,
             [this](const std::string& path) {
               write_run_file(path, m_data);
               return std::string();
             }),
        m_summaries(m_mpi, m_o.base.json, m_o.base.markdown, "ridgeline model"),
        m_reports(ctx, {&m_console, &m_h5, &m_summaries}) {}

  int run() {
    if (reject_if_any(m_ctx, "invalid model", m_reports.file_problems(model_inputs()))) return 2;
    if (reject_if_any(m_ctx, "invalid model", input_problems())) return 2;
    if (!m_o.calibrate.empty() && reject_if_any(m_ctx, "invalid model", calibration_problems()))
      return 2;
    if (m_o.serving.requested()) return predict_serving();
    if (reject_if_any(m_ctx, "invalid model", trace_validation_problems())) return 2;
    plan_points();
    start_file();
    for (size_t k = 0; k < m_grid.size(); ++k)
      predict_point(k);
    finish_sweep();
    if (m_mpi.rank() == 0) set_summaries();
    return m_reports.finish();
  }

private:
  // --trace or --trace-gen: the trace's steps predicted in place of a grid's points.
  int predict_serving() {
    if (reject_if_any(m_ctx, "invalid model", trace_problems(m_o, m_machine, m_trace))) return 2;
    if (m_o.serving.rates.empty())
      predict_trace(m_trace, m_o, m_machine, m_cal);
    else
      predict_trace_rates(m_trace, m_o, m_machine, m_cal);
    if (m_mpi.rank() == 0)
      m_summaries.set({{"model", m_job.root_attrs("model")}, {"config", config_attrs(m_trace.cfg)}},
                      trace_tables(m_trace));
    const int status = m_reports.finish();
    if (m_mpi.rank() == 0) write_trace_file(m_trace, m_o, std::cout);
    return status;
  }

  // --validate of a trace run's file: its steps and its requests' latencies, predicted.
  std::vector<std::string> trace_validation_problems() {
    if (m_o.validate.empty()) return {};
    try {
      if (!has_serving(m_o.validate)) return {};
      m_trace_text = validate_trace(m_o.validate, config_from_attrs(m_validated.config), m_o,
                                    m_machine, m_cal, m_trace_table);
    } catch (const Error& e) {
      return {"--validate: " + m_o.validate + ": " + e.what()};
    }
    return {};
  }

  // The files the model reads: no output may be one of them. Every file the model will write is
  // checked against them before anything is read.
  std::vector<NamedFile> model_inputs() const {
    std::vector<NamedFile> inputs = input_files(m_o.base);
    inputs.push_back({m_o.hardware, "--hardware"});
    inputs.push_back({m_o.validate, "--validate"});
    inputs.push_back({m_o.serving.trace, "--trace"});
    for (const std::string& path : m_o.calibrate)
      inputs.push_back({path, "--calibrate"});
    return inputs;
  }

  // The measured file (--validate), the hardware file and the roofs, read; every problem.
  std::vector<std::string> input_problems() {
    std::vector<std::string> problems;
    m_roofs_path = m_o.base.roofs;
    if (!m_o.validate.empty()) {
      try {
        m_validated = read_measured(m_o.validate);
      } catch (const Error& e) {
        problems.emplace_back(std::string("--validate: ") + e.what());
      }
      if (m_roofs_path.empty() && m_o.hardware.empty()) m_roofs_path = m_o.validate;
    }
    try {
      if (!m_o.hardware.empty()) {
        m_machine.hw = read_hardware_file(m_o.hardware);
        m_machine.have_links = true;
        if ((m_o.link != kMeasuredHost && m_machine.hw.link(m_o.link) == nullptr) ||
            m_machine.hw.link(m_o.inter_node) == nullptr)
          problems.emplace_back("--link/--inter-node: a preset the hardware file lacks");
      }
    } catch (const CLI::Error& e) {
      problems.emplace_back(e.what());
    }
    if (problems.empty()) read_machine_roofs(problems);
    if (m_o.link_gbps.empty() != m_o.link_alpha_us.empty())
      problems.emplace_back("--link-gbps and --link-alpha-us go together");
    if (!m_o.link_gbps.empty() && !m_o.validate.empty())
      problems.emplace_back("--link-gbps: a what-if link predicts a grid, not a measured file");
    const auto* ep = std::find(std::begin(kSweepAxes), std::end(kSweepAxes), std::string(kEpAxis));
    if (!m_o.lists[ep - std::begin(kSweepAxes)].empty() && !m_o.validate.empty())
      problems.emplace_back("--ep: a list of degrees predicts a grid, not a measured file");
    if (m_o.routing != "uniform" && !zipf_exponent(m_o.routing))
      problems.emplace_back("--routing must be uniform or zipf:S with S >= 0 (got '" + m_o.routing +
                            "')");
    return problems;
  }

  // The roofs predicted from: a roofs file, else the hardware file's; their problems added.
  void read_machine_roofs(std::vector<std::string>& problems) {
    try {
      if (!m_roofs_path.empty() && m_roofs_path != "none")
        m_machine.roofs = read_roofs(m_roofs_path);
      else if (m_machine.have_links)
        m_machine.roofs = roofs_from_hardware(m_machine.hw);
      else
        problems.emplace_back("give --roofs FILE (measured) or --hardware FILE (models/hardware/)");
      if (problems.empty() && m_machine.roofs.gemm.empty())
        problems.emplace_back("'" + m_roofs_path + "' holds no /roofs to predict from");
      if (problems.empty() && m_o.link == kMeasuredHost &&
          std::none_of(m_machine.roofs.interconnect.begin(), m_machine.roofs.interconnect.end(),
                       [](const InterconnectRoof& r) { return r.transport == "host"; }))
        problems.emplace_back("--link measured-host: the roofs hold no interconnect roof measured "
                              "over the host path (transport host)");
    } catch (const Error& e) {
      problems.emplace_back(e.what());
    }
  }

  std::vector<std::string> calibration_problems() {
    try {
      m_cal = calibrate(m_o.calibrate, m_o, m_machine, m_calibration_text);
    } catch (const Error& e) {
      return {std::string("--calibrate: ") + e.what()};
    }
    return {};
  }

  // The points: the measured file's, or the grid of the axis lists.
  void plan_points() {
    if (!m_o.validate.empty()) {
      if (has_run_layout(m_validated.root) && m_validated.points.empty()) {
        m_grid.push_back(config_from_attrs(m_validated.config));
        m_measured.push_back(&m_validated.summary);
      }
      for (const RunData::Point& p : m_validated.points)
        if (p.has_summary) {
          m_grid.push_back(config_from_attrs(p.config));
          m_measured.push_back(&p.summary);
        }
      for (const char* a : kSweepAxes) {
        std::set<std::string> values;
        for (const RunConfig& c : m_grid)
          values.insert(sweep_axis_value(c, a));
        if (values.size() > 1) m_axes.emplace_back(a);
      }
    } else {
      std::vector<std::string> lists[std::size(kSweepAxes)];
      split_sweep_axis_lists(m_o.lists, lists, m_axes);
      // The axes' values first, then the defaults (as sweep does): a preset's hidden size given
      // as an axis value must not rescale its MLP from the default hidden size.
      m_grid = sweep_grid(m_o.base, lists);
      for (RunConfig& c : m_grid)
        apply_defaults(c, m_machine.roofs.backend == "host" ? "host" : "cuda");
      // tp auto: the GPUs of one node, as `run --tp auto` takes the ranks of one; a point it
      // makes equal to a listed one is predicted once.
      std::set<std::string> seen;
      std::vector<RunConfig> distinct;
      for (RunConfig& c : m_grid) {
        if (c.tp == 0) c.tp = m_o.gpus_per_node;
        std::string key;
        for (const char* a : kSweepAxes)
          key += sweep_axis_value(c, a) + "|";
        if (seen.insert(key).second) distinct.push_back(std::move(c));
      }
      m_grid = std::move(distinct);
    }
    if (!m_o.link_gbps.empty()) add_what_if_links();
  }

  // --link-gbps x --link-alpha-us: every point of the grid over each what-if link (latency
  // outer, bandwidth fastest), each carrying every collective.
  void add_what_if_links() {
    std::vector<RunConfig> each;
    for (const RunConfig& c : m_grid)
      for (double alpha_us : m_o.link_alpha_us)
        for (double gbps : m_o.link_gbps) {
          each.push_back(c);
          m_what_if.push_back({"what-if", gbps, 1.0, alpha_us, "--link-alpha-us"});
        }
    m_grid = std::move(each);
    if (m_o.link_alpha_us.size() > 1) m_axes.emplace_back(kLinkLatencyAxis);
    if (m_o.link_gbps.size() > 1) m_axes.emplace_back(kLinkBandwidthAxis);
  }

  // The file's fixed parts: root, stack, environment, configuration, topology and roofs.
  void start_file() {
    m_data.root = m_job.root_attrs("sweep");
    m_data.root.emplace_back("file_layout", std::string("single"));
    m_data.root.emplace_back("predicted", int64_t{1});
    m_data.stack = m_job.stack();
    m_data.env = performance_env();
    Attrs& config = m_data.config;
    config = config_attrs(m_o.base);
    config.emplace_back("model_source", m_o.hardware.empty() ? m_roofs_path : m_o.hardware);
    if (!m_o.validate.empty()) config.emplace_back("model_validate", m_o.validate);
    config.emplace_back("model_link", m_o.link);
    config.emplace_back("model_inter_node", m_o.inter_node);
    config.emplace_back("model_nodes", static_cast<int64_t>(m_o.nodes));
    config.emplace_back("model_gpus_per_node", static_cast<int64_t>(m_o.gpus_per_node));
    config.emplace_back("model_gap", m_o.gap);
    if (m_o.base.experts > 0) {
      config.emplace_back("model_routing", m_o.routing);
      config.emplace_back("model_routing_seed", static_cast<int64_t>(m_o.routing_seed));
    }
    if (!m_what_if.empty()) {
      config.emplace_back("model_link_gbps", number_list(m_o.link_gbps));
      config.emplace_back("model_link_alpha_us", number_list(m_o.link_alpha_us));
    }
    for (size_t a = 0; a < std::size(kSweepAxes); ++a)
      if (!m_o.lists[a].empty())
        config.emplace_back(std::string("sweep_") + kSweepAxes[a], m_o.lists[a]);
    m_data.topology = m_job.topology({});
    add_roofs(m_data, m_machine.roofs, {{"transport", m_o.link}});
  }

  // Point `k` predicted (or failed with its reasons), its row labelled, its prediction table
  // and, with --validate, its measured step beside it.
  void predict_point(size_t k) {
    RunConfig cfg = m_grid[k];
    if (cfg.phase == "prefill") cfg.context = 0;
    RunData::Point point;
    point.has_summary = false;
    point.config = config_attrs(cfg);
    const LinkPreset* link = m_what_if.empty() ? nullptr : &m_what_if[k];
    Placed pl;
    StepPrediction s;
    SweepRow row = place_and_predict(cfg, link, pl, s);
    label_row(row, link);
    if (row.status == "ok" && model_spec(cfg).moe()) add_moe_point(row, cfg, pl, s);
    if (row.status == "ok") add_prediction_table(row, pl, s);
    if (!m_measured.empty() && row.status == "ok") add_measured(*m_measured[k], row, s, point);
    point.attrs.insert(point.attrs.begin(),
                       {{"status", row.status}, {"label", row.label}, {"predicted", int64_t{1}}});
    // A prediction is a point estimate: its interval is the value itself.
    row.step_lo_ns = row.step_hi_ns = row.step_p50_ns;
    for (int c = 0; c < kCeilingClasses; ++c)
      row.class_lo_ns[c] = row.class_hi_ns[c] = row.class_ns[c];
    m_rows.push_back(row);
    m_data.points.push_back(std::move(point));
  }

  // `cfg` placed and its step predicted into `pl` and `s`: its row, or a failed one with why.
  SweepRow place_and_predict(const RunConfig& cfg, const LinkPreset* link, Placed& pl,
                             StepPrediction& s) const {
    std::vector<std::string> point_problems = m_o.validate.empty()
                                                  ? validate(cfg, cfg.tp * cfg.pp * cfg.dp, false)
                                                  : std::vector<std::string>{};
    if (point_problems.empty()) {
      pl = place(cfg, m_o, m_machine, m_cal, link);
      if (!pl.problem.empty()) point_problems.push_back(pl.problem);
    }
    if (point_problems.empty()) {
      s = predict_step(pl.ops, roofs_for(m_machine, m_o, link != nullptr), pl.options);
      if (!s.missing.empty())
        point_problems.push_back("no interconnect roof for " + s.missing +
                                 ": give --hardware FILE for the link presets");
    }
    if (point_problems.empty()) return predicted_row(cfg, s, pl.ops);
    SweepRow row;
    for (const char* a : kSweepAxes)
      row.axis[a] = sweep_axis_value(cfg, a);
    row.status = "failed: " + join(point_problems, "; ");
    return row;
  }

  // The row's what-if link axes, its index and its label (its axes' values).
  void label_row(SweepRow& row, const LinkPreset* link) const {
    if (link != nullptr) {
      row.axis[kLinkLatencyAxis] = number_text(link->latency_us);
      row.axis[kLinkBandwidthAxis] = number_text(link->bandwidth_gbps);
    }
    row.point = static_cast<int64_t>(m_rows.size());
    row.label = "point";
    if (!m_axes.empty()) {
      row.label.clear();
      for (const std::string& a : m_axes)
        row.label += (row.label.empty() ? "" : " ") + a + "=" + row.axis.at(a);
    }
  }

  // An MoE point's all-to-all beside the step's compute- and HBM-bound time (what the ep
  // crossover compares).
  void add_moe_point(const SweepRow& row, const RunConfig& cfg, const Placed& pl,
                     const StepPrediction& s) {
    const double slots = static_cast<double>(cfg.microbatches + cfg.pp - 1);
    double all_to_all_ns = 0;
    for (const OpPrediction& p : s.ops)
      if (p.collective == "all_to_all") all_to_all_ns += p.time_ns * p.instances * slots;
    MoePoint mp{row.label,
                cfg.ep,
                all_to_all_ns,
                s.class_ns[static_cast<int>(Ceiling::compute)],
                s.class_ns[static_cast<int>(Ceiling::hbm)],
                pl.rank_imbalance,
                ""};
    // The line of the crossover: the point's other axes.
    for (const std::string& a : m_axes)
      if (a != kEpAxis) mp.fixed += (mp.fixed.empty() ? "" : " ") + a + "=" + row.axis.at(a);
    m_moe.push_back(mp);
  }

  // Per line of the other axes, the lowest --ep at which the all-to-all's time exceeds both
  // the compute-bound and the HBM-bound time of the step: from there the all-to-all is the
  // ceiling of the MoE layer.
  std::vector<std::string> ep_crossovers() const {
    std::vector<std::string> lines;
    std::vector<std::string> fixed;
    for (const MoePoint& p : m_moe)
      if (std::find(fixed.begin(), fixed.end(), p.fixed) == fixed.end()) fixed.push_back(p.fixed);
    for (const std::string& f : fixed) {
      const MoePoint* first = nullptr;
      for (const MoePoint& p : m_moe)
        if (p.fixed == f && p.all_to_all_ns > std::max(p.compute_ns, p.hbm_ns) &&
            (first == nullptr || p.ep < first->ep))
          first = &p;
      std::string line = "all-to-all crossover" + (f.empty() ? "" : " [" + f + "]") + ": ";
      if (first == nullptr)
        line += "the all-to-all stays below the compute- and HBM-bound time at every --ep";
      else
        line += "the all-to-all exceeds the compute- and HBM-bound time from ep " +
                std::to_string(first->ep) + " on (" + ms_text(first->all_to_all_ns) +
                " ms against " + ms_text(std::max(first->compute_ns, first->hbm_ns)) + " ms)";
      lines.push_back(line);
    }
    return lines;
  }

  Table moe_table() const {
    std::vector<std::string> label;
    std::vector<int64_t> ep;
    std::vector<double> a2a, compute, hbm, imbalance;
    for (const MoePoint& p : m_moe) {
      label.push_back(p.label), ep.push_back(p.ep), a2a.push_back(p.all_to_all_ns);
      compute.push_back(p.compute_ns), hbm.push_back(p.hbm_ns), imbalance.push_back(p.imbalance);
    }
    return {{"point", label},        {"ep", ep},      {"all_to_all_ns", a2a},
            {"compute_ns", compute}, {"hbm_ns", hbm}, {"rank_imbalance", imbalance}};
  }

  // The point's /points/<k>/prediction table, and the gap it used counted.
  void add_prediction_table(const SweepRow& row, const Placed& pl, const StepPrediction& s) {
    auto& used = m_gaps[pl.gap_source];
    used.first = pl.options.gap_ns;
    ++used.second;
    // Each interconnect roof the point used (or the preset in its place), counted once a point.
    std::set<std::string> roofs;
    for (const OpPrediction& p : s.ops)
      roofs.insert(roof_used(p));
    roofs.insert(roof_used(s.p2p));
    roofs.erase("");
    for (const std::string& r : roofs)
      ++m_roofs_used[r];
    NamedTable t{"/points/" + std::to_string(row.point) + "/prediction",
                 prediction_table(s),
                 {{"step_ns", s.step_ns},
                  {"stage_ns", s.stage_ns},
                  {"p2p_ns", s.p2p_ns},
                  {"bubble", s.bubble},
                  {"dp_gradient_ns", s.dp_gradient_ns},
                  {"dp_exposed_ns", s.dp_exposed_ns},
                  {"launches", s.launches},
                  {"gap_ns", pl.options.gap_ns},
                  {"gap_source", pl.gap_source}}};
    m_data.tables.push_back(std::move(t));
  }

  // --validate: the point's measured step beside its prediction.
  void add_measured(const RunSummary& sum, const SweepRow& row, const StepPrediction& s,
                    RunData::Point& point) {
    const MeasuredStep m = measured_step(sum);
    m_errors.push_back((s.step_ns - m.ns) / m.ns);
    m_checked_labels.push_back(row.label);
    m_measured_ms.push_back(m.ns / 1e6);
    m_measured_sources.push_back(m.source);
    m_predicted_ms.push_back(s.step_ns / 1e6);
    print_validation_point(m_detail, row.label, m.ns, s, sum);
    point.attrs.emplace_back("measured_step_ns", m.ns);
    point.attrs.emplace_back("measured_step_source", m.source);
    point.attrs.emplace_back("step_error", m_errors.back());
  }

  // The crossovers, the points and gaps tables, and the /sweep group.
  void finish_sweep() {
    m_crossovers = find_crossovers(m_rows, m_axes);
    // Every point is a prediction, and so is every crossover between them: a point estimate,
    // whose times carry no interval.
    for (Crossover& c : m_crossovers) {
      c.status = "predicted";
      c.note = without_point_intervals(c.note);
    }
    // What-if links: the points carry their link's bandwidth and latency beside the run axes.
    m_points = sweep_points_table(m_rows);
    if (!m_what_if.empty()) {
      std::vector<double> gbps, alpha_us;
      for (const LinkPreset& l : m_what_if)
        gbps.push_back(l.bandwidth_gbps), alpha_us.push_back(l.latency_us);
      m_points.push_back({kLinkBandwidthAxis, gbps});
      m_points.push_back({kLinkLatencyAxis, alpha_us});
    }
    for (const auto& [source, used] : m_gaps)
      m_gap_sources.push_back(source), m_gap_us.push_back(used.first / 1e3),
          m_gap_points.push_back(used.second);
    m_data.tables.insert(m_data.tables.begin(),
                         {{"/sweep/points", m_points, {}},
                          {"/sweep/crossovers", crossovers_table(m_crossovers), {}}});
    int64_t failed = 0;
    for (const SweepRow& r : m_rows)
      failed += r.status == "ok" ? 0 : 1;
    m_data.group_attrs.emplace_back("/sweep", Attrs{{"axes", join(m_axes, ",")},
                                                    {"points", static_cast<int64_t>(m_rows.size())},
                                                    {"failed", failed},
                                                    {"complete", int64_t{1}},
                                                    {"predicted", int64_t{1}}});
  }

  // Rank 0: the console report.
  void print_model(std::ostream& out) const {
    if (m_o.serving.requested()) return print_trace(out, m_trace, m_o, m_calibration_text.str());
    out << "ridgeline model: " << m_rows.size() << " point(s) predicted from "
        << m_machine.roofs.source << "\n";
    out << m_calibration_text.str();
    for (size_t i = 0; i < m_gap_sources.size(); ++i) {
      char line[200];
      std::snprintf(line, sizeof(line),
                    "gap between launches: %.3f us per kernel, %s, at %lld point(s)\n", m_gap_us[i],
                    m_gap_sources[i].c_str(), static_cast<long long>(m_gap_points[i]));
      out << line;
    }
    for (const auto& [used, points] : m_roofs_used)
      out << "interconnect " << used << ", at " << points << " point(s)\n";
    if (!m_o.validate.empty()) print_validation(out);
    out << m_trace_text;
    print_sweep(out, m_rows, m_axes, m_crossovers);
    // The answer of a what-if bandwidth axis, per line of the other axes (each latency).
    for (const Crossover& c : m_crossovers) {
      if (c.axis != kLinkBandwidthAxis) continue;
      out << "link crossover [" << c.fixed << "]: ";
      if (c.at_value.empty())
        out << c.note << "\n";
      else
        out << "the interconnect is no longer the ceiling from " << c.at_value << " GB/s on ("
            << c.kind << "; interconnect-bound at " << c.before_value << " GB/s)\n";
    }
    if (!m_moe.empty()) {
      out << "\nMoE all-to-all (dispatch + combine, " << m_o.routing
          << " routing) against the step's compute- and HBM-bound time:\n";
      char line[200];
      std::snprintf(line, sizeof(line), "%-28s %4s %14s %12s %12s %10s\n", "point", "ep",
                    "all_to_all_ms", "compute_ms", "hbm_ms", "imbalance");
      out << line;
      for (const MoePoint& p : m_moe) {
        std::snprintf(line, sizeof(line), "%-28s %4d %14.4f %12.4f %12.4f %10.3f\n",
                      p.label.c_str(), p.ep, p.all_to_all_ns / 1e6, p.compute_ns / 1e6,
                      p.hbm_ns / 1e6, p.imbalance);
        out << line;
      }
      for (const std::string& l : ep_crossovers())
        out << l << "\n";
    }
    out << "every point is predicted (analytic model), none measured\n";
  }

  // --validate: each measured point beside its prediction, and the step-time error over them.
  void print_validation(std::ostream& out) const {
    out << m_detail.str();
    std::vector<double> abs;
    for (double e : m_errors)
      abs.push_back(std::fabs(e));
    std::sort(abs.begin(), abs.end());
    if (abs.empty()) return;
    const double median =
        abs.size() % 2 ? abs[abs.size() / 2] : (abs[abs.size() / 2 - 1] + abs[abs.size() / 2]) / 2;
    char line[200];
    std::snprintf(line, sizeof(line),
                  "\nstep-time error over %zu measured point(s): max %.1f %%, median %.1f %%\n",
                  abs.size(), 100 * abs.back(), 100 * median);
    out << line;
    const auto count = [&](const char* source) {
      return std::count(m_measured_sources.begin(), m_measured_sources.end(), std::string(source));
    };
    out << "measured step: the uninstrumented loop's median of sub-batch means at "
        << count(kUninstrumentedP50) << ", its mean (a file written before sub-batches) at "
        << count(kUninstrumentedMean) << " of " << m_measured_sources.size()
        << " point(s), else the p50 of the timed (per-op instrumented) iterations\n";
  }

  // Rank 0: what --json and --markdown hold: the same points and, with --validate, each
  // measured step beside its prediction.
  void set_summaries() {
    const std::vector<std::pair<std::string, Attrs>> attrs = {{"model", m_data.root},
                                                              {"config", m_data.config}};
    const Table gap_table = {
        {"source", m_gap_sources}, {"gap_us", m_gap_us}, {"points", m_gap_points}};
    std::vector<std::pair<std::string, Table>> tables = {
        {"points", m_points}, {"crossovers", crossovers_table(m_crossovers)}, {"gaps", gap_table}};
    if (!m_moe.empty()) {
      const std::vector<std::string> lines = ep_crossovers();
      tables.push_back({"moe", moe_table()});
      tables.push_back({"moe_crossovers", {{"line", lines}}});
    }
    std::vector<double> error_pct;
    for (double e : m_errors)
      error_pct.push_back(100 * e);
    if (!m_o.validate.empty())
      tables.push_back({"validation",
                        {{"point", m_checked_labels},
                         {"measured_step_ms", m_measured_ms},
                         {"measured_step_source", m_measured_sources},
                         {"predicted_step_ms", m_predicted_ms},
                         {"error_pct", error_pct}}});
    if (!m_trace_table.empty()) tables.push_back({"trace_validation", m_trace_table});
    m_summaries.set(attrs, std::move(tables));
  }

  CommandContext& m_ctx;
  ModelOptions m_o;
  JobContext m_job;
  MpiSession& m_mpi;
  Machine m_machine;
  std::string m_roofs_path;
  RunData m_validated;
  std::ostringstream m_calibration_text;
  Calibration m_cal;
  std::vector<RunConfig> m_grid;
  std::vector<const RunSummary*> m_measured; ///< --validate: each point's measured summary
  std::vector<std::string> m_axes;
  std::vector<LinkPreset> m_what_if; ///< per point: its what-if link (none without)
  /// An MoE point predicted: its all-to-all and the step's compute- and HBM-bound time (ns).
  struct MoePoint {
    std::string label;
    int ep = 1;
    double all_to_all_ns = 0, compute_ns = 0, hbm_ns = 0;
    double imbalance = 1; ///< the busiest EP rank's rows over the mean
    std::string fixed;    ///< the point's axes other than ep
  };
  std::vector<MoePoint> m_moe;
  RunData m_data;
  std::vector<SweepRow> m_rows;
  std::vector<Crossover> m_crossovers;
  Table m_points;
  // --validate: each measured point's step beside its prediction (for --json and --markdown).
  std::vector<double> m_errors;
  std::ostringstream m_detail;
  std::vector<std::string> m_checked_labels, m_measured_sources;
  std::vector<double> m_measured_ms, m_predicted_ms;
  // The gaps between launches the points used, by source: (gap per launch, points).
  std::map<std::string, std::pair<double, int64_t>> m_gaps;
  std::vector<std::string> m_gap_sources;
  std::vector<double> m_gap_us;
  std::vector<int64_t> m_gap_points;
  std::map<std::string, int64_t> m_roofs_used; ///< roof_used() of the collectives: points
  TracePrediction m_trace;                     ///< --trace, --trace-gen
  std::string m_trace_text; ///< --validate of a trace run: its report (validate_trace())
  Table m_trace_table;      ///< and its figures, measured and predicted
  // What the model prints and writes, in this order.
  ConsoleReporter m_console;
  Hdf5Reporter m_h5;
  SummaryReporter m_summaries;
  JobReports m_reports;
};

int run_model(CommandContext& ctx, ModelOptions o) {
  return ModelRun(ctx, std::move(o)).run();
}

} // namespace

void setup_model_command(CLI::App& app, CommandAction& action) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App* cmd = app.add_subcommand(
      "model", "Predict a layer's ops and step from the roofs (measured) or a hardware "
               "description, over a grid like sweep's; --validate FILE compares with measurement");
  bind_run_options(*cmd, o->base);
  bind_sweep_axis_lists(*cmd, o->lists);
  cmd->get_option("--attention")
      ->description("Attention implementation whose work is predicted: fused, naive (also "
                    "writes and reads its score matrix) or cudnn (the work of fused)");
  cmd->get_option("--dp")->description(
      "Data-parallel degree (tp x pp x dp GPUs, at most --nodes x --gpus-per-node)");
  bind_model_options(*cmd, *o);
  bind_serving_options(*cmd, o->serving);
  cmd->callback([o, &action, &app, cmd] {
    apply_run_table(app, *cmd);
    // A prediction is of one implementation's work (a list would silently predict the first).
    if (o->base.attention.find(',') != std::string::npos)
      throw CLI::ValidationError("--attention", "a prediction is of one implementation: give one");
    action = [o](CommandContext& ctx) { return run_model(ctx, *o); };
  });
}

} // namespace ridgeline
