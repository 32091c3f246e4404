// `ridgeline run`: one configuration -> timed layers on every rank -> HDF5 file + summary.
// Also the small commands that share its plumbing: env, validate, report.
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <memory>

#include "app/build_info.hpp"
#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/config.hpp"
#include "app/fingerprint.hpp"
#include "app/run_file.hpp"
#include "app/summary.hpp"
#include "collectives/communicator.hpp"
#include "collectives/nccl_communicator.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "core/watchdog.hpp"
#include "models/cuda_backend.hpp"
#include "models/work_model.hpp"
#include "parallel/grid.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {
namespace {

constexpr double kCheckAutoLimitBytes = 2.0 * 1024 * 1024 * 1024;
// Rounds of the interleaved uninstrumented loops when a job compares strategies (the reported
// step, compute-only and communication-only times are medians over them); one strategy alone
// runs one round.
constexpr int kInterleavedRounds = 5;
int interleaved_rounds(size_t strategies) { return strategies > 1 ? kInterleavedRounds : 1; }

// Every rank's rows of a trivially copyable type on rank 0 (empty elsewhere); every rank calls.
template <class Row>
std::vector<std::vector<Row>> gather_rows(MPI_Comm comm, const std::vector<Row>& mine) {
  int rank = 0, size = 0;
  RIDGELINE_CHECK(MPI_Comm_rank(comm, &rank));
  RIDGELINE_CHECK(MPI_Comm_size(comm, &size));
  const size_t row = sizeof(Row);
  const size_t my_bytes = mine.size() * row;
  if (my_bytes > static_cast<size_t>(INT32_MAX))
    throw Error("a rank's " + std::to_string(mine.size()) + " rows are too many to gather");
  int bytes = static_cast<int>(my_bytes);
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  RIDGELINE_CHECK(MPI_Gather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  std::vector<std::vector<Row>> out;
  std::vector<char> all;
  if (rank == 0) {
    int64_t total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<size_t>(r)] = static_cast<int>(total);
      total += counts[static_cast<size_t>(r)];
    }
    if (total > INT32_MAX) throw Error("rows are too many to gather on rank 0");
    all.resize(static_cast<size_t>(total));
  }
  RIDGELINE_CHECK(MPI_Gatherv(mine.data(), bytes, MPI_BYTE, all.data(), counts.data(), displs.data(),
                              MPI_BYTE, 0, comm));
  if (rank == 0)
    for (int r = 0; r < size; ++r) {
      const auto* first = reinterpret_cast<const Row*>(all.data() + displs[static_cast<size_t>(r)]);
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

// The whole model (every layer) at TP=1, PP=1 from the same generated input, computed on the
// last stage's TP rank 0 of each data-parallel replica (empty elsewhere): comparing the last
// stage's output with it checks the TP shards, the collectives and the pipeline transfers.
std::vector<float> reference_output(Backend& backend, const StageSpec& spec, bool holder,
                                    int64_t all_layers) {
  if (!holder) return {};
  StageSpec ref_spec = spec;
  ref_spec.shape.tp = 1;
  ref_spec.shape.sequence_parallel = false;
  ref_spec.overlap = Overlap{};
  ref_spec.tp_rank = 0;
  ref_spec.first_layer = 0;
  ref_spec.num_layers = all_layers;
  OpTable scratch_ops;
  TpStage ref(backend, nullptr, ref_spec, scratch_ops);
  ref.fill_input(0);
  Recorder silent(backend.clock(), scratch_ops);
  silent.set_enabled(false);
  ref.forward(silent);
  return backend.to_host(ref.output());
}

// Every rank calls; the last stage's TP group gathers its output, the holder compares.
CheckOutcome check_output(MPI_Comm world, Backend& backend, TpStage& stage, bool last_stage,
                          const std::vector<float>& reference, bool enabled,
                          const std::string& why_not) {
  CheckOutcome c;
  c.tolerance = backend.dtype() == DType::f32 ? 1e-4 : 2e-2;
  if (!enabled) {
    c.status = "skipped: " + why_not;
    return c;
  }
  double err = 0;
  if (last_stage) {
    const std::vector<float> got = stage.gather_output();
    if (!reference.empty()) err = relative_l2(got, reference);
  }
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, world));
  c.max_rel_error = err;
  c.status = err <= c.tolerance ? "passed" : "failed";
  return c;
}

