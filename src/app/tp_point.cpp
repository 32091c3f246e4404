// A tensor-parallel point (see tp_point.hpp).
#include "app/tp_point.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include "app/attribution.hpp"
#include "app/config_mixed.hpp"
#include "app/moe_point.hpp"
#include "app/summary.hpp"
#include "app/trace_run.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/ranges.hpp"
#include "core/stats.hpp"
#include "models/work_model.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {
namespace {

// The whole model (every layer) at TP=1, PP=1 from `spec`'s inputs and weights: the check's
// reference stage, its op ids interned into `ops`. An MoE model's runs `mlp` (every expert on
// this rank).
std::unique_ptr<TpStage> tp1_stage(Backend& backend, const StageSpec& spec, int64_t all_layers,
                                   StageMlp* mlp, OpTable& ops) {
  StageSpec ref_spec = spec;
  ref_spec.shape.tp = 1;
  ref_spec.shape.sequence_parallel = false;
  ref_spec.overlap = Overlap{};
  ref_spec.tp_rank = 0;
  ref_spec.first_layer = 0;
  ref_spec.num_layers = all_layers;
  ref_spec.mlp = mlp;
  return std::make_unique<TpStage>(backend, nullptr, ref_spec, ops);
}

double check_tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-4 : 2e-2;
}

// The reference's outputs from the same generated input, computed on the last stage's TP rank 0
// of each data-parallel replica (empty elsewhere): comparing the last stage's output with them
// checks the TP shards, the collectives and the pipeline transfers. One output per decode step
// (steps run in order, the cache growing), else one. An MoE model's reference runs `mlp` on
// this rank's input `input`.
std::vector<std::vector<float>> reference_outputs(Backend& backend, const StageSpec& spec,
                                                  bool holder, int64_t all_layers, StageMlp* mlp,
                                                  int64_t input) {
  if (!holder) return {};
  const ranges::Scope range(kReferenceRange);
  OpTable scratch_ops;
  const std::unique_ptr<TpStage> ref = tp1_stage(backend, spec, all_layers, mlp, scratch_ops);
  ref->fill_input(input);
  Recorder silent(backend.clock(), scratch_ops);
  silent.set_enabled(false);
  const bool decode = spec.shape.phase == Phase::decode;
  std::vector<std::vector<float>> outputs;
  for (int64_t step = 0; step < (decode ? spec.shape.decode_steps : 1); ++step) {
    if (decode) ref->set_decode_step(step);
    ref->forward(silent);
    outputs.push_back(backend.to_host(ref->output()));
  }
  return outputs;
}

// The stage under the protocol: each strategy is one overlap of the same weights; a step is
// every microbatch through the stage (or the replay of its graph) with pipeline transfers.
class StageWorkload final : public Workload {
public:
  StageWorkload(const PointSpec& point, Backend& backend, GridComms& comms, TpStage& stage,
                OpTable& ops, const std::vector<Variant>& strategies, const StageSpec& spec,
                const std::vector<std::vector<float>>& reference, const CheckPlan& check,
                const std::string& why_not, int64_t input)
      : m_point(point), m_backend(backend), m_comms(comms), m_stage(stage), m_ops(ops),
        m_strategies(strategies), m_spec(spec), m_reference(reference), m_check(check),
        m_why_not(why_not), m_steps(point.decode() ? point.decode_steps : 0),
        m_graphs(strategies.size()), m_input(input) {
    const GridCoords& gc = comms.grid->coords();
    m_first = gc.pp_rank == 0;
    m_last = gc.pp_rank == point.pp - 1;
    const double act_bytes =
        static_cast<double>(stage.input().rows * spec.model.hidden *
                            static_cast<int64_t>(dtype_size(spec.shape.dtype)));
    m_p2p_cost = OpCost{0, act_bytes, act_bytes};
    m_recv_id = intern_op(ops, layer_op::op_recv_act);
    m_send_id = intern_op(ops, layer_op::op_send_act);
    if (point.graphs) {
      m_graph_op = intern_op(ops, layer_op::op_stage_graph);
      for (const OpSpec& o : stage.op_specs())
        m_graph_cost = m_graph_cost + scaled(o.cost, static_cast<double>(spec.num_layers));
    }
  }

