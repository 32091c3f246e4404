// Scheduled pipeline points (see train_point.hpp).
#include "app/train_point.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "app/attribution.hpp"
#include "app/summary.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/ranges.hpp"
#include "core/stats.hpp"
#include "models/work_model.hpp"
#include "parallel/schedule.hpp"
#include "parallel/tp_layer.hpp"
#include "parallel/train_stage.hpp"

namespace ridgeline {
namespace {

// Rows [r0, r0 + nr) and columns [c0, c0 + nc) of a row-major host matrix of `cols` columns.
std::vector<float> block(const std::vector<float>& full, int64_t cols, int64_t r0, int64_t nr,
                         int64_t c0, int64_t nc) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(nr * nc));
  for (int64_t r = r0; r < r0 + nr; ++r)
    for (int64_t c = c0; c < c0 + nc; ++c)
      out.push_back(full[static_cast<size_t>(r * cols + c)]);
  return out;
}

// Appends rows of `b` below `a` (same columns).
std::vector<float> stacked(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// What the whole model, one rank, computes from the same inputs: per layer, its parameter
// gradients summed over every replica's microbatches (host copies, as the TP=1 tensors), and
// the model's input gradient and output per global microbatch.
struct Reference {
  std::vector<std::vector<std::vector<float>>> grads; ///< [layer][tensor]
  std::vector<std::vector<float>> input_grads;        ///< [global microbatch]
  std::vector<std::vector<float>> outputs;            ///< [global microbatch]
};

Reference compute_reference(Backend& backend, const TrainSpec& spec, int64_t layers,
                            int64_t global_mbs, bool train) {
  const ranges::Scope range(kReferenceRange);
  TrainSpec ref = spec;
  ref.shape.tp = 1;
  ref.async_comm = false;
  ref.tp_rank = 0;
  ref.recompute = false;
  ref.chunks = {{0, layers}};
  OpTable scratch;
  TrainStage stage(backend, nullptr, ref, scratch);
  Recorder silent(backend.clock(), scratch);
  silent.set_enabled(false);
  Reference out;
  stage.begin_iteration(silent, static_cast<int>(global_mbs));
  for (int64_t g = 0; g < global_mbs; ++g) {
    stage.fill_input(0, 0, g);
    stage.forward(silent, 0, 0);
    out.outputs.push_back(backend.to_host(stage.activation_out(0, 0)));
    if (train) {
      stage.fill_grad_output(0, 0, g);
      stage.backward(silent, 0, 0);
      out.input_grads.push_back(backend.to_host(stage.gradient_out(0, 0)));
    }
    stage.release(0, 0);
  }
  if (train)
    for (size_t l = 0; l < stage.local_layers(); ++l) {
      const LayerGrads& g = stage.grads(l);
      std::vector<std::vector<float>> tensors;
      for (const Tensor* t :
           {&g.ln1_gamma, &g.ln1_beta, &g.ln2_gamma, &g.ln2_beta, &g.wqkv, &g.wo, &g.w1, &g.w2})
        tensors.push_back(backend.to_host(*t));
      out.grads.push_back(std::move(tensors));
    }
  backend.synchronize();
  return out;
}

// Whether `a` is the last action on its (microbatch, chunk)'s activation set: the forward in
// prefill, the backward or backward_weight in training.
bool last_use(const Action& a, bool train) {
  return (!train && a.kind == ActionKind::forward) || a.kind == ActionKind::backward ||
         a.kind == ActionKind::backward_weight;
}

// How ScheduledWorkload::step() runs a program, read from the program alone. Exchanges are
// posted on the p2p lane without the compute waiting; an action first waits for the exchange
// carrying its receive. A stage's exchanges run in order on its lane, so a wait for one covers
// every earlier one. An activation set (microbatch, chunk) is taken by its first transfer or
// action and given back after the step where its last action has run (last_use()), all its
// sends are posted, and the compute has waited for an exchange at or after its last send.
struct ProgramPlan {
  std::vector<int> wait_for; ///< per step: the exchange (step) its action waits for, or -1
  std::vector<std::vector<std::pair<int, int>>> release_after; ///< per step
  std::vector<std::pair<int, int>> release_at_end;             ///< after the last wait
  std::set<int> waited;                                        ///< exchanges some action waits for
  std::vector<int> sets; ///< per chunk: the most sets held at once
};

ProgramPlan plan_program(const std::vector<Step>& program, int chunks, bool train) {
  using Set = std::pair<int, int>;
  ProgramPlan plan;
  plan.wait_for = input_exchanges(program);
  plan.release_after.resize(program.size());
  plan.sets.assign(static_cast<size_t>(chunks), 0);
  for (int j : plan.wait_for)
    if (j >= 0) plan.waited.insert(j);
  std::map<Set, int> sends_left, last_send;
  for (const Step& st : program)
    for (const Transfer& x : st.exchange)
      if (x.send) ++sends_left[{x.microbatch, x.chunk}];
  std::vector<int> live(static_cast<size_t>(chunks), 0);
  std::set<Set> held;
  std::vector<Set> finished;
  int covered = -1; // every exchange up to this step has finished
  auto take = [&](const Set& set) {
    if (!held.insert(set).second) return;
    int& n = live[static_cast<size_t>(set.second)];
    plan.sets[static_cast<size_t>(set.second)] =
        std::max(plan.sets[static_cast<size_t>(set.second)], ++n);
  };
  for (size_t i = 0; i < program.size(); ++i) {
    const Step& st = program[i];
    for (const Transfer& x : st.exchange) {
      take({x.microbatch, x.chunk});
      if (x.send) {
        --sends_left[{x.microbatch, x.chunk}];
        last_send[{x.microbatch, x.chunk}] = static_cast<int>(i);
      }
    }
    if (st.action) {
      const Action& a = *st.action;
      covered = std::max(covered, plan.wait_for[i]);
      take({a.microbatch, a.chunk});
      if (last_use(a, train)) finished.emplace_back(a.microbatch, a.chunk);
    }
    for (auto it = finished.begin(); it != finished.end();) {
      const auto sent = last_send.find(*it);
      if (sends_left[*it] == 0 && (sent == last_send.end() || sent->second <= covered)) {
        plan.release_after[i].push_back(*it);
        held.erase(*it);
        --live[static_cast<size_t>(it->second)];
        it = finished.erase(it);
      } else {
        ++it;
      }
    }
  }
  plan.release_at_end = finished;
  return plan;
}

class ScheduledWorkload final : public Workload {
public:
  ScheduledWorkload(const RunConfig& cfg, Backend& backend, GridComms& comms, TrainStage& stage,
                    OpTable& ops, const std::vector<Variant>& variants, const Schedule& schedule,
                    const ActionCosts& costs, const TrainSpec& spec, bool train)
      : m_cfg(cfg), m_backend(backend), m_comms(comms), m_stage(stage), m_ops(ops),
        m_variants(variants), m_train(train) {
    const GridCoords& gc = comms.grid->coords();
    m_stage_index = gc.pp_rank;
    m_mbs = static_cast<int>(cfg.microbatches);
    m_program = stage_program(schedule, gc.pp_rank, cfg.pp, m_mbs, train, costs);
    m_plan = plan_program(m_program, stage.chunks(), train);
    m_has_exchanges = std::any_of(m_program.begin(), m_program.end(),
                                  [](const Step& st) { return !st.exchange.empty(); });
    m_exchange_tags.assign(m_program.size(), 0);
    m_held_fences.assign(m_program.size(), SIZE_MAX);
    // Every activation set the program holds at once, allocated now: a device allocation
    // inside an iteration serialises the GPU behind the NCCL transfers in flight, and with
    // transfers larger than NCCL's buffers (each waits for its peer) GPipe and zb-h1 stalled
    // on two GPUs in their first iteration.
    for (int c = 0; c < stage.chunks(); ++c)
      stage.reserve(c, m_plan.sets[static_cast<size_t>(c)]);
    m_exchange_id = ops.intern(op::pp_exchange, OpKind::p2p);
    m_wait_id = ops.intern(op::pp_wait, OpKind::p2p);
    m_flush_id = ops.intern(op::pp_flush, OpKind::collective);
    // The first virtual stage's inputs and the last one's loss gradients, one per microbatch,
    // generated once (copies into the activation sets are part of the step).
    // Under sequence parallelism a rank holds, and the pipeline passes, its own rows of the
    // stream only.
    const DType dt = backend.dtype();
    const int64_t t = stage.geometry().stream_tokens, h = stage.geometry().hidden;
    m_act_bytes = static_cast<double>(t * h) * static_cast<double>(dtype_size(dt));
    for (int mb = 0; mb < m_mbs; ++mb) {
      const int64_t global = static_cast<int64_t>(gc.dp_rank) * m_mbs + mb;
      const int64_t row = stage.first_row(global);
      if (gc.pp_rank == 0) {
        m_inputs.push_back(backend.allocate(t, h));
        backend.fill_random(m_inputs.back().view(t, h, dt),
                            GenKey{spec.seed, tensor_id(-1, role_input), h, 1.0f}, row, 0);
      }
      if (train && gc.pp_rank == cfg.pp - 1) {
        m_grads.push_back(backend.allocate(t, h));
        backend.fill_random(m_grads.back().view(t, h, dt),
                            GenKey{spec.seed, tensor_id(-1, role_grad_output), h, 1.0f}, row, 0);
      }
    }
    DataParallel dp;
    dp.comm = comms.dp.get();
    dp.bucket_bytes = static_cast<size_t>(cfg.bucket_mb * 1048576.0);
    dp.overlap = cfg.dp_overlap == "on";
    dp.shard = cfg.dp_shard;
    stage.set_data_parallel(dp);
  }

  size_t strategies() const override { return m_variants.size(); }
  std::string strategy_name(size_t s) const override { return m_variants[s].name; }
  bool lane_modes() const override { return false; }
  void select(size_t s) override {
    m_stage.set_variant(m_variants[s].attention, m_variants[s].overlap == "async");
  }
  void set_mode(Mode) override {}

  void step(Recorder& rec) override {
    if (m_train) m_stage.begin_iteration(rec, m_mbs);
    const int last_chunk = m_stage.chunks() - 1;
    const bool first_stage = m_stage_index == 0, last_stage = m_stage_index == m_cfg.pp - 1;
    m_covered = -1;
    for (size_t i = 0; i < m_program.size(); ++i) {
      const Step& st = m_program[i];
      if (!st.exchange.empty()) {
        post(rec, i, st.exchange);
      } else {
        if (m_plan.wait_for[i] >= 0) wait(rec, m_plan.wait_for[i]);
        run(rec, *st.action, first_stage, last_stage, last_chunk);
      }
      for (const auto& [mb, chunk] : m_plan.release_after[i])
        m_stage.release(mb, chunk);
    }
    wait(rec, static_cast<int>(m_program.size()));
    for (const auto& [mb, chunk] : m_plan.release_at_end)
      m_stage.release(mb, chunk);
    flush(rec);
    if (m_train)
      m_stage.end_iteration(rec, static_cast<float>(m_cfg.sgd_lr), m_capture && m_cfg.dp_shard);
  }

  /// Runs one more iteration that keeps what the check compares (untimed, unrecorded).
  void capture() {
    m_capture = true;
    m_outputs.assign(static_cast<size_t>(m_mbs), {});
    m_input_grads.assign(static_cast<size_t>(m_mbs), {});
    Recorder silent(m_backend.clock(), m_ops);
    silent.set_enabled(false);
    step(silent);
    m_backend.synchronize();
    m_capture = false;
  }
  const std::vector<std::vector<float>>& outputs() const { return m_outputs; }
  const std::vector<std::vector<float>>& input_grads() const { return m_input_grads; }

private:
  // One action of the program on the stage (with the model's input on the first virtual stage
  // and the loss gradient on the last one copied in first).
  void run(Recorder& rec, const Action& a, bool first_stage, bool last_stage, int last_chunk) {
    const int64_t t = m_stage.geometry().stream_tokens, h = m_stage.geometry().hidden;
    const DType dt = m_backend.dtype();
    const size_t mb = static_cast<size_t>(a.microbatch);
    switch (a.kind) {
    case ActionKind::forward:
      if (first_stage && a.chunk == 0)
        m_backend.copy(m_inputs[mb].view(t, h, dt), m_stage.activation_in(a.microbatch, 0));
      m_stage.forward(rec, a.microbatch, a.chunk);
      if (!m_train && last_stage && a.chunk == last_chunk && m_capture)
        m_outputs[mb] = m_backend.to_host(m_stage.activation_out(a.microbatch, a.chunk));
      break;
    case ActionKind::backward:
    case ActionKind::backward_input:
      if (last_stage && a.chunk == last_chunk)
        m_backend.copy(m_grads[mb].view(t, h, dt), m_stage.gradient_in(a.microbatch, a.chunk));
      if (a.kind == ActionKind::backward)
        m_stage.backward(rec, a.microbatch, a.chunk);
      else
        m_stage.backward_input(rec, a.microbatch, a.chunk);
      if (m_capture && first_stage && a.chunk == 0)
        m_input_grads[mb] = m_backend.to_host(m_stage.gradient_out(a.microbatch, 0));
      break;
    case ActionKind::backward_weight:
      m_stage.backward_weight(rec, a.microbatch, a.chunk);
      break;
    }
  }

  // Exchange `step`: its transfers posted together (a group) on the p2p lane once the compute
  // reached it, recorded as one p2p op (on GPUs its time on the lane; on the host, MPI's
  // non-blocking posts). The compute does not wait for it here (wait()).
  void post(Recorder& rec, size_t step, const std::vector<Transfer>& transfers) {
    Communicator& pp = *m_comms.pp;
    m_backend.wait_fence(Lane::p2p, m_backend.fence(Lane::compute));
    const double bytes = m_act_bytes * static_cast<double>(transfers.size());
    const ranges::Scope range(op::pp_exchange);
    const size_t handle =
        rec.begin(m_exchange_id, -1, Lane::p2p, OpCost{0, bytes, bytes}, Lane::p2p);
    // NCCL orders the exchanges on the p2p stream; MPI's requests of each exchange are kept
    // apart (a tag per step) so that a wait completes this exchange and the earlier ones only.
    const Stream stream =
        pp.stream_ordered() ? m_backend.stream(Lane::p2p) : Stream{&m_exchange_tags[step]};
    pp.group_start();
    for (const Transfer& x : transfers) {
      const Tensor t = x.gradient ? (x.send ? m_stage.gradient_out(x.microbatch, x.chunk)
                                            : m_stage.gradient_in(x.microbatch, x.chunk))
                                  : (x.send ? m_stage.activation_out(x.microbatch, x.chunk)
                                            : m_stage.activation_in(x.microbatch, x.chunk));
      if (x.send)
        pp.send(t.data, static_cast<size_t>(t.elements()), t.dtype, x.peer_stage, stream);
      else
        pp.recv(t.data, static_cast<size_t>(t.elements()), t.dtype, x.peer_stage, stream);
    }
    pp.group_end();
    rec.end(handle);
    if (pp.stream_ordered() && m_plan.waited.count(static_cast<int>(step)))
      m_held_fences[step] = m_backend.hold_fence(Lane::p2p);
  }

  // The compute waits until exchange `step` and every earlier one have finished (all of them
  // when `step` is the program's size), recorded as a pp_wait op on the compute queue: its time
  // is the time the stage's compute stood still for its peers.
  void wait(Recorder& rec, int step) {
    if (step <= m_covered || !m_has_exchanges) return;
    Communicator& pp = *m_comms.pp;
    const ScopedOp scope(rec, m_wait_id, -1, Lane::p2p, OpCost{}, Lane::compute);
    const size_t last = std::min(static_cast<size_t>(step), m_program.size() - 1);
    if (pp.stream_ordered()) {
      const bool all = static_cast<size_t>(step) >= m_program.size();
      m_backend.wait_fence(Lane::compute, all ? m_backend.fence(Lane::p2p) : m_held_fences[last]);
    }
    for (size_t i = static_cast<size_t>(m_covered + 1); i <= last; ++i) {
      if (m_program[i].exchange.empty()) continue;
      if (!pp.stream_ordered()) pp.complete(Stream{&m_exchange_tags[i]});
      if (m_held_fences[i] != SIZE_MAX) {
        m_backend.release_fence(m_held_fences[i]);
        m_held_fences[i] = SIZE_MAX;
      }
    }
    m_covered = step;
  }

  // The end of an iteration: every stage waits for every other (a one-element all-reduce over
  // the pipeline, on the device's queue), so no microbatch of the next iteration starts early
  // and hides this one's bubble.
  void flush(Recorder& rec) {
    if (!m_comms.pp) return;
    if (!m_flush_buf.data()) m_flush_buf = m_backend.allocate(1, 16);
    // One element summed over the stages: its floor is the all-reduce's latency.
    const double e = static_cast<double>(dtype_size(m_backend.dtype()));
    const ScopedOp scope(rec, m_flush_id, -1, Lane::comm, OpCost{1, 2 * e, e}, Lane::compute);
    m_comms.pp->all_reduce(m_flush_buf.data(), m_flush_buf.data(), 1, m_backend.dtype(),
                           ReduceOp::sum, m_backend.stream(Lane::compute));
    m_comms.pp->complete(m_backend.stream(Lane::compute));
  }

  const RunConfig& m_cfg;
  Backend& m_backend;
  GridComms& m_comms;
  TrainStage& m_stage;
  OpTable& m_ops;
  std::vector<Variant> m_variants;
  bool m_train = true;
  int m_stage_index = 0;
  int m_mbs = 1;
  std::vector<Step> m_program;
  ProgramPlan m_plan;
  std::vector<char> m_exchange_tags; ///< one address per step: the MPI requests of an exchange
  std::vector<size_t> m_held_fences; ///< per exchange some action waits for, on GPUs
  int m_covered = -1;                ///< every exchange up to this step has finished
  bool m_has_exchanges = false;
  int32_t m_exchange_id = -1, m_wait_id = -1, m_flush_id = -1;
  std::vector<Buffer> m_inputs, m_grads;
  Buffer m_flush_buf;
  double m_act_bytes = 0;
  bool m_capture = false;
  std::vector<std::vector<float>> m_outputs, m_input_grads;
};

// Per iteration of this rank's timed rows: the share of the iteration its compute lane was
// idle (the bubble), the time its compute waited for exchanges (pp_wait), and the data-parallel
// reduction left after its last compute op; medians over the timed iterations.
struct StageTimes {
  double bubble = 0;
  double exchange_ns = 0;
  double dp_exposed_ns = 0;
};
StageTimes stage_times(const std::vector<TimelineRecord>& rows, const OpTable& ops) {
  std::map<int32_t, std::vector<const TimelineRecord*>> by_iter;
  for (const TimelineRecord& r : rows)
    if (!r.warmup) by_iter[r.iteration].push_back(&r);
  const int32_t exchange = ops.find(op::pp_exchange), flush = ops.find(op::pp_flush);
  const int32_t wait = ops.find(op::pp_wait);
  const int32_t dp_ar = ops.find(op::dp_allreduce), dp_rs = ops.find(op::dp_reducescatter);
  std::vector<double> bubbles, exchanges, dp_exposed;
  for (const auto& [it, list] : by_iter) {
    int64_t begin = INT64_MAX, end = INT64_MIN, waited = 0;
    int64_t last_compute = INT64_MIN, last_dp = INT64_MIN;
    std::vector<std::pair<int64_t, int64_t>> work; // the stage's own ops, compute and collective
    for (const TimelineRecord* r : list) {
      begin = std::min(begin, r->t_start_ns);
      end = std::max(end, r->t_end_ns);
      if (r->op_id == wait) waited += r->t_end_ns - r->t_start_ns;
      if (r->op_id == dp_ar || r->op_id == dp_rs) last_dp = std::max(last_dp, r->t_end_ns);
      if (r->op_id == exchange || r->op_id == wait || r->op_id == flush) continue;
      work.emplace_back(r->t_start_ns, r->t_end_ns);
      if (r->lane == static_cast<uint8_t>(Lane::compute))
        last_compute = std::max(last_compute, r->t_end_ns);
    }
    if (end <= begin) continue;
    // Busy time: the union of those ops' intervals (a collective beside a GEMM counts once).
    std::sort(work.begin(), work.end());
    int64_t busy = 0, open_begin = INT64_MIN, open_end = INT64_MIN;
    for (const auto& [b, e] : work) {
      if (b > open_end) {
        if (open_end > open_begin) busy += open_end - open_begin;
        open_begin = b;
        open_end = e;
      } else {
        open_end = std::max(open_end, e);
      }
    }
    if (open_end > open_begin) busy += open_end - open_begin;
    bubbles.push_back(1.0 - static_cast<double>(busy) / static_cast<double>(end - begin));
    exchanges.push_back(static_cast<double>(waited));
    dp_exposed.push_back(last_dp > last_compute ? static_cast<double>(last_dp - last_compute)
                                                : 0.0);
  }
  StageTimes s;
  if (bubbles.empty()) return s;
  s.bubble = percentile(bubbles, 50);
  s.exchange_ns = percentile(exchanges, 50);
  s.dp_exposed_ns = percentile(dp_exposed, 50);
  return s;
}

// The stage's ops outside its layers, for attribution: gradient zeroing and the SGD step
// against HBM, each collective against the interconnect roof of its own group (data-parallel
// reductions over the dp replicas, the norms' gradients over TP, the flush over the stages).
// Waits have no roof; nor have MPI's pipeline exchanges, whose recorded time is the posting of
// non-blocking transfers (the transfers' time is in pp_wait).
void add_stage_ops(AttributionInput& in, const RunConfig& cfg, bool exchanges_timed) {
  auto spec = [](const char* name, OpKind kind, Lane lane, const char* collective, int64_t group) {
    OpSpec s;
    s.name = name;
    s.kind = kind;
    s.lane = lane;
    s.collective = collective;
    s.group_size = group;
    return s;
  };
  in.stage = {spec(op::grad_zero, OpKind::elementwise, Lane::compute, "", 0),
              spec(op::sgd_update, OpKind::elementwise, Lane::compute, "", 0),
              spec(op::dp_allreduce, OpKind::collective, Lane::comm, "all_reduce", cfg.dp),
              spec(op::dp_reducescatter, OpKind::collective, Lane::comm, "reduce_scatter", cfg.dp),
              spec(op::allreduce_norm_grads, OpKind::collective, Lane::comm, "all_reduce", cfg.tp),
              spec(op::pp_flush, OpKind::collective, Lane::comm, "all_reduce", cfg.pp)};
  if (exchanges_timed)
    in.stage.push_back(spec(op::pp_exchange, OpKind::p2p, Lane::p2p, "sendrecv", 2));
  else
    in.no_roof[op::pp_exchange] =
        "the posting of MPI's non-blocking transfers (their time is in pp_wait)";
  in.no_roof[op::pp_wait] = "the compute waiting for pipeline transfers, no work of its own";
}

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

double scheduled_memory_bytes(const RunConfig& cfg) {
  const ModelSpec m = model_spec(cfg);
  const LayerShape s = layer_shape(cfg);
  const double layers = static_cast<double>(cfg.layers / cfg.pp);
  // Weights and gradients; every microbatch in flight at once at worst (gpipe), each with its
  // layers' activations (only their inputs under recompute, plus one recomputed layer).
  const double weights = 2.0 * layers * layer_weight_bytes(m, cfg.tp, s.dtype);
  const double act = layer_activation_bytes(m, s);
  const double input =
      static_cast<double>(s.tokens() * m.hidden) * static_cast<double>(dtype_size(s.dtype));
  const double per_mb = cfg.recompute == "full" ? layers * input : layers * act;
  return weights + static_cast<double>(cfg.microbatches) * (per_mb + 3.0 * input) + act;
}

double scheduled_reference_bytes(const RunConfig& cfg) {
  const ModelSpec m = model_spec(cfg);
  LayerShape s = layer_shape(cfg);
  s.tp = 1;
  const double layers = static_cast<double>(cfg.layers);
  return 2.0 * layers * layer_weight_bytes(m, 1, s.dtype) + layers * layer_activation_bytes(m, s);
}

double scheduled_reference_host_bytes(const RunConfig& cfg) {
  const ModelSpec m = model_spec(cfg);
  const LayerShape s = layer_shape(cfg);
  const double f32 = sizeof(float);
  const double grads = static_cast<double>(cfg.layers) * layer_weight_bytes(m, 1, DType::f32);
  const double per_mb = static_cast<double>(s.tokens() * m.hidden) * f32 * 2.0;
  return grads + static_cast<double>(cfg.dp * cfg.microbatches) * per_mb;
}

bool scheduled_point(const RunConfig& cfg) {
  return cfg.phase == "train" || (cfg.phase == "prefill" && !cfg.schedule.empty());
}

namespace {

// The stage's action times, for the schedule's order (zb-h1 is built for them) and its
// simulated bubble: one microbatch through the stage's forward and its backward as the schedule
// runs it (`split`: input gradients, then weight gradients; else both at once), each timed
// alone with the device synchronised around it, median of three after one untimed round. Every
// rank takes the largest of each over the job, so that all stages build the same programs.
ActionCosts measure_action_costs(Backend& backend, TrainStage& stage, OpTable& ops, bool split,
                                 MPI_Comm world) {
  Recorder silent(backend.clock(), ops);
  silent.set_enabled(false);
  std::vector<double> times[3];
  auto now = [&] {
    backend.synchronize();
    return std::chrono::steady_clock::now();
  };
  auto ns = [](auto a, auto b) { return std::chrono::duration<double, std::nano>(b - a).count(); };
  for (int round = 0; round < 4; ++round) {
    stage.begin_iteration(silent, 1);
    stage.fill_input(0, 0, 0);
    stage.fill_grad_output(0, 0, 0);
    const auto t0 = now();
    stage.forward(silent, 0, 0);
    const auto t1 = now();
    if (split)
      stage.backward_input(silent, 0, 0);
    else
      stage.backward(silent, 0, 0);
    const auto t2 = now();
    if (split) stage.backward_weight(silent, 0, 0);
    const auto t3 = now();
    stage.release(0, 0);
    stage.end_iteration(silent, 0.0f);
    backend.synchronize();
    if (round == 0) continue;
    times[0].push_back(ns(t0, t1));
    times[1].push_back(ns(t1, t2));
    times[2].push_back(split ? ns(t2, t3) : 0.0);
  }
  double med[3];
  for (int k = 0; k < 3; ++k)
    med[k] = percentile(times[k], 50);
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, med, 3, MPI_DOUBLE, MPI_MAX, world));
  return ActionCosts{med[0], med[1] + med[2], med[1], med[2], 0};
}

} // namespace