// Loop times of one strategy (per iteration, max over ranks).
struct LoopTimes {
  double instrumented_ns = 0;
  double plain_ns = 0;
  double compute_only_ns = 0;
  double comm_only_ns = 0;
};

// One strategy's results, on rank 0.
struct StrategyResult {
  std::string name;
  RunSummary summary;
  std::vector<std::vector<TimelineRecord>> timelines;
  LoopTimes loops;
  CheckOutcome check;
  Attrs gpu;  ///< NVML means over this strategy's loops (empty without samples)
};

// A stretch of the run on the samples' time base (ns since the sampler started).
struct Window {
  int64_t begin_ns = 0, end_ns = 0;
};

// NVML means over windows, averaged over every rank's GPU (every rank calls).
Attrs gpu_means(MPI_Comm comm, const std::vector<GpuSample>& samples,
                const std::vector<Window>& windows, const std::string& prefix) {
  double sums[4] = {0, 0, 0, 0};  // SM clock, power, power-capped samples, samples
  for (const GpuSample& s : samples)
    for (const Window& w : windows)
      if (s.t_ns >= w.begin_ns && s.t_ns <= w.end_ns && s.sm_clock_mhz >= 0) {
        sums[0] += static_cast<double>(s.sm_clock_mhz);
        sums[1] += s.power_w >= 0 ? s.power_w : s.power_avg_w;
        sums[2] += s.clock_event_reasons >= 0 && (s.clock_event_reasons & kClockEventPowerCap) ? 1 : 0;
        sums[3] += 1;
      }
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, 4, MPI_DOUBLE, MPI_SUM, comm));
  if (sums[3] == 0) return {};
  return {{prefix + ".sm_clock_mhz", sums[0] / sums[3]},
          {prefix + ".power_w", sums[1] / sums[3]},
          {prefix + ".power_capped_share", sums[2] / sums[3]},
          {prefix + ".samples", static_cast<int64_t>(sums[3])}};
}

// The samples as the /ranks/<r>/samples table.
Table samples_table(const std::vector<GpuSample>& samples) {
  std::vector<int64_t> t, sm, mem, reasons;
  std::vector<double> power, power_avg, temp;
  for (const GpuSample& s : samples) {
    t.push_back(s.t_ns);
    sm.push_back(s.sm_clock_mhz);
    mem.push_back(s.mem_clock_mhz);
    power.push_back(s.power_w);
    power_avg.push_back(s.power_avg_w);
    temp.push_back(s.temp_c);
    reasons.push_back(s.clock_event_reasons);
  }
  return {{"t_ns", t},           {"sm_clock_mhz", sm},   {"mem_clock_mhz", mem},
          {"power_w", power},    {"power_avg_w", power_avg}, {"temp_c", temp},
          {"clock_event_reasons", reasons}};
}

// The overlap metrics of one strategy (serialized: the `none` strategy's time when it ran,
// else compute-only + comm-only): exposed communication, overlap efficiency, interference,
// and the lane on the critical path.
Attrs overlap_attrs(const StrategyResult& r, double serialized_ns) {
  const LoopTimes& t = r.loops;
  double compute_in_step_ns = 0;
  for (const OpAggregate& a : r.summary.ops)
    if (a.lane == "compute") compute_in_step_ns += a.per_step_p50_ns;
  const double overlapped = std::min(t.compute_only_ns, t.comm_only_ns);
  return {{"overlap", r.name},
          {"step_ns", t.plain_ns},
          {"compute_only_ns", t.compute_only_ns},
          {"comm_only_ns", t.comm_only_ns},
          {"exposed_comm_ns", t.plain_ns - t.compute_only_ns},
          {"serialized_ns", serialized_ns},
          {"overlap_efficiency", overlapped > 0 ? (serialized_ns - t.plain_ns) / overlapped : 0.0},
          {"interference", t.compute_only_ns > 0 ? compute_in_step_ns / t.compute_only_ns : 0.0},
          {"bound", std::string(t.compute_only_ns >= t.comm_only_ns ? "compute" : "communication")}};
}