  size_t strategies() const override { return m_strategies.size(); }
  std::string strategy_name(size_t s) const override { return m_strategies[s].name; }
  // An MoE layer's all-to-alls need its routing: its lanes are not run apart.
  bool lane_modes() const override { return !m_point.graphs && !m_point.model.moe(); }
  void select(size_t s) override {
    m_current = s;
    m_stage.set_overlap(m_strategies[s].overlap);
    m_stage.set_attention(m_strategies[s].attention);
    if (m_point.graphs && m_graphs[s].empty()) {
      // The stage's kernels and collectives captured once; each step is then one replay, and
      // the timeline holds one op per step (per-op times need eager execution). A growing
      // cache gets one graph per decode step: each holds its step's position as kernel
      // parameters (the cache row it appends to, the keys it attends to, the split of the
      // attention along them), so every replay runs exactly the eager step of its position.
      Recorder silent(m_backend.clock(), m_ops);
      silent.set_enabled(false);
      // One eager step first: what builds on first use (cuDNN's graphs and handle, workspaces)
      // does so outside the capture.
      if (m_steps > 0) m_stage.set_decode_step(0);
      m_stage.forward(silent);
      m_backend.synchronize();
      for (int64_t step = 0; step < std::max<int64_t>(m_steps, 1); ++step) {
        const ranges::Scope range([&] {
          return m_strategies[s].name + ": graph capture" +
                 (m_steps > 0 ? " of decode step " + std::to_string(step) : "");
        });
        if (m_steps > 0) m_stage.set_decode_step(step);
        m_backend.capture_begin(Lane::compute);
        m_stage.forward(silent);
        m_graphs[s].push_back(m_backend.capture_end(Lane::compute));
      }
      if (m_steps > 0) m_stage.set_decode_step(m_step);
    }
  }
  void set_position(int64_t index) override {
    if (m_steps <= 0) return;
    m_step = index % m_steps;
    m_stage.set_decode_step(m_step);
  }
  // Under sequence parallelism a rank's rows depend on the strategy's chunking: refill.
  void prepare() override {
    if (m_first) m_stage.fill_input(m_input);
  }
  void set_mode(Mode mode) override {
    m_stage.set_mode(mode == Mode::full           ? StageMode::full
                     : mode == Mode::compute_only ? StageMode::compute_only
                                                  : StageMode::comm_only);
  }
  void step(Recorder& rec) override {
    const Stream compute = m_backend.stream(Lane::compute);
    const int32_t first_layer = static_cast<int32_t>(m_spec.first_layer);
    for (int64_t mb = 0; mb < m_point.microbatches; ++mb) {
      rec.set_microbatch(static_cast<int32_t>(mb));
      if (!m_first) {
        ScopedOp s(rec, m_recv_id, first_layer, Lane::p2p, m_p2p_cost, Lane::compute);
        const Tensor in = m_stage.input();
        m_comms.pp->recv(in.data, static_cast<size_t>(in.elements()), in.dtype,
                         m_comms.grid->coords().pp_rank - 1, compute);
        m_comms.pp->complete(compute);
      }
      if (!m_graphs[m_current].empty()) {
        ScopedOp s(rec, m_graph_op, first_layer, Lane::compute, m_graph_cost, Lane::compute);
        m_backend.replay(m_graphs[m_current][static_cast<size_t>(m_step)], Lane::compute);
      } else {
        m_stage.forward(rec);
      }
      if (!m_last) {
        ScopedOp s(rec, m_send_id, static_cast<int32_t>(m_spec.first_layer + m_spec.num_layers - 1),
                   Lane::p2p, m_p2p_cost, Lane::compute);
        const Tensor out = m_stage.output();
        m_comms.pp->send(out.data, static_cast<size_t>(out.elements()), out.dtype,
                         m_comms.grid->coords().pp_rank + 1, compute);
        m_comms.pp->complete(compute);
      }
    }
  }
  void after_timed(Recorder& rec) override {
    if (m_current == 0)
      m_probes = m_stage.probe_gemms(rec, 2, m_backend.name() == std::string("cuda") ? 20 : 2);
  }
  void after_flush(Recorder& rec) override {
    if (m_current == 0) {
      for (const TpStage::GemmProbe& p : m_probes)
        m_probe_ns.push_back(
            static_cast<double>(rec.mark_ns(p.end_mark) - rec.mark_ns(p.start_mark)) / p.reps);
      RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, m_probe_ns.data(),
                                    static_cast<int>(m_probe_ns.size()), MPI_DOUBLE, MPI_MAX,
                                    m_comms.grid->world()));
    }
    m_checks.push_back(check_output());
    m_checksums.push_back(output_checksum());
  }

  const std::vector<TpStage::GemmProbe>& probes() const { return m_probes; }
  const std::vector<double>& probe_ns() const { return m_probe_ns; }
  const std::vector<CheckOutcome>& checks() const { return m_checks; }
  const std::vector<std::string>& checksums() const { return m_checksums; }
  /// Decode steps the check compared (1 without --decode-steps, 0 when it did not run).
  int64_t checked_steps() const { return m_check.enabled ? std::max<int64_t>(m_steps, 1) : 0; }
  OpCost p2p_cost() const { return m_p2p_cost; }

