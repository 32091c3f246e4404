// What every runner of a point shares (see point_common.hpp).
#include "app/point_common.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "app/command_support.hpp"
#include "app/node_summary.hpp"
#include "app/run_file.hpp"
#include "app/summary.hpp"
#include "models/work_model.hpp"
#include "parallel/tp_layer.hpp"
#include "parallel/train_stage.hpp"

namespace ridgeline {
namespace {

constexpr double kCheckAutoLimitBytes = 2.0 * 1024 * 1024 * 1024;

// Saved activations of one layer for one microbatch on one rank (TrainStage's activation set).
double layer_activation_bytes(const ModelSpec& m, const LayerShape& s) {
  const LayerGeometry g = layer_geometry(m, s, 0);
  const double e = static_cast<double>(dtype_size(s.dtype));
  return static_cast<double>(g.tokens) * e *
             static_cast<double>(4 * g.hidden + 2 * g.qkv_cols() + g.q_cols() + 2 * g.fc1_cols() +
                                 g.ffn) +
         static_cast<double>(s.batch * g.heads * s.seq) * 4.0;
}

} // namespace

CheckPlan plan_check(const PointSpec& spec, bool cuda, int64_t free_bytes) {
  CheckPlan p;
  if (spec.scheduled()) {
    // Gradients are summed over the replicas: data parallelism alone is worth checking.
    p.ref_bytes = scheduled_reference_bytes(spec);
    p.host_bytes = scheduled_reference_host_bytes(spec);
    p.possible = spec.tp > 1 || spec.pp > 1 || (spec.train() && spec.dp > 1);
  } else {
    LayerShape tp1 = spec.shape;
    tp1.tp = 1;
    tp1.sequence_parallel = false;
    p.ref_bytes = stage_memory_bytes(spec.model, tp1, spec.model.layers) +
                  mixed_cache_bytes(spec.model, spec.mix, 1, spec.dtype, spec.model.layers);
    p.host_bytes = static_cast<double>(tp1.tokens()) * static_cast<double>(spec.model.hidden) *
                   static_cast<double>(sizeof(float) * std::max<int64_t>(tp1.decode_steps, 1));
    // An expert-parallel layout is checked against every expert on one rank.
    p.possible = spec.tp > 1 || spec.pp > 1 || spec.ep > 1;
  }
  const double auto_limit =
      cuda && free_bytes > 0 ? static_cast<double>(free_bytes) / 4 : kCheckAutoLimitBytes;
  p.enabled = p.possible && (spec.check == CheckMode::on ||
                             (spec.check == CheckMode::automatic && p.ref_bytes <= auto_limit &&
                              p.host_bytes <= kCheckAutoLimitBytes));
  return p;
}

double scheduled_memory_bytes(const PointSpec& spec) {
  const ModelSpec& m = spec.model;
  const LayerShape& s = spec.shape;
  const double layers = static_cast<double>(spec.stage_layers());
  // Weights and gradients; every microbatch in flight at once at worst (gpipe), each with its
  // layers' activations (only their inputs under recompute, plus one recomputed layer).
  const double weights = 2.0 * layers * layer_weight_bytes(m, spec.tp, s.dtype);
  const double act = layer_activation_bytes(m, s);
  const double input =
      static_cast<double>(s.tokens() * m.hidden) * static_cast<double>(dtype_size(s.dtype));
  const double per_mb = spec.recompute ? layers * input : layers * act;
  return weights + static_cast<double>(spec.microbatches) * (per_mb + 3.0 * input) + act;
}

double scheduled_overlap_bytes(const PointSpec& spec) {
  TrainSpec stage;
  stage.model = spec.model;
  stage.shape = spec.shape;
  stage.symmetric_buffers = spec.tp > 1 && any_symmetric_overlap(spec);
  return TrainStage::overlap_memory_bytes(stage, spec.shape.dtype,
                                          spec.tp > 1 && any_ring_overlap(spec));
}

bool any_symmetric_overlap(const PointSpec& spec) {
  return std::any_of(spec.overlaps.begin(), spec.overlaps.end(),
                     [](const Overlap& o) { return o.symmetric; });
}

bool any_ring_overlap(const PointSpec& spec) {
  return std::any_of(spec.overlaps.begin(), spec.overlaps.end(),
                     [](const Overlap& o) { return overlap_policy(o).ring; });
}

double scheduled_reference_bytes(const PointSpec& spec) {
  LayerShape s = spec.shape;
  s.tp = 1;
  const double layers = static_cast<double>(spec.model.layers);
  return 2.0 * layers * layer_weight_bytes(spec.model, 1, s.dtype) +
         layers * layer_activation_bytes(spec.model, s);
}

double scheduled_reference_host_bytes(const PointSpec& spec) {
  const ModelSpec& m = spec.model;
  const double f32 = sizeof(float);
  const double grads = static_cast<double>(m.layers) * layer_weight_bytes(m, 1, DType::f32);
  const double per_mb = static_cast<double>(spec.shape.tokens() * m.hidden) * f32 * 2.0;
  return grads + static_cast<double>(spec.dp * spec.microbatches) * per_mb;
}

std::vector<Variant> point_variants(const PointSpec& spec) {
  std::vector<Variant> out;
  for (const Overlap& o : spec.overlaps)
    for (const AttentionImpl a : spec.attentions) {
      Variant v;
      v.overlap = o;
      v.attention = a;
      v.name = spec.attentions.size() == 1 ? o.name()
               : spec.overlaps.size() == 1 ? std::string(attention_name(a))
                                           : o.name() + "+" + attention_name(a);
      out.push_back(v);
    }
  return out;
}

Attrs overlap_attrs(const StrategyResult& r, double serialized_ns) {
  const LoopTimes& t = r.loops;
  double compute_in_step_ns = 0, comm_in_step_ns = 0;
  bool comm = false;
  for (const OpAggregate& a : r.summary.ops) {
    if (a.lane == "compute") compute_in_step_ns += a.per_step_p50_ns;
    if (a.lane == "comm") comm_in_step_ns += a.per_step_p50_ns;
    comm = comm || a.kind == "collective" || a.kind == "p2p";
  }
  // A step without collectives exposes none: its compute-only loop is the same step, and the
  // two loops' difference is noise of either sign. Nor can a step expose less than nothing: a
  // step faster than its compute-only loop exposes 0.
  const double exposed = comm ? std::max(0.0, t.plain_ns - t.compute_only_ns) : 0.0;
  const double overlapped = comm ? std::min(t.compute_only_ns, t.comm_only_ns) : 0.0;
  return {
      {"overlap", r.overlap},
      {"step_ns", t.plain_ns},
      {"compute_only_ns", t.compute_only_ns},
      {"comm_only_ns", t.comm_only_ns},
      {"exposed_comm_ns", exposed},
      {"serialized_ns", serialized_ns},
      {"overlap_efficiency", overlapped > 0 ? (serialized_ns - t.plain_ns) / overlapped : 0.0},
      {"interference", t.compute_only_ns > 0 ? compute_in_step_ns / t.compute_only_ns : 0.0},
      {"comm_interference", t.comm_only_ns > 0 ? comm_in_step_ns / t.comm_only_ns : 0.0},
      {"bound", std::string(t.compute_only_ns >= t.comm_only_ns ? "compute" : "communication")}};
}

namespace {

// The all-reduce times of `ridgeline collectives --allreduce ...` files, for --allreduce auto:
// every implementation's p50 by size, from the tables of the run's group size and dtype.
using ImplTables = std::vector<std::pair<std::string, std::string>>; // table path, implementation

// One file's tables of group size `tp` and `dtype`, appended to `out`.
void read_allreduce_tables(const RunData& d, const std::string& path, const ImplTables& impls,
                           int tp, const std::string& dtype, std::vector<AllReduceTiming>& out) {
  for (const auto& [table_path, impl] : impls)
    for (const NamedTable& t : d.tables) {
      if (t.path != table_path) continue;
      const AttrValue* group = find_attr(t.attrs, "group_size");
      const AttrValue* type = find_attr(t.attrs, "dtype");
      const AttrValue* backend = find_attr(t.attrs, "backend");
      if (group == nullptr || attr_to_string(*group) != std::to_string(tp) || type == nullptr ||
          attr_to_string(*type) != dtype)
        continue;
      // The communicator's own all-reduce counts only where it was NCCL's.
      if (impl == "nccl" && (backend == nullptr || attr_to_string(*backend) != "nccl")) continue;
      const std::vector<int64_t>* sizes = nullptr;
      const std::vector<double>* p50 = nullptr;
      for (const Column& c : t.table) {
        if (c.name == "size_bytes") sizes = std::get_if<std::vector<int64_t>>(&c.values);
        if (c.name == "time_p50_ns") p50 = std::get_if<std::vector<double>>(&c.values);
      }
      if (sizes == nullptr || p50 == nullptr || sizes->size() != p50->size())
        throw UsageError("--allreduce-table " + path + ": " + t.path +
                         " has no size_bytes and time_p50_ns columns");
      for (size_t i = 0; i < sizes->size(); ++i)
        out.push_back({impl, static_cast<size_t>((*sizes)[i]), (*p50)[i]});
    }
}

// `paths`: one file, or a comma list of them (one per group size, for a sweep over --tp).
std::vector<AllReduceTiming> read_allreduce_table(const std::string& paths, int tp,
                                                  const std::string& dtype) {
  // The tables `collectives --allreduce` writes: the communicator's own, then all_reduce_NAME.
  ImplTables impls = {{"/collectives/all_reduce", "nccl"}};
  for (const std::string& name : ipc_algo_names())
    impls.emplace_back("/collectives/all_reduce_" + name, name);
  std::vector<AllReduceTiming> out;
  for (const std::string& path : split_list(paths)) {
    const RunData d = read_run_file(path, false);
    const AttrValue* command = find_attr(d.root, "command");
    if (command == nullptr || attr_to_string(*command) != "collectives")
      throw UsageError("--allreduce-table " + path + ": not a file of `ridgeline collectives`");
    read_allreduce_tables(d, path, impls, tp, dtype, out);
  }
  if (out.empty())
    throw UsageError("--allreduce-table " + paths + ": no all-reduce measured at group size " +
                     std::to_string(tp) + " in " + dtype +
                     " (ridgeline collectives --collectives all_reduce --allreduce "
                     "nccl,oneshot,push,push-ll,twoshot with as many ranks as --tp)");
  return out;
}

} // namespace

NcclOptions point_nccl(const PointSpec& spec) {
  NcclOptions nccl;
  nccl.max_ctas = spec.nccl_max_ctas;
  nccl.min_ctas = spec.nccl_min_ctas;
  nccl.cta_policy = spec.nccl_cta_policy;
  nccl.timeout_s = whole_seconds(spec.timeout_s);
  return nccl;
}

GridComms& point_grid(JobContext& job, const PointSpec& spec, PointResult& result) {
  const NcclOptions nccl = point_nccl(spec);
  // The custom all-reduce's buffers hold the largest TP all-reduce of the run: a microbatch's
  // tokens x hidden (the layer's outputs forward, its input gradients backward).
  TpAllReduce all_reduce;
  all_reduce.algo = spec.allreduce;
  const int64_t tokens = spec.batch / spec.microbatches * spec.shape.seq;
  all_reduce.max_bytes = static_cast<size_t>(tokens * spec.model.hidden) * dtype_size(spec.dtype);
  if (spec.allreduce == "auto" && spec.tp > 1) {
    all_reduce.table_path = spec.allreduce_table;
    all_reduce.table = read_allreduce_table(spec.allreduce_table, spec.tp, dtype_name(spec.dtype));
    if (job.mpi().rank() == 0)
      std::cout << "ridgeline: --allreduce auto: " << all_reduce.max_bytes
                << " B (the layer's all-reduce) -> "
                << choose_all_reduce(all_reduce.table, all_reduce.max_bytes) << " (from "
                << spec.allreduce_table << ")\n";
  }
  GridComms& comms = job.grid(spec.tp, spec.pp, spec.dp, nccl, all_reduce);
  const GridCoords& gc = comms.grid->coords();
  result.coords = {{"tp_rank", static_cast<int64_t>(gc.tp_rank)},
                   {"pp_rank", static_cast<int64_t>(gc.pp_rank)},
                   {"dp_rank", static_cast<int64_t>(gc.dp_rank)}};
  return comms;
}

Backend& point_backend(JobContext& job, const PointSpec& spec) {
  Backend& backend = job.backend(spec.dtype, spec.comm_high_priority);
  backend.set_gemm_algo(spec.gemm_algo);
  backend.set_grouped_gemm(spec.grouped_gemm);
  if (spec.cuda) backend.set_kernel_tuning(spec.tuning);
  return backend;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

Attrs check_attrs(const CheckOutcome& check) {
  return {{"check", check.status},
          {"check_max_rel_error", check.max_rel_error},
          {"check_tolerance", check.tolerance}};
}

Attrs loop_attrs(const LoopTimes& loops) {
  return {{"instrumented_step_ns", loops.instrumented_ns},
          {"uninstrumented_step_ns", loops.plain_ns},
          {"uninstrumented_sub_batches", static_cast<int64_t>(loops.sub_batches)},
          {"instrumentation_overhead", loops.instrumented_ns / loops.plain_ns - 1.0}};
}

bool all_built(JobContext& job, const std::string& failure, PointResult& result) {
  if (all_ranks_true(job.mpi().world(), failure.empty())) return true;
  result.status =
      "failed: " +
      (failure.empty() ? std::string("another rank could not build the stage") : failure);
  return false;
}

bool ring_exchange(JobContext& job, const PointSpec& point, GridComms& comms,
                   const std::vector<size_t>& window_bytes, Watchdog& watchdog, PointResult& result,
                   std::unique_ptr<PeerExchange>& exchange) {
  if (point.tp == 1 || !any_ring_overlap(point)) return true;
  watchdog.rearm("mapping the peers' memory for ce-ring");
  std::string failure;
  try {
    exchange = job.make_exchange(comms.grid->tp_comm(), window_bytes);
  } catch (const Error& e) {
    failure = e.what();
  }
  return all_built(job, failure, result);
}

ProtocolResult measure_point(JobContext& job, const PointSpec& spec, Workload& workload,
                             Backend& backend, Watchdog& watchdog, PointResult& result) {
  ProtocolOptions po;
  po.warmup = spec.warmup;
  po.iters = spec.iters;
  po.sample_ms = spec.sample_ms;
  po.device = job.device();
  const auto measured = std::chrono::steady_clock::now();
  ProtocolResult measurement =
      run_protocol(workload, backend, result.ops, job.mpi().world(), watchdog, po);
  result.measure_s = seconds_since(measured);
  result.samples = std::move(measurement.samples);
  return measurement;
}

Attrs point_stack(const JobContext& job, const PointResult& point) {
  Attrs stack = job.stack();
  if (!point.attention_plans.empty()) {
    std::string plans;
    for (const std::string& p : point.attention_plans)
      plans += (plans.empty() ? "" : "\n") + p;
    stack.emplace_back("cudnn_plans", plans);
  }
  return stack;
}

RunSummary summarize_point(JobContext& job, const OpTable& ops,
                           const std::vector<TimelineRecord>& rows) {
  MpiSession& mpi = job.mpi();
  RunSummary summary = summarize_run(mpi.world(), ops, rows);
  summary.nodes = summarize_nodes(mpi.world(), map_nodes(mpi.hosts()), mpi.hosts(), rows);
  return summary;
}

} // namespace ridgeline
