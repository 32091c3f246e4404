// Scheduled pipeline points (see train_point.hpp).
#include "app/train_point.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/attribution.hpp"
#include "app/summary.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "models/work_model.hpp"
#include "parallel/pipeline.hpp"
#include "parallel/schedule.hpp"
#include "parallel/stage_reference.hpp"
#include "parallel/train_stage.hpp"

namespace ridgeline {
namespace {

// The protocol's view of a pipeline stage: one strategy per variant (the stage's attention
// and overlap strategy), each iteration the driver's step; after each strategy's timed loop,
// `check` checks it (every rank).
class ScheduledWorkload final : public Workload {
public:
  ScheduledWorkload(PipelineDriver& driver, TrainStage& stage, const std::vector<Variant>& variants,
                    std::function<void()> check)
      : m_driver(driver), m_stage(stage), m_variants(variants), m_check(std::move(check)) {}

  size_t strategies() const override { return m_variants.size(); }
  std::string strategy_name(size_t s) const override { return m_variants[s].name; }
  bool lane_modes() const override { return false; }
  void select(size_t s) override {
    m_stage.set_variant(m_variants[s].attention, m_variants[s].overlap);
    // Under sequence parallelism the rows a rank holds follow the strategy's units.
    m_driver.refresh_inputs();
  }
  void set_mode(Mode) override {}
  void step(Recorder& rec) override { m_driver.step(rec); }
  void after_flush(Recorder&) override { m_check(); }

private:
  PipelineDriver& m_driver;
  TrainStage& m_stage;
  const std::vector<Variant>& m_variants;
  std::function<void()> m_check;
};

// The stage's ops outside its layers, for attribution: gradient zeroing and the SGD step
// against HBM, each collective against the interconnect roof of its own group (data-parallel
// reductions over the dp replicas, the norms' gradients over TP, the flush over the stages).
// Waits have no roof; nor have MPI's pipeline exchanges, whose recorded time is the posting of
// non-blocking transfers (the transfers' time is in pp_wait).
void add_stage_ops(AttributionInput& in, const PointSpec& point, bool exchanges_timed) {
  auto spec = [](const char* name, int64_t group, CommGroup over) {
    OpSpec s = registered_op(name);
    s.group_size = group;
    s.group = over;
    return s;
  };
  in.stage = {spec(op::grad_zero, 0, CommGroup::tp),
              spec(op::sgd_update, 0, CommGroup::tp),
              spec(op::dp_allreduce, point.dp, CommGroup::dp),
              spec(op::dp_reducescatter, point.dp, CommGroup::dp),
              spec(op::allreduce_norm_grads, point.tp, CommGroup::tp),
              spec(op::pp_flush, point.pp, CommGroup::pp)};
  if (exchanges_timed)
    in.stage.push_back(spec(op::pp_exchange, 2, CommGroup::pp));
  else
    in.no_roof[op::pp_exchange] =
        "the posting of MPI's non-blocking transfers (their time is in pp_wait)";
  in.no_roof[op::pp_wait] = "the compute waiting for pipeline transfers, no work of its own";
}

// What a scheduled point is, resolved once from its configuration and this rank's place in
// the grid.
struct ScheduledPlan {
  Schedule schedule;
  std::vector<Variant> variants;
  TrainSpec spec;
  PipelineSpec pipe;
  DataParallel dp;
  bool check = false;
  std::string why_not; ///< why the check does not run
  bool timed_actions = false;
};

ScheduledPlan plan_scheduled(JobContext& job, const PointSpec& point, GridComms& comms) {
  ScheduledPlan p;
  const bool train = point.train();
  p.schedule = *point.schedule;
  p.variants = point_variants(point);
  const GridCoords& gc = comms.grid->coords();
  const int64_t layers = point.model.layers;
  p.spec.model = point.model;
  p.spec.shape = point.shape;
  p.spec.attention = p.variants.front().attention;
  p.spec.overlap = p.variants.front().overlap;
  p.spec.symmetric_buffers = point.tp > 1 && any_symmetric_overlap(point);
  p.spec.tp_rank = gc.tp_rank;
  p.spec.recompute = point.recompute;
  p.spec.seed = point.seed;
  for (int c = 0; c < p.schedule.chunks; ++c)
    p.spec.chunks.push_back(chunk_layers(p.schedule, gc.pp_rank, point.pp, c, layers));
  p.pipe.schedule = p.schedule;
  p.pipe.stages = point.pp;
  p.pipe.stage = gc.pp_rank;
  p.pipe.replica = gc.dp_rank;
  p.pipe.microbatches = static_cast<int>(point.microbatches);
  p.pipe.train = train;
  p.pipe.sgd_lr = static_cast<float>(point.sgd_lr);
  p.pipe.seed = point.seed;
  p.dp.comm = comms.dp.get();
  p.dp.bucket_bytes = static_cast<size_t>(point.bucket_mb * 1048576.0);
  p.dp.overlap = point.dp_overlap;
  p.dp.shard = point.dp_shard;
  const CheckPlan plan = plan_check(point, job.cuda(), job.min_free_bytes());
  p.check = plan.enabled && point.sgd_lr == 0;
  p.why_not = !plan.possible ? "tp=1, pp=1, dp=1: the run is itself the reference"
              : !plan.enabled
                  ? std::string("--check ") + check_mode_name(point.check) +
                        " (the one-rank reference needs " +
                        std::to_string(static_cast<int64_t>(plan.ref_bytes / 1048576)) + " MiB)"
                  : "--sgd-lr changes the weights every iteration";
  // Train with a pipeline: the measured action times (zb-h1's order is built for them; every
  // schedule's bubble is simulated with them beside the theory's).
  p.timed_actions = train && point.pp > 1;
  return p;
}

// The check: one more iteration from the same weights, its gradients (or, forward only, its
// outputs) against the reference, the largest relative L2 error of any tensor on any rank.
CheckOutcome check_scheduled(JobContext& job, const ScheduledPlan& p, Backend& backend,
                             TrainStage& stage, PipelineDriver& driver,
                             const StageReference& reference, Watchdog& watchdog) {
  CheckOutcome outcome;
  outcome.tolerance = backend.dtype() == DType::f32 ? 1e-4 : 3e-2;
  if (!p.check) {
    outcome.status = "skipped: " + p.why_not;
    return outcome;
  }
  watchdog.rearm("checking the gradients against the one-rank reference");
  driver.capture();
  std::string skipped;
  double err = stage_check_error(backend, stage, driver, reference, p.pipe, skipped);
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, job.mpi().world()));
  outcome.max_rel_error = err;
  outcome.status = (err <= outcome.tolerance ? "passed" : "failed") + skipped;
  return outcome;
}