private:
  // Every rank calls; the last stage's TP group gathers its output, the holder compares.
  CheckOutcome check_output() {
    CheckOutcome c;
    c.tolerance = check_tolerance(m_backend.dtype());
    if (!m_check.enabled) {
      c.status = "skipped: " + m_why_not;
      return c;
    }
    double err = 0;
    // The timed loop ended on the last decode step (its iterations are whole passes).
    if (m_last) {
      const std::vector<float> got = m_stage.gather_output();
      if (!m_reference.empty()) err = relative_l2(got, m_reference.back());
    }
    // A growing cache: every step again in order, each output against the reference's output
    // at the same position (the cache rows rewritten hold what the timed steps wrote).
    if (m_steps > 1) {
      Recorder silent(m_backend.clock(), m_ops);
      silent.set_enabled(false);
      for (int64_t i = 0; i < m_steps; ++i) {
        set_position(i);
        step(silent);
        if (!m_last) continue;
        const std::vector<float> got = m_stage.gather_output();
        if (!m_reference.empty())
          err = std::max(err, relative_l2(got, m_reference[static_cast<size_t>(i)]));
      }
    }
    RIDGELINE_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, m_comms.grid->world()));
    c.max_rel_error = err;
    c.status = err <= c.tolerance ? "passed" : "failed";
    return c;
  }

  // Every rank calls; rank 0 gets the checksum of the output the check compares: FNV-1a 64 of
  // each last-stage rank's output (its values as float32 in host memory), those hashes then
  // hashed in rank order. Other ranks get "".
  std::string output_checksum() {
    uint64_t hash = kFnv1a64Offset;
    if (m_last) {
      const std::vector<float> out = m_backend.to_host(m_stage.output());
      hash = fnv1a64(out.data(), out.size() * sizeof(float));
    }
    return checksum_over_ranks(m_comms.grid->world(), m_last, hash);
  }

  const PointSpec& m_point;
  Backend& m_backend;
  GridComms& m_comms;
  TpStage& m_stage;
  OpTable& m_ops; ///< the point's: the stage's op ids (and so their range names) are its
  std::vector<Variant> m_strategies;
  StageSpec m_spec;
  const std::vector<std::vector<float>>& m_reference;
  CheckPlan m_check;
  std::string m_why_not;
  int64_t m_steps = 0;                    ///< --decode-steps (0: every step at position context)
  int64_t m_step = 0;                     ///< the decode step the next step() runs
  std::vector<std::vector<int>> m_graphs; ///< per strategy, per decode step

  size_t m_current = 0;
  bool m_first = true, m_last = true;
  OpCost m_p2p_cost, m_graph_cost;
  int32_t m_recv_id = -1, m_send_id = -1, m_graph_op = -1;
  std::vector<TpStage::GemmProbe> m_probes;
  std::vector<double> m_probe_ns;
  std::vector<CheckOutcome> m_checks;
  std::vector<std::string> m_checksums;
  int64_t m_input = 0; ///< the microbatch index of the input (an MoE replica's own tokens)
};