void print_overlap_table(std::ostream& out, const std::vector<StrategyResult>& results,
                         const std::vector<Attrs>& metrics) {
  char line[256];
  std::snprintf(line, sizeof(line), "%-12s %10s %10s %10s %10s %8s %8s %8s %-13s %s\n", "overlap",
                "step ms", "comp ms", "comm ms", "exposed", "eff", "interf", "vs none", "bound",
                "check");
  out << "\n" << line;
  double none_ns = 0;
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].name == "none") none_ns = results[i].loops.plain_ns;
  for (size_t i = 0; i < results.size(); ++i) {
    auto num = [&](const char* key) { return std::get<double>(*find_attr(metrics[i], key)); };
    const LoopTimes& t = results[i].loops;
    std::snprintf(line, sizeof(line), "%-12s %10.4f %10.4f %10.4f %10.4f %8.3f %8.3f %8s %-13s %s\n",
                  results[i].name.c_str(), t.plain_ns / 1e6, t.compute_only_ns / 1e6,
                  t.comm_only_ns / 1e6, num("exposed_comm_ns") / 1e6, num("overlap_efficiency"),
                  num("interference"),
                  none_ns > 0 ? std::to_string(t.plain_ns / none_ns).substr(0, 5).c_str() : "-",
                  std::get<std::string>(*find_attr(metrics[i], "bound")).c_str(),
                  results[i].check.status.c_str());
    out << line;
  }
  out << "step, comp(ute-only), comm(-only): uninstrumented per-iteration means (max over ranks), "
         "median of " << interleaved_rounds(results.size())
      << " round(s) in which the strategies take turns; "
         "exposed = step - compute-only; eff = (serialized - step) / min(comp, comm); interf = "
         "compute time in the overlapped step / compute-only time\n";
}