// The pipeline figures of one strategy, rank 0's summary attributes: the schedule, its
// theory and simulated bubbles, the action times, and per stage (gathered from the TP rank 0
// of replica 0 of each stage) the bubble, the exposed exchanges and data-parallel reduction,
// and the peak activation bytes.
Attrs pipeline_attrs(JobContext& job, const PointSpec& point, const ScheduledPlan& p,
                     const GridCoords& gc, const StageTimes& times, double peak_bytes,
                     const ActionCosts& costs, double bubble_simulated) {
  const bool reporter = gc.tp_rank == 0 && gc.dp_rank == 0;
  const double mine[4] = {times.bubble, times.exchange_ns, times.dp_exposed_ns, peak_bytes};
  std::vector<double> stages(static_cast<size_t>(4 * point.pp), 0.0);
  if (reporter) std::copy(mine, mine + 4, stages.begin() + 4 * gc.pp_rank);
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, stages.data(), static_cast<int>(stages.size()),
                                MPI_DOUBLE, MPI_SUM, job.mpi().world()));
  Attrs a = {
      {"schedule", schedule_name(p.schedule)},
      {"microbatches", static_cast<int64_t>(point.microbatches)},
      {"recompute", std::string(point.recompute ? "full" : "none")},
      {"bubble_theory", theory_bubble(p.schedule, point.pp, p.pipe.microbatches, p.pipe.train)}};
  if (p.timed_actions) {
    a.insert(a.end(), {{"action_forward_ns", costs.forward},
                       {"action_backward_ns", costs.backward},
                       {"bubble_simulated", bubble_simulated}});
    if (p.schedule.kind == ScheduleKind::zb_h1)
      a.insert(a.end(), {{"action_backward_input_ns", costs.backward_input},
                         {"action_backward_weight_ns", costs.backward_weight}});
  }
  for (int s = 0; s < point.pp; ++s) {
    const std::string key = "stage" + std::to_string(s) + ".";
    const double* v = stages.data() + 4 * s;
    a.emplace_back(key + "bubble", v[0]);
    a.emplace_back(key + "p2p_exposed_ns", v[1]);
    a.emplace_back(key + "dp_exposed_ns", v[2]);
    a.emplace_back(key + "peak_activation_bytes", v[3]);
  }
  return a;
}