// Each probed GEMM's standalone TFLOP/s and its op's achieved figure over it. An MoE layer runs
// no dense MLP: its probes time GEMMs of no op.
void probe_attrs(const StageWorkload& workload, const std::vector<OpAggregate>& ops, bool moe,
                 Attrs& a) {
  for (size_t i = 0; i < workload.probes().size(); ++i) {
    const TpStage::GemmProbe& probe = workload.probes()[i];
    if (moe && (probe.op == op::fc1 || probe.op == op::fc2)) continue;
    const double ref_tflops = probe.flops / workload.probe_ns()[i] / 1e3;
    a.emplace_back("gemm_reference_tflops." + probe.op, ref_tflops);
    for (const OpAggregate& op : ops)
      if (op.name == probe.op && ref_tflops > 0)
        a.emplace_back("gemm_vs_reference." + op.name, op.achieved_tflops / ref_tflops);
  }
}

// How the point's stage meets the roofs: its layers and microbatches, its grid's scopes on the
// job's nodes, its dtype and the job's transport (the ops are the caller's).
AttributionInput stage_attribution(JobContext& job, const PointSpec& point, int64_t stage_layers) {
  AttributionInput a;
  a.layers = stage_layers;
  a.microbatches = point.microbatches;
  a.tp = point.tp;
  a.dtype = point.dtype;
  a.transport = job.transport();
  a.scopes = grid_scopes(map_nodes(job.mpi().hosts()), point.tp, point.pp, point.ep);
  return a;
}

// Every strategy's result from the protocol's measurement, with rank 0's summary attributes
// (check, checksum, loops, overlap metrics, GEMM probes) and the attribution against the roofs.
void collect_tp(JobContext& job, const PointSpec& point, const StageSpec& spec,
                const std::vector<Variant>& strategies, StageWorkload& workload, TpStage& stage,
                Backend& backend, ProtocolResult& measurement, const Roofs& roofs,
                const MoePoint* moe, PointResult& result) {
  MpiSession& mpi = job.mpi();
  const int64_t stage_layers = spec.num_layers;
  // The ops as the work model sees them, for attribution: the layer's ops, the pipeline
  // transfers and, under graphs, the replayed stage.
  AttributionInput attribution = stage_attribution(job, point, stage_layers);
  attribution.specs = stage.op_specs();
  attribution.graph_op = point.graphs ? op::stage_graph : "";
  for (const char* name : {op::send_act, op::recv_act}) {
    OpSpec p2p;
    p2p.name = name;
    p2p.kind = OpKind::p2p;
    p2p.lane = Lane::p2p;
    p2p.cost = workload.p2p_cost();
    p2p.collective = "sendrecv";
    attribution.p2p.push_back(p2p);
  }

  for (size_t si = 0; si < measurement.strategies.size(); ++si) {
    StrategyMeasurement& m = measurement.strategies[si];
    StrategyResult r;
    r.name = m.name;
    r.overlap = strategies[si].overlap.name();
    r.attention = attention_name(strategies[si].attention);
    r.loops = m.loops;
    r.check = workload.checks()[si];
    r.output_checksum = workload.checksums()[si];
    r.rows = std::move(m.rows);
    r.summary = summarize_point(job, result.ops, r.rows);
    if (point.decode() && point.decode_steps > 0)
      for (size_t i = 0; i < r.summary.step_ns.size(); ++i)
        r.summary.step_context.push_back(point.shape.context +
                                         static_cast<int64_t>(i) % point.decode_steps + 1);
    if (r.check.status == "failed") result.check_failed = true;
    result.strategies.push_back(std::move(r));
  }
  const std::vector<double> moe_steps =
      moe != nullptr ? moe->imbalance_steps() : std::vector<double>{};
  const Attrs moe_attrs = moe != nullptr ? moe->attrs(moe_steps, mpi.rank() == 0) : Attrs{};
  if (mpi.rank() == 0) {
    for (size_t si = 0; si < result.strategies.size(); ++si) {
      StrategyResult& r = result.strategies[si];
      // Serialized: the `none` strategy with the same attention, else the first one's parts.
      const StrategyResult* first = nullptr;
      double serialized_ns = 0;
      for (const StrategyResult& o : result.strategies)
        if (o.attention == r.attention && first == nullptr) first = &o;
      serialized_ns = first->loops.compute_only_ns + first->loops.comm_only_ns;
      for (const StrategyResult& o : result.strategies)
        if (o.attention == r.attention && o.overlap == "none") serialized_ns = o.loops.plain_ns;
      Attrs& a = r.summary.attrs;
      a = check_attrs(r.check);
      a.insert(a.end(), {{"output_checksum", r.output_checksum},
                         {"output_checksum_algorithm", std::string(kOutputChecksumAlgorithm)}});
      for (auto& kv : loop_attrs(r.loops))
        a.push_back(std::move(kv));
      // A growing cache: the check compared every decode step's output.
      if (point.decode_steps > 0) a.emplace_back("check_steps", workload.checked_steps());
      // --gemm-algo search|skinny: every shape the job searched or gave to the skinny kernel so
      // far and the kernel it kept.
      if (point.gemm_algo != GemmAlgo::heuristic) {
        std::string choices;
        for (const std::string& line : backend.gemm_choices())
          choices += (choices.empty() ? "" : "; ") + line;
        a.emplace_back("gemm_algorithms", choices);
      }
      // The overlap metrics need the lanes measured apart (not under graphs, nor an MoE step).
      if (workload.lane_modes())
        for (auto& kv : overlap_attrs(r, serialized_ns))
          if (kv.first != "step_ns") a.push_back(kv);
      const Attrs& gpu = measurement.strategies[si].gpu;
      a.insert(a.end(), gpu.begin(), gpu.end());
      probe_attrs(workload, r.summary.ops, moe != nullptr, a);
      a.emplace_back("attention", r.attention);
      a.insert(a.end(), moe_attrs.begin(), moe_attrs.end());
      r.summary.moe_rank_imbalance = moe_steps;
      if (strategies[si].overlap.symmetric)
        a.emplace_back("symmetric_memory", stage.symmetric_path());
      // The attention op's cost depends on the implementation (naive also writes its scores).
      attribution.specs = moe != nullptr ? moe->layer_ops(spec.shape, strategies[si].attention)
                                         : stage_ops(spec, strategies[si].attention);
      // A mixed step: what it held, beside its time by ceiling.
      if (point.mixed())
        for (auto& kv : mix_attrs(point.mix))
          a.push_back(std::move(kv));
      if (!roofs.empty()) attribute(r.summary, attribution, roofs);
    }
  }
}