// SM clock, power and power-capped share per strategy and loop (NVML means over every rank).
void print_gpu_table(std::ostream& out, const std::vector<StrategyResult>& results, int sample_ms) {
  const char* const loops[] = {"instrumented", "step", "compute_only", "comm_only"};
  bool any = false;
  for (const StrategyResult& r : results) any = any || !r.gpu.empty();
  if (!any) return;
  out << "\ngpu (NVML every " << sample_ms
      << " ms, mean of all ranks): SM MHz / W / share of samples power-capped\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%-12s %-22s %-22s %-22s %-22s\n", "overlap", loops[0], loops[1],
                loops[2], loops[3]);
  out << line;
  for (const StrategyResult& r : results) {
    std::string cells[4];
    for (int i = 0; i < 4; ++i) {
      const std::string key = std::string("gpu.") + loops[i];
      const AttrValue* mhz = find_attr(r.gpu, key + ".sm_clock_mhz");
      if (mhz == nullptr) continue;
      char cell[64];
      std::snprintf(cell, sizeof(cell), "%4.0f / %3.0f / %3.0f%%", std::get<double>(*mhz),
                    std::get<double>(*find_attr(r.gpu, key + ".power_w")),
                    100 * std::get<double>(*find_attr(r.gpu, key + ".power_capped_share")));
      cells[i] = cell;
    }
    std::snprintf(line, sizeof(line), "%-12s %-22s %-22s %-22s %-22s\n", r.name.c_str(),
                  cells[0].c_str(), cells[1].c_str(), cells[2].c_str(), cells[3].c_str());
    out << line;
  }
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
  if (reject_if_any(ctx, "invalid configuration", problems)) return 2;

  const ModelSpec model = model_spec(cfg);
  const LayerShape shape = layer_shape(cfg);
  const std::vector<std::string> strategies = overlap_list(cfg);
  const int64_t stage_layers = cfg.layers / cfg.pp;
  const int device = want_cuda ? mpi.local_rank() % std::max(1, gpus) : -1;

  // Memory: this stage, plus the TP=1 reference model when checking, against the smallest
  // free memory of any rank, before anything is allocated.
  LayerShape tp1 = shape;
  tp1.tp = 1;
  tp1.sequence_parallel = false;
  const double ref_bytes = stage_memory_bytes(model, tp1, cfg.layers);
  const bool check_possible = cfg.tp > 1 || cfg.pp > 1;
  int64_t free_bytes = want_cuda ? query_gpu(device).memory_free_bytes : available_host_bytes(mpi.local_size());
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &free_bytes, 1, MPI_INT64_T, MPI_MIN, mpi.world()));
  // auto: check whenever the reference fits comfortably (2 GiB of host memory, a quarter of
  // the smallest free GPU memory).
  const double auto_limit =
      want_cuda && free_bytes > 0 ? static_cast<double>(free_bytes) / 4 : kCheckAutoLimitBytes;
  const bool check = check_possible && (cfg.check == "on" || (cfg.check == "auto" && ref_bytes <= auto_limit));
  const double need = stage_memory_bytes(model, shape, stage_layers) + (check ? ref_bytes : 0.0);
  if (free_bytes >= 0 && need > 0.9 * static_cast<double>(free_bytes)) {
    char msg[256];
    std::snprintf(msg, sizeof(msg),
                  "needs about %.2f GiB per rank (weights, caches, activations%s) but the smallest "
                  "free memory of any rank is %.2f GiB",
                  need / 1073741824.0, check ? ", TP=1 check" : "", static_cast<double>(free_bytes) / 1073741824.0);
    reject_if_any(ctx, "configuration does not fit in memory", {msg});
    return 2;
  }

  if (cfg.out.empty()) {
    mkdir("results", 0755);
    cfg.out = broadcast_string(mpi.world(), "results/ridgeline-" + utc_now("%Y%m%dT%H%M%SZ") + ".h5", 0);
  }

  Watchdog watchdog(cfg.timeout_s, "creating communicators and allocating weights");
  ProcessGrid grid(mpi.world(), cfg.tp, cfg.pp, cfg.dp);
  const GridCoords& gc = grid.coords();
  // Communicators are declared first so that they are destroyed last: NCCL communicators must
  // outlive the CUDA graphs (owned by the backend) that captured their collectives.
  std::unique_ptr<Communicator> tp_comm, pp_comm;
  std::unique_ptr<Backend> backend =
      want_cuda ? make_cuda_backend(device, parse_dtype(cfg.dtype), cfg.comm_priority == "high")
                : make_host_backend();
  NcclOptions nccl;
  nccl.max_ctas = cfg.nccl_max_ctas;
  nccl.min_ctas = cfg.nccl_min_ctas;
  auto make_comm = [&](MPI_Comm c) {
    return want_cuda ? make_nccl_communicator(c, nccl) : make_mpi_communicator(c);
  };
  if (cfg.tp > 1) tp_comm = make_comm(grid.tp_comm());
  if (cfg.pp > 1) pp_comm = make_comm(grid.pp_comm());

  StageSpec spec;
  spec.model = model;
  spec.shape = shape;
  spec.attention = cfg.attention == "naive" ? AttentionImpl::naive : AttentionImpl::fused;
  spec.tp_rank = gc.tp_rank;
  spec.first_layer = gc.pp_rank * stage_layers;
  spec.num_layers = stage_layers;
  spec.seed = cfg.seed;
  spec.overlap_gemm_sms = cfg.overlap_gemm_sms;
  const bool last_stage = gc.pp_rank == cfg.pp - 1;
  watchdog.rearm("computing the TP=1 reference output");
  const std::vector<float> reference =
      check ? reference_output(*backend, spec, last_stage && gc.tp_rank == 0, cfg.layers)
            : std::vector<float>{};
  const std::string why_not =
      check_possible ? "--check " + cfg.check + " (the TP=1 reference model needs " +
                           std::to_string(static_cast<int64_t>(ref_bytes / 1048576)) + " MiB)"
                     : "tp=1 and pp=1: the run is itself the reference";

  OpTable ops;
  spec.overlap = parse_overlap(strategies.front());
  TpStage stage(*backend, tp_comm.get(), spec, ops);
  const int64_t stream_tokens = stage.input().rows;
  const double act_bytes = static_cast<double>(stream_tokens * model.hidden * static_cast<int64_t>(dtype_size(shape.dtype)));
  const OpCost p2p_cost{0, act_bytes, act_bytes};
  const int32_t recv_id = ops.intern(op::recv_act, OpKind::p2p);
  const int32_t send_id = ops.intern(op::send_act, OpKind::p2p);
  const int32_t graph_op = cfg.graphs ? ops.intern("stage_graph", OpKind::other) : -1;
  OpCost graph_cost;
  for (const OpSpec& o : stage.op_specs()) {
    graph_cost.flops += o.cost.flops * static_cast<double>(stage_layers);
    graph_cost.hbm_bytes += o.cost.hbm_bytes * static_cast<double>(stage_layers);
    graph_cost.comm_bytes += o.cost.comm_bytes * static_cast<double>(stage_layers);
  }
  const Stream compute = backend->stream(Lane::compute);
  // NVML samples of this rank's GPU through every loop: clocks that fall under the power cap
  // explain differences between loops that the FLOPs and bytes do not.
  std::unique_ptr<GpuSampler> sampler;
  if (want_cuda && cfg.sample_ms > 0) sampler = std::make_unique<GpuSampler>(device, cfg.sample_ms);
  std::vector<int64_t> epochs;              // sampler time of each strategy's clock epoch
  std::vector<Window> instrumented_windows;  // per strategy

  std::vector<StrategyResult> results;
  std::vector<TpStage::GemmProbe> probes;
  std::vector<double> probe_ns;
  std::vector<int> graphs(strategies.size(), -1);
  std::vector<std::vector<GpuSample>> rank_samples;  // rank 0: every rank's NVML samples
  // One step of this rank: every microbatch through the stage (or the replay of its graph),
  // with pipeline transfers.
  auto run_step = [&](Recorder& rec, int graph) {
    for (int64_t mb = 0; mb < cfg.microbatches; ++mb) {
      rec.set_microbatch(static_cast<int32_t>(mb));
      if (gc.pp_rank > 0) {
        ScopedOp s(rec, recv_id, static_cast<int32_t>(spec.first_layer), Lane::p2p, p2p_cost, Lane::compute);
        const Tensor in = stage.input();
        pp_comm->recv(in.data, static_cast<size_t>(in.elements()), in.dtype, gc.pp_rank - 1, compute);
        pp_comm->complete(compute);
      }
      if (graph >= 0) {
        ScopedOp s(rec, graph_op, static_cast<int32_t>(spec.first_layer), Lane::compute, graph_cost,
                   Lane::compute);
        backend->replay(graph, Lane::compute);
      } else {
        stage.forward(rec);
      }
      if (gc.pp_rank < cfg.pp - 1) {
        ScopedOp s(rec, send_id, static_cast<int32_t>(spec.first_layer + stage_layers - 1), Lane::p2p,
                   p2p_cost, Lane::compute);
        const Tensor out = stage.output();
        pp_comm->send(out.data, static_cast<size_t>(out.elements()), out.dtype, gc.pp_rank + 1, compute);
        pp_comm->complete(compute);
      }
    }
  };
  // A loop of `iters` steps bracketed by two marks, for the loop-level times.
  auto timed_loop = [&](Recorder& rec, int graph, StageMode mode, const std::string& what) {
    watchdog.rearm(what);
    stage.set_mode(mode);
    const size_t start = rec.mark(Lane::compute);
    for (int it = 0; it < cfg.iters; ++it) run_step(rec, graph);
    const size_t end = rec.mark(Lane::compute);
    stage.set_mode(StageMode::full);
    return std::make_pair(start, end);
  };
  auto per_iter = [&](const Recorder& rec, std::pair<size_t, size_t> m) {
    return static_cast<double>(rec.mark_ns(m.second) - rec.mark_ns(m.first)) / cfg.iters;
  };

  for (size_t si = 0; si < strategies.size(); ++si) {
    const std::string& strategy = strategies[si];
    stage.set_overlap(parse_overlap(strategy));
    // Under sequence parallelism a rank's rows depend on the strategy's chunking: refill.
    if (gc.pp_rank == 0) stage.fill_input(0);
    Recorder rec(backend->clock(), ops);
    if (cfg.graphs) {
      // The stage's kernels and collectives captured once; each step is then one replay, and
      // the timeline holds one op per step (per-op times need eager execution).
      Recorder silent(backend->clock(), ops);
      silent.set_enabled(false);
      backend->capture_begin(Lane::compute);
      stage.forward(silent);
      graphs[si] = backend->capture_end(Lane::compute);
    }
    backend->synchronize();
    RIDGELINE_CHECK(MPI_Barrier(mpi.world()));
    backend->clock().start_epoch();
    epochs.push_back(sampler ? sampler->now_ns() : 0);
    size_t timed_start = 0;
    for (int it = 0; it < cfg.warmup + cfg.iters; ++it) {
      watchdog.rearm("iteration " + std::to_string(it) + " of " + strategy +
                     " (a collective or pipeline transfer is waiting)");
      if (it == cfg.warmup) timed_start = rec.mark(Lane::compute);
      rec.set_iteration(it, it < cfg.warmup);
      run_step(rec, graphs[si]);
    }
    const size_t timed_end = rec.mark(Lane::compute);
    if (results.empty()) {
      watchdog.rearm("standalone GEMM probes");
      probes = stage.probe_gemms(rec, 2, want_cuda ? 20 : 2);
    }
    watchdog.rearm("waiting for the device to finish " + strategy);
    backend->synchronize();
    rec.flush();
    instrumented_windows.push_back(
        {epochs.back() + rec.mark_ns(timed_start), epochs.back() + rec.mark_ns(timed_end)});

    std::vector<double> loop_ns = {per_iter(rec, {timed_start, timed_end})};
    if (probe_ns.empty())
      for (const TpStage::GemmProbe& p : probes)
        loop_ns.push_back(static_cast<double>(rec.mark_ns(p.end_mark) - rec.mark_ns(p.start_mark)) / p.reps);
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, loop_ns.data(), static_cast<int>(loop_ns.size()),
                                  MPI_DOUBLE, MPI_MAX, mpi.world()));
    if (probe_ns.empty()) probe_ns.assign(loop_ns.begin() + 1, loop_ns.end());

    watchdog.rearm("checking " + strategy + " and gathering timelines");
    StrategyResult r;
    r.name = strategy;
    r.loops.instrumented_ns = loop_ns[0];
    r.check = check_output(mpi.world(), *backend, stage, last_stage, reference, check, why_not);
    r.timelines = gather_rows(mpi.world(), rec.records());
    if (mpi.rank() == 0) r.summary = summarize_run(ops, r.timelines);
    results.push_back(std::move(r));
  }

  // The same steps without per-op stamps (the instrumentation's own cost), then each lane alone:
  // compute with collectives skipped, collectives with compute skipped (eager only: a graph
  // replays what it captured). Strategies take turns round by round, so that a drift of clocks
  // or temperature during the job falls on every strategy alike; each time is the median over
  // the rounds.
  {
    std::vector<StageMode> modes = {StageMode::full};
    if (!cfg.graphs) modes.insert(modes.end(), {StageMode::compute_only, StageMode::comm_only});
    Recorder quiet(backend->clock(), ops);
    quiet.set_enabled(false);
    backend->synchronize();
    RIDGELINE_CHECK(MPI_Barrier(mpi.world()));
    std::vector<std::pair<size_t, size_t>> marks;  // [round][strategy][mode]
    const int rounds = interleaved_rounds(strategies.size());
    auto slot = [&](int round, size_t si, size_t mode) {
      return (static_cast<size_t>(round) * strategies.size() + si) * modes.size() + mode;
    };
    for (int round = 0; round < rounds; ++round)
      for (size_t si = 0; si < strategies.size(); ++si) {
        stage.set_overlap(parse_overlap(strategies[si]));
        for (StageMode mode : modes)
          marks.push_back(timed_loop(quiet, graphs[si], mode,
                                     "uninstrumented iterations (" + strategies[si] + ", round " +
                                         std::to_string(round) + ")"));
      }
    watchdog.rearm("waiting for the device to finish the uninstrumented rounds");
    backend->synchronize();
    quiet.flush();
    std::vector<double> ns;
    for (const auto& m : marks) ns.push_back(per_iter(quiet, m));
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, ns.data(), static_cast<int>(ns.size()), MPI_DOUBLE,
                                  MPI_MAX, mpi.world()));
    auto median_of = [&](size_t si, size_t mode) {
      std::vector<double> per_round;
      for (int round = 0; round < rounds; ++round)
        per_round.push_back(ns[slot(round, si, mode)]);
      return percentile(per_round, 50);
    };
    for (size_t si = 0; si < results.size(); ++si) {
      LoopTimes& t = results[si].loops;
      t.plain_ns = median_of(si, 0);
      if (modes.size() == 3) {
        t.compute_only_ns = median_of(si, 1);
        t.comm_only_ns = median_of(si, 2);
      }
    }
    // The rounds' marks count from the last strategy's epoch.
    const std::vector<GpuSample> samples = sampler ? sampler->stop() : std::vector<GpuSample>{};
    const char* const mode_names[] = {"step", "compute_only", "comm_only"};
    for (size_t si = 0; si < results.size(); ++si) {
      Attrs& gpu = results[si].gpu;
      gpu = gpu_means(mpi.world(), samples, {instrumented_windows[si]}, "gpu.instrumented");
      for (size_t mode = 0; mode < modes.size(); ++mode) {
        std::vector<Window> windows;
        for (int round = 0; round < rounds; ++round) {
          const auto& m = marks[slot(round, si, mode)];
          windows.push_back({epochs.back() + quiet.mark_ns(m.first), epochs.back() + quiet.mark_ns(m.second)});
        }
        for (auto& kv : gpu_means(mpi.world(), samples, windows, std::string("gpu.") + mode_names[mode]))
          gpu.push_back(std::move(kv));
      }
      if (!gpu.empty()) gpu.emplace_back("gpu.epoch_offset_ns", epochs[si] - epochs.front());
    }
    // Each rank's samples on the first strategy's epoch, like the file's top-level timelines.
    std::vector<GpuSample> mine = samples;
    for (GpuSample& s : mine) s.t_ns -= epochs.front();
    rank_samples = gather_rows(mpi.world(), mine);
  }

  RunData data;
  data.root = {{"schema_version", kSchemaVersion},
               {"ridgeline_version", std::string(build::version)},
               {"git_sha", std::string(build::git_sha)},
               {"created_utc", utc_now("%Y-%m-%dT%H:%M:%SZ")},
               {"argv", join(ctx.argv, " ")},
               {"world_size", static_cast<int64_t>(mpi.size())},
               {"command", std::string("run")}};
  data.stack = stack_attrs();
  data.stack.emplace_back("clock", std::string(backend->clock().name()));
  if (const std::string links = link_matrix_text(); !links.empty())
    data.stack.emplace_back("gpu_link_matrix", links);
  data.env = performance_env();
  data.config = config_attrs(cfg);
  const Attrs coords = {{"tp_rank", static_cast<int64_t>(gc.tp_rank)},
                        {"pp_rank", static_cast<int64_t>(gc.pp_rank)},
                        {"dp_rank", static_cast<int64_t>(gc.dp_rank)}};
  data.topology = gather_attrs(mpi.world(), rank_topology(mpi, cfg.backend, device, coords));
  int ok = 1;
  if (mpi.rank() == 0) {
    double serialized_ns = results.front().loops.compute_only_ns + results.front().loops.comm_only_ns;
    for (const StrategyResult& r : results)
      if (r.name == "none") serialized_ns = r.loops.plain_ns;
    std::vector<Attrs> metrics;
    for (StrategyResult& r : results) {
      metrics.push_back(overlap_attrs(r, serialized_ns));
      Attrs& a = r.summary.attrs;
      a = {{"check", r.check.status},
           {"check_max_rel_error", r.check.max_rel_error},
           {"check_tolerance", r.check.tolerance},
           {"instrumented_step_ns", r.loops.instrumented_ns},
           {"uninstrumented_step_ns", r.loops.plain_ns},
           {"instrumentation_overhead", r.loops.instrumented_ns / r.loops.plain_ns - 1.0}};
      if (!cfg.graphs)
        for (const auto& kv : metrics.back())
          if (kv.first != "step_ns") a.push_back(kv);
      a.insert(a.end(), r.gpu.begin(), r.gpu.end());
      for (size_t i = 0; i < probes.size(); ++i) {
        const double ref_tflops = probes[i].flops / probe_ns[i] / 1e3;
        a.emplace_back("gemm_reference_tflops." + probes[i].op, ref_tflops);
        for (const OpAggregate& op : r.summary.ops)
          if (op.name == probes[i].op && ref_tflops > 0)
            a.emplace_back("gemm_vs_reference." + op.name, op.achieved_tflops / ref_tflops);
      }
      if (r.check.status == "failed") ok = 0;
    }
    data.ops = ops;
    data.timelines = results.front().timelines;
    data.summary = results.front().summary;
    if (results.size() > 1)
      for (const StrategyResult& r : results) {
        RunData::Point point;
        point.config = data.config;
        point.config.emplace_back("strategy", r.name);
        point.ops = ops;
        point.timelines = r.timelines;
        point.summary = r.summary;
        data.points.push_back(std::move(point));
      }
    for (size_t rank = 0; rank < rank_samples.size(); ++rank)
      if (!rank_samples[rank].empty())
        data.tables.push_back({"/ranks/" + std::to_string(rank) + "/samples",
                               samples_table(rank_samples[rank]),
                               {{"period_ms", static_cast<int64_t>(cfg.sample_ms)}}});
    write_run_file(cfg.out, data);
    for (const StrategyResult& r : results) {
      RunData shown = data;
      shown.summary = r.summary;
      if (results.size() > 1) std::cout << "\n== overlap " << r.name << "\n";
      print_report(std::cout, shown);
    }
    if (!cfg.graphs && (results.size() > 1 || cfg.tp > 1)) print_overlap_table(std::cout, results, metrics);
    print_gpu_table(std::cout, results, cfg.sample_ms);
    std::cout << "wrote " << cfg.out << "\n";
    for (const StrategyResult& r : results)
      if (r.check.status == "failed")
        std::cerr << "ridgeline: check FAILED for overlap " << r.name << ": relative L2 error "
                  << r.check.max_rel_error << " exceeds the tolerance " << r.check.tolerance
                  << " (tp=" << cfg.tp << " pp=" << cfg.pp
                  << " output vs the whole model recomputed at TP=1)\n";
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