PointResult run_scheduled_point(JobContext& job, const RunConfig& cfg, const Roofs& roofs,
                                Watchdog& watchdog) {
  const auto started = std::chrono::steady_clock::now();
  MpiSession& mpi = job.mpi();
  PointResult result;
  const bool train = cfg.phase == "train";
  const Schedule schedule =
      cfg.schedule.empty() ? Schedule{ScheduleKind::one_f_one_b, 1} : parse_schedule(cfg.schedule);
  const std::vector<Variant> variants = point_variants(cfg);

  watchdog.rearm("creating communicators and allocating weights");
  GridComms& comms = point_grid(job, cfg, result);
  const GridCoords& gc = comms.grid->coords();
  Backend& backend = point_backend(job, cfg);

  TrainSpec spec;
  spec.model = model_spec(cfg);
  spec.shape = layer_shape(cfg);
  spec.attention = variants.front().attention;
  spec.async_comm = variants.front().overlap == "async";
  spec.tp_rank = gc.tp_rank;
  spec.recompute = cfg.recompute == "full";
  spec.seed = cfg.seed;
  for (int c = 0; c < schedule.chunks; ++c)
    spec.chunks.push_back(chunk_layers(schedule, gc.pp_rank, cfg.pp, c, cfg.layers));
  const CheckPlan plan = plan_check(cfg, job.cuda(), job.min_free_bytes());
  const bool check = plan.enabled && cfg.sgd_lr == 0;
  const std::string why_not =
      !plan.possible  ? "tp=1, pp=1, dp=1: the run is itself the reference"
      : !plan.enabled ? "--check " + cfg.check + " (the one-rank reference needs " +
                            std::to_string(static_cast<int64_t>(plan.ref_bytes / 1048576)) + " MiB)"
                      : "--sgd-lr changes the weights every iteration";
  const int64_t global_mbs = static_cast<int64_t>(cfg.dp) * cfg.microbatches;

  Reference reference;
  std::unique_ptr<TrainStage> stage;
  std::string failure;
  try {
    if (check) {
      watchdog.rearm("computing the one-rank reference");
      reference = compute_reference(backend, spec, cfg.layers, global_mbs, train);
    }
    stage = std::make_unique<TrainStage>(backend, comms.tp.get(), spec, result.ops);
    backend.synchronize();
  } catch (const Error& e) {
    failure = e.what();
  }
  if (!all_built(job, failure, result)) return result;

  // Train with a pipeline: the measured action times (zb-h1's order is built for them; every
  // schedule's bubble is simulated with them beside the theory's).
  const bool timed_actions = train && cfg.pp > 1;
  ActionCosts costs;
  if (timed_actions) {
    watchdog.rearm("timing the stage's forward, input-gradient and weight-gradient passes");
    costs = measure_action_costs(backend, *stage, result.ops, schedule.kind == ScheduleKind::zb_h1,
                                 mpi.world());
  }
  ScheduledWorkload workload(cfg, backend, comms, *stage, result.ops, variants, schedule, costs,
                             spec, train);
  const double bubble_simulated =
      timed_actions
          ? simulate_pipeline(schedule, cfg.pp, static_cast<int>(cfg.microbatches), train, costs)
                .bubble()
          : 0.0;
  ProtocolResult measurement = measure_point(job, cfg, workload, backend, watchdog, result);

  // The check: one more iteration from the same weights, its gradients (or, forward only, its
  // outputs) against the reference, the largest relative L2 error of any tensor on any rank.
  CheckOutcome outcome;
  outcome.tolerance = backend.dtype() == DType::f32 ? 1e-4 : 3e-2;
  if (!check) {
    outcome.status = "skipped: " + why_not;
  } else {
    watchdog.rearm("checking the gradients against the one-rank reference");
    workload.capture();
    double err = 0;
    std::string skipped;
    const int mbs = static_cast<int>(cfg.microbatches);
    // This rank's rows of a reference tensor of the stream (all of them without sequence
    // parallelism).
    const LayerGeometry& geo = stage->geometry();
    auto my_rows = [&](const std::vector<float>& full) {
      const int64_t r0 = stage->first_row(0);
      return block(full, geo.hidden, r0, geo.stream_tokens, 0, geo.hidden);
    };
    if (!train && gc.pp_rank == cfg.pp - 1)
      for (int mb = 0; mb < mbs; ++mb)
        err = std::max(
            err,
            relative_l2(workload.outputs()[static_cast<size_t>(mb)],
                        my_rows(reference.outputs[static_cast<size_t>(gc.dp_rank * mbs + mb)])));
    if (train && gc.pp_rank == 0)
      for (int mb = 0; mb < mbs; ++mb)
        err = std::max(
            err, relative_l2(
                     workload.input_grads()[static_cast<size_t>(mb)],
                     my_rows(reference.input_grads[static_cast<size_t>(gc.dp_rank * mbs + mb)])));
    if (train) {
      const LayerGeometry& g = stage->geometry();
      const ModelSpec& m = spec.model;
      const int64_t h = m.hidden, d = g.head_dim, r = gc.tp_rank;
      const int64_t qr = m.heads * d, kvr = m.kv_heads * d, f = m.ffn_hidden;
      for (size_t l = 0; l < stage->local_layers(); ++l) {
        const auto& ref = reference.grads[static_cast<size_t>(stage->global_layer(l))];
        const LayerGrads& mine = stage->grads(l);
        // This rank's shard of each TP=1 gradient (layer_weights.hpp gives the layout).
        std::vector<std::pair<const Tensor*, std::vector<float>>> pairs = {
            {&mine.ln1_gamma, ref[0]},
            {&mine.ln1_beta, ref[1]},
            {&mine.ln2_gamma, ref[2]},
            {&mine.ln2_beta, ref[3]},
            {&mine.wo, block(ref[5], qr, 0, h, r * g.q_cols(), g.q_cols())},
            {&mine.w2, block(ref[7], f, 0, h, r * g.ffn, g.ffn)}};
        std::vector<float> w1 = block(ref[6], h, r * g.ffn, g.ffn, 0, h);
        if (g.swiglu) w1 = stacked(w1, block(ref[6], h, f + r * g.ffn, g.ffn, 0, h));
        pairs.emplace_back(&mine.w1, w1);
        for (auto& [tensor, want] : pairs)
          err = std::max(err, relative_l2(backend.to_host(*tensor), want));
        // Wqkv: the query rows always; the key and value rows where each rank holds its own
        // heads (replicated KV heads get part of their gradient on each rank sharing them).
        const std::vector<float> qkv = backend.to_host(mine.wqkv);
        err = std::max(err, relative_l2(block(qkv, h, 0, g.q_cols(), 0, h),
                                        block(ref[4], h, r * g.q_cols(), g.q_cols(), 0, h)));
        if (!g.kv_replicated)
          err = std::max(
              err,
              relative_l2(block(qkv, h, g.q_cols(), 2 * g.kv_cols(), 0, h),
                          stacked(block(ref[4], h, qr + g.kv_head0 * d, g.kv_cols(), 0, h),
                                  block(ref[4], h, qr + kvr + g.kv_head0 * d, g.kv_cols(), 0, h))));
        else
          skipped = " (replicated KV heads: their Wk and Wv gradients not compared)";
      }
    }
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, mpi.world()));
    outcome.max_rel_error = err;
    outcome.status = (err <= outcome.tolerance ? "passed" : "failed") + skipped;
  }

  // The output checksum, whether or not the check ran: what the check compares (train: the
  // first stage's input gradients and every rank's weight gradients; forward only: the last
  // stage's outputs) after one more iteration from the same weights, hashed per rank.
  if (!check) {
    watchdog.rearm("one more iteration for the output checksum");
    workload.capture();
  }
  uint64_t hash = kFnv1a64Offset;
  bool holds = false;
  auto hash_values = [&](const std::vector<float>& values) {
    hash = fnv1a64(values.data(), values.size() * sizeof(float), hash);
    holds = true;
  };
  if (!train && gc.pp_rank == cfg.pp - 1)
    for (const std::vector<float>& out : workload.outputs())
      hash_values(out);
  if (train) {
    if (gc.pp_rank == 0)
      for (const std::vector<float>& grad : workload.input_grads())
        hash_values(grad);
    for (size_t l = 0; l < stage->local_layers(); ++l) {
      const LayerGrads& g = stage->grads(l);
      for (const Tensor* t :
           {&g.ln1_gamma, &g.ln1_beta, &g.ln2_gamma, &g.ln2_beta, &g.wqkv, &g.wo, &g.w1, &g.w2})
        hash_values(backend.to_host(*t));
    }
  }
  const std::string checksum = checksum_over_ranks(mpi.world(), holds, hash);

  // Per-stage pipeline figures, gathered to rank 0 from the TP rank 0 of replica 0 of each
  // stage.
  std::vector<StageTimes> per_strategy;
  for (const StrategyMeasurement& m : measurement.strategies)
    per_strategy.push_back(stage_times(m.rows, result.ops));
  const double peak_bytes = static_cast<double>(stage->peak_activation_bytes());

  AttributionInput attribution;
  attribution.layers = cfg.layers / cfg.pp;
  attribution.microbatches = cfg.microbatches;
  attribution.tp = cfg.tp;
  attribution.dtype = parse_dtype(cfg.dtype);
  attribution.transport = job.transport();
  add_stage_ops(attribution, cfg, comms.pp != nullptr && comms.pp->stream_ordered());
  for (size_t si = 0; si < measurement.strategies.size(); ++si) {
    StrategyMeasurement& m = measurement.strategies[si];
    StrategyResult r;
    r.name = m.name;
    r.overlap = variants[si].overlap;
    r.attention = attention_name(variants[si].attention);
    r.loops = m.loops;
    r.check = outcome;
    r.rows = std::move(m.rows);
    r.summary = summarize_run(mpi.world(), result.ops, r.rows);
    // [stage][bubble, exchange, dp exposed, peak activation bytes] from each stage's reporter.
    const bool reporter = gc.tp_rank == 0 && gc.dp_rank == 0;
    const double mine[4] = {per_strategy[si].bubble, per_strategy[si].exchange_ns,
                            per_strategy[si].dp_exposed_ns, peak_bytes};
    std::vector<double> stages(static_cast<size_t>(4 * cfg.pp), 0.0);
    if (reporter) std::copy(mine, mine + 4, stages.begin() + 4 * gc.pp_rank);
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, stages.data(), static_cast<int>(stages.size()),
                                  MPI_DOUBLE, MPI_SUM, mpi.world()));
    if (r.check.status.rfind("failed", 0) == 0) result.check_failed = true;
    if (mpi.rank() == 0) {
      Attrs& a = r.summary.attrs;
      a = check_attrs(r.check);
      a.emplace_back("check_compares", std::string(train ? "gradients" : "outputs"));
      a.insert(a.end(), {{"output_checksum", checksum},
                         {"output_checksum_algorithm", std::string(kOutputChecksumAlgorithm)}});
      for (auto& kv : loop_attrs(r.loops))
        a.push_back(std::move(kv));
      a.insert(a.end(),
               {{"overlap", r.overlap},
                {"attention", r.attention},
                {"schedule", schedule_name(schedule)},
                {"microbatches", static_cast<int64_t>(cfg.microbatches)},
                {"recompute", cfg.recompute},
                {"bubble_theory",
                 theory_bubble(schedule, cfg.pp, static_cast<int>(cfg.microbatches), train)}});
      if (timed_actions) {
        a.insert(a.end(), {{"action_forward_ns", costs.forward},
                           {"action_backward_ns", costs.backward},
                           {"bubble_simulated", bubble_simulated}});
        if (schedule.kind == ScheduleKind::zb_h1)
          a.insert(a.end(), {{"action_backward_input_ns", costs.backward_input},
                             {"action_backward_weight_ns", costs.backward_weight}});
      }
      for (int p = 0; p < cfg.pp; ++p) {
        const std::string key = "stage" + std::to_string(p) + ".";
        const double* v = stages.data() + 4 * p;
        a.emplace_back(key + "bubble", v[0]);
        a.emplace_back(key + "p2p_exposed_ns", v[1]);
        a.emplace_back(key + "dp_exposed_ns", v[2]);
        a.emplace_back(key + "peak_activation_bytes", v[3]);
      }
      const Attrs& gpu = measurement.strategies[si].gpu;
      a.insert(a.end(), gpu.begin(), gpu.end());
      if (!roofs.empty()) {
        // The plan of this strategy's attention (the stage holds the last one selected).
        attribution.specs = train_layer_plan(spec.model, spec.shape, variants[si].attention);
        attribute(r.summary, attribution, roofs);
      }
    }
    result.strategies.push_back(std::move(r));
  }
  result.attention_plans = backend.attention_plans();
  result.setup_s = seconds_since(started) - result.measure_s;
  return result;
}

} // namespace ridgeline