// A trace run: the trace's steps replayed on the stage the point measured at its capacity
// step, then (where the point's check runs) every step again against the TP=1 model, built on
// the rank that holds it once the replay is done, where it fits beside the stage.
std::shared_ptr<TraceRunResult> run_trace(JobContext& job, const PointSpec& point,
                                          const StageSpec& spec, const CheckPlan& check,
                                          const std::string& why_not, bool holder, TpStage& stage,
                                          Backend& backend, GridComms& comms, Watchdog& watchdog,
                                          const Roofs& roofs, PointResult& result) {
  const MPI_Comm world = comms.grid->world();
  auto run = std::make_shared<TraceRunResult>(
      replay_trace(*point.serving, stage, result.ops, backend, world, watchdog,
                   stage_attribution(job, point, point.stage_layers()), roofs));
  ReplayCheck& c = run->check;
  c.tolerance = check_tolerance(backend.dtype());
  if (!check.enabled) {
    c.status = "skipped: " + why_not;
    return run;
  }
  OpTable ref_ops;
  std::unique_ptr<TpStage> ref;
  std::string failure;
  watchdog.rearm("building the TP=1 model the trace's steps are checked against");
  if (holder) {
    // Built and run once at its capacity, the largest step, so that what its steps allocate
    // (the attention's and the libraries' scratch at TP=1) is allocated here, where every rank
    // agrees on a failure, and not inside the checked steps.
    try {
      ref = tp1_stage(backend, spec, point.model.layers, nullptr, ref_ops);
      ref->fill_input(0);
      Recorder silent(backend.clock(), ref_ops);
      silent.set_enabled(false);
      ref->forward(silent);
      backend.synchronize();
    } catch (const Error& e) {
      failure = e.what();
    }
  }
  if (!all_ranks_true(world, failure.empty())) {
    c.status = "skipped: the TP=1 model could not be built and run beside the stage" +
               (failure.empty() ? std::string() : " (" + failure + ")");
    return run;
  }
  const ranges::Scope range(kReferenceRange);
  c = check_replay(run->schedule, stage, result.ops, ref.get(), ref_ops, backend, world, watchdog,
                   c.tolerance);
  if (c.status == "failed") result.check_failed = true;
  return run;
}

} // namespace