// Every strategy's result from the protocol's measurement: its summary with the check, the
// output checksum, the loops, the pipeline figures and the GPU samples, attributed against the
// roofs on rank 0.
void collect_scheduled(JobContext& job, const PointSpec& point, const ScheduledPlan& p,
                       const GridComms& comms, bool exchanges_timed, ProtocolResult& measurement,
                       const std::vector<CheckOutcome>& outcomes,
                       const std::vector<std::string>& checksums, double peak_bytes,
                       const ActionCosts& costs, double bubble_simulated,
                       const std::string& symmetric_path, const Roofs& roofs, PointResult& result) {
  MpiSession& mpi = job.mpi();
  const GridCoords& gc = comms.grid->coords();
  AttributionInput attribution;
  attribution.layers = point.stage_layers();
  attribution.microbatches = point.microbatches;
  attribution.tp = point.tp;
  attribution.dtype = point.dtype;
  attribution.transport = job.transport();
  attribution.scopes = grid_scopes(map_nodes(mpi.hosts()), point.tp, point.pp);
  add_stage_ops(attribution, point, exchanges_timed);
  for (size_t si = 0; si < measurement.strategies.size(); ++si) {
    StrategyMeasurement& m = measurement.strategies[si];
    StrategyResult r;
    r.name = m.name;
    r.overlap = p.variants[si].overlap.name();
    r.attention = attention_name(p.variants[si].attention);
    r.loops = m.loops;
    r.check = outcomes[si];
    r.output_checksum = checksums[si];
    r.rows = std::move(m.rows);
    r.summary = summarize_point(job, result.ops, r.rows);
    const Attrs pipeline = pipeline_attrs(job, point, p, gc, stage_times(r.rows, result.ops),
                                          peak_bytes, costs, bubble_simulated);
    if (r.check.status.rfind("failed", 0) == 0) result.check_failed = true;
    if (mpi.rank() == 0) {
      Attrs& a = r.summary.attrs;
      a = check_attrs(r.check);
      a.emplace_back("check_compares", std::string(p.pipe.train ? "gradients" : "outputs"));
      a.insert(a.end(), {{"output_checksum", r.output_checksum},
                         {"output_checksum_algorithm", std::string(kOutputChecksumAlgorithm)}});
      for (auto& kv : loop_attrs(r.loops))
        a.push_back(std::move(kv));
      a.insert(a.end(), {{"overlap", r.overlap}, {"attention", r.attention}});
      if (p.variants[si].overlap.symmetric) a.emplace_back("symmetric_memory", symmetric_path);
      a.insert(a.end(), pipeline.begin(), pipeline.end());
      a.insert(a.end(), m.gpu.begin(), m.gpu.end());
      if (!roofs.empty()) {
        // The plan of this strategy's attention (the stage holds the last one selected).
        attribution.specs = train_layer_plan(p.spec.model, p.spec.shape, p.variants[si].attention);
        attribute(r.summary, attribution, roofs);
      }
    }
    result.strategies.push_back(std::move(r));
  }
}

} // namespace

PointResult run_scheduled_point(JobContext& job, const PointSpec& point, const Roofs& roofs,
                                Watchdog& watchdog) {
  const auto started = std::chrono::steady_clock::now();
  MpiSession& mpi = job.mpi();
  PointResult result;
  watchdog.rearm("creating communicators and allocating weights");
  GridComms& comms = point_grid(job, point, result);
  Backend& backend = point_backend(job, point);
  const ScheduledPlan p = plan_scheduled(job, point, comms);

  std::unique_ptr<PeerExchange> exchange;
  if (!ring_exchange(job, point, comms, TrainStage::exchange_windows(p.spec, backend.dtype()),
                     watchdog, result, exchange))
    return result;
  std::string failure;

  StageReference reference;
  std::unique_ptr<TrainStage> stage;
  try {
    if (p.check) {
      watchdog.rearm("computing the one-rank reference");
      reference = compute_stage_reference(backend, p.spec, point.model.layers,
                                          static_cast<int64_t>(point.dp) * point.microbatches,
                                          p.pipe.train);
    }
    stage =
        std::make_unique<TrainStage>(backend, comms.tp.get(), p.spec, result.ops, exchange.get());
    backend.synchronize();
  } catch (const Error& e) {
    failure = e.what();
  }
  if (!all_built(job, failure, result)) return result;

  ActionCosts costs;
  if (p.timed_actions) {
    watchdog.rearm("timing the stage's forward, input-gradient and weight-gradient passes");
    costs = measure_action_costs(backend, *stage, result.ops,
                                 p.schedule.kind == ScheduleKind::zb_h1, mpi.world());
  }
  PipelineSpec pipe = p.pipe;
  pipe.costs = costs;
  PipelineDriver driver(backend, comms.pp.get(), p.dp, *stage, result.ops, pipe);
  // Each strategy's check after its timed loop: one more iteration from the same weights, and
  // the output checksum of what the check compares, whether or not the check ran.
  std::vector<CheckOutcome> outcomes;
  std::vector<std::string> checksums;
  auto check = [&] {
    outcomes.push_back(check_scheduled(job, p, backend, *stage, driver, reference, watchdog));
    if (!p.check) {
      watchdog.rearm("one more iteration for the output checksum");
      driver.capture();
    }
    bool holds = false;
    const uint64_t hash = stage_output_hash(backend, *stage, driver, pipe, kFnv1a64Offset, holds);
    checksums.push_back(checksum_over_ranks(mpi.world(), holds, hash));
  };
  ScheduledWorkload workload(driver, *stage, p.variants, check);
  const double bubble_simulated =
      p.timed_actions
          ? simulate_pipeline(p.schedule, point.pp, pipe.microbatches, pipe.train, costs).bubble()
          : 0.0;
  ProtocolResult measurement = measure_point(job, point, workload, backend, watchdog, result);
  collect_scheduled(job, point, p, comms, driver.exchanges_timed(), measurement, outcomes,
                    checksums, static_cast<double>(stage->peak_activation_bytes()), costs,
                    bubble_simulated, stage->symmetric_path(), roofs, result);
  result.attention_plans = backend.attention_plans();
  result.setup_s = seconds_since(started) - result.measure_s;
  return result;
}

} // namespace ridgeline