double overlap_memory_bytes(const PointSpec& point) {
  if (point.tp == 1) return 0;
  StageSpec spec;
  spec.model = point.model;
  spec.shape = point.shape;
  spec.symmetric_buffers = any_symmetric_overlap(point);
  // Every layer of a stage shares the stage's buffers: counted once.
  return TpStage::overlap_memory_bytes(spec, spec.shape.dtype, any_ring_overlap(point));
}

PointResult run_tp_point(JobContext& job, const PointSpec& point, const Roofs& roofs,
                         Watchdog& watchdog) {
  const auto started = std::chrono::steady_clock::now();
  PointResult result;
  const std::vector<Variant> strategies = point_variants(point);
  const int64_t stage_layers = point.stage_layers();

  watchdog.rearm("creating communicators and allocating weights");
  GridComms& comms = point_grid(job, point, result);
  const GridCoords& gc = comms.grid->coords();
  Backend& backend = point_backend(job, point);

  StageSpec spec;
  spec.model = point.model;
  spec.shape = point.shape;
  spec.attention = strategies.front().attention;
  spec.tp_rank = gc.tp_rank;
  spec.first_layer = gc.pp_rank * stage_layers;
  spec.num_layers = stage_layers;
  spec.seed = point.seed;
  spec.overlap_gemm_sms = point.overlap_gemm_sms;
  spec.overlap = strategies.front().overlap;
  spec.symmetric_buffers = any_symmetric_overlap(point);
  spec.mix = point.mix;
  const bool last_stage = gc.pp_rank == point.pp - 1;
  const CheckPlan check = plan_check(point, job.cuda(), job.min_free_bytes());
  const char* const itself = point.model.moe()
                                 ? "tp=1, pp=1 and ep=1: the run is itself the reference"
                                 : "tp=1 and pp=1: the run is itself the reference";
  const std::string why_not =
      check.possible ? std::string("--check ") + check_mode_name(point.check) +
                           " (the TP=1 reference model needs " +
                           std::to_string(static_cast<int64_t>(check.ref_bytes / 1048576)) + " MiB)"
                     : itself;

  std::unique_ptr<PeerExchange> exchange;
  if (!ring_exchange(job, point, comms, TpStage::exchange_windows(spec, backend.dtype()), watchdog,
                     result, exchange))
    return result;
  std::string failure;

  // Allocation may fail on one rank only (another process took the memory): agree first.
  std::vector<std::vector<float>> reference;
  std::unique_ptr<TpStage> stage;
  std::unique_ptr<MoePoint> moe;
  try {
    if (point.model.moe()) {
      watchdog.rearm("creating the expert-parallel group and its experts");
      moe = std::make_unique<MoePoint>(job, point, comms, backend, result.ops, check.enabled);
      spec.mlp = moe->mlp();
    }
    watchdog.rearm("computing the TP=1 reference output");
    if (check.enabled)
      reference =
          reference_outputs(backend, spec, last_stage && gc.tp_rank == 0, point.model.layers,
                            moe ? moe->reference() : nullptr, moe ? moe->input_index() : 0);
    stage = std::make_unique<TpStage>(backend, comms.tp.get(), spec, result.ops, exchange.get());
    backend.synchronize();
  } catch (const Error& e) {
    failure = e.what();
  }
  if (!all_built(job, failure, result)) return result;
  if (moe) {
    watchdog.rearm("routing one step for the MoE layer's load");
    moe->prime(*stage, backend, result.ops);
  }

  StageWorkload workload(point, backend, comms, *stage, result.ops, strategies, spec, reference,
                         check, why_not, moe ? moe->input_index() : 0);
  ProtocolResult measurement = measure_point(job, point, workload, backend, watchdog, result);
  collect_tp(job, point, spec, strategies, workload, *stage, backend, measurement, roofs, moe.get(),
             result);
  if (point.serving) {
    const auto replayed = std::chrono::steady_clock::now();
    auto run = run_trace(job, point, spec, check, why_not, last_stage && gc.tp_rank == 0, *stage,
                         backend, comms, watchdog, roofs, result);
    if (job.mpi().rank() == 0) result.serving = std::move(run);
    result.measure_s += seconds_since(replayed);
  }
  result.attention_plans = backend.attention_plans();
  result.setup_s = seconds_since(started) - result.measure_s;
  return result;
}

} // namespace ridgeline
