// The pipeline driver (see pipeline.hpp).
#include "parallel/pipeline.hpp"

#include <algorithm>
#include <cstdint>
#include <map>

#include "core/error.hpp"
#include "core/ranges.hpp"
#include "core/stamped_loop.hpp"
#include "core/stats.hpp"
#include "models/generator.hpp"
#include "models/work_model.hpp"
#include "parallel/layer_weights.hpp"

namespace ridgeline {
namespace {

// Whether `a` is the last action on its (microbatch, chunk)'s activation set: the forward in
// prefill, the backward or backward_weight in training.
bool last_use(const Action& a, bool train) {
  return (!train && a.kind == ActionKind::forward) || a.kind == ActionKind::backward ||
         a.kind == ActionKind::backward_weight;
}

} // namespace

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

PipelineDriver::PipelineDriver(Backend& backend, Communicator* pp, const DataParallel& dp,
                               TrainStage& stage, OpTable& ops, const PipelineSpec& spec)
    : m_backend(backend), m_pp(pp), m_stage(stage), m_spec(spec), m_ops(ops) {
  m_program = stage_program(spec.schedule, spec.stage, spec.stages, spec.microbatches, spec.train,
                            spec.costs);
  m_plan = plan_program(m_program, stage.chunks(), spec.train);
  m_has_exchanges = std::any_of(m_program.begin(), m_program.end(),
                                [](const Step& st) { return !st.exchange.empty(); });
  m_exchange_tags.assign(m_program.size(), 0);
  m_held_fences.assign(m_program.size(), SIZE_MAX);
  // Every activation set the program holds at once, allocated now: a device allocation inside
  // an iteration serialises the GPU behind the NCCL transfers in flight, and transfers larger
  // than NCCL's buffers (each waits for its peer) can then stall.
  for (int c = 0; c < stage.chunks(); ++c)
    stage.reserve(c, m_plan.sets[static_cast<size_t>(c)]);
  m_exchange_id = intern_op(ops, layer_op::op_pp_exchange);
  m_wait_id = intern_op(ops, layer_op::op_pp_wait);
  m_flush_id = intern_op(ops, layer_op::op_pp_flush);
  // The first virtual stage's inputs and the last one's loss gradients, one per microbatch,
  // generated once (copies into the activation sets are part of the step). Under sequence
  // parallelism a rank holds, and the pipeline passes, its own rows of the stream only.
  const DType dt = backend.dtype();
  const int64_t t = stage.geometry().stream_tokens, h = stage.geometry().hidden;
  m_act_bytes = static_cast<double>(t * h) * static_cast<double>(dtype_size(dt));
  for (int mb = 0; mb < spec.microbatches; ++mb) {
    if (spec.stage == 0) m_inputs.push_back(backend.allocate(t, h));
    if (spec.train && spec.stage == spec.stages - 1) m_grads.push_back(backend.allocate(t, h));
  }
  refresh_inputs();
  m_dp_shard = dp.shard;
  stage.set_data_parallel(dp);
}

void PipelineDriver::refresh_inputs() {
  if (m_stage.row_units() == m_row_units) return;
  m_row_units = m_stage.row_units();
  const DType dt = m_backend.dtype();
  const int64_t t = m_stage.geometry().stream_tokens, h = m_stage.geometry().hidden;
  for (size_t mb = 0; mb < m_inputs.size() || mb < m_grads.size(); ++mb) {
    const int64_t global =
        static_cast<int64_t>(m_spec.replica) * m_spec.microbatches + static_cast<int64_t>(mb);
    if (mb < m_inputs.size())
      m_stage.fill_rows(m_inputs[mb].view(t, h, dt),
                        GenKey{m_spec.seed, tensor_id(-1, role_input), h, 1.0f}, global);
    if (mb < m_grads.size())
      m_stage.fill_rows(m_grads[mb].view(t, h, dt),
                        GenKey{m_spec.seed, tensor_id(-1, role_grad_output), h, 1.0f}, global);
  }
}

void PipelineDriver::step(Recorder& rec) {
  if (m_spec.train) m_stage.begin_iteration(rec, m_spec.microbatches);
  const int last_chunk = m_stage.chunks() - 1;
  const bool first_stage = m_spec.stage == 0, last_stage = m_spec.stage == m_spec.stages - 1;
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
  if (m_spec.train) m_stage.end_iteration(rec, m_spec.sgd_lr, m_capture && m_dp_shard);
}

void PipelineDriver::capture() {
  m_capture = true;
  m_outputs.assign(static_cast<size_t>(m_spec.microbatches), {});
  m_input_grads.assign(static_cast<size_t>(m_spec.microbatches), {});
  Recorder silent(m_backend.clock(), m_ops);
  silent.set_enabled(false);
  step(silent);
  m_backend.synchronize();
  m_capture = false;
}

// One action of the program on the stage (with the model's input on the first virtual stage
// and the loss gradient on the last one copied in first).
void PipelineDriver::run(Recorder& rec, const Action& a, bool first_stage, bool last_stage,
                         int last_chunk) {
  const int64_t t = m_stage.geometry().stream_tokens, h = m_stage.geometry().hidden;
  const DType dt = m_backend.dtype();
  const size_t mb = static_cast<size_t>(a.microbatch);
  switch (a.kind) {
  case ActionKind::forward:
    if (first_stage && a.chunk == 0)
      m_backend.copy(m_inputs[mb].view(t, h, dt), m_stage.activation_in(a.microbatch, 0));
    m_stage.forward(rec, a.microbatch, a.chunk);
    if (!m_spec.train && last_stage && a.chunk == last_chunk && m_capture)
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
void PipelineDriver::post(Recorder& rec, size_t step, const std::vector<Transfer>& transfers) {
  Communicator& pp = *m_pp;
  m_backend.wait_fence(Lane::p2p, m_backend.fence(Lane::compute));
  const double bytes = m_act_bytes * static_cast<double>(transfers.size());
  const ranges::Scope range(op::pp_exchange);
  const size_t handle = rec.begin(m_exchange_id, -1, Lane::p2p, OpCost{0, bytes, bytes}, Lane::p2p);
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
void PipelineDriver::wait(Recorder& rec, int step) {
  if (step <= m_covered || !m_has_exchanges) return;
  Communicator& pp = *m_pp;
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
void PipelineDriver::flush(Recorder& rec) {
  if (!m_pp) return;
  if (!m_flush_buf.data()) m_flush_buf = m_backend.allocate(1, 16);
  // One element summed over the stages: its floor is the all-reduce's latency.
  const double e = static_cast<double>(dtype_size(m_backend.dtype()));
  const ScopedOp scope(rec, m_flush_id, -1, Lane::comm, OpCost{1, 2 * e, e}, Lane::compute);
  m_pp->all_reduce(m_flush_buf.data(), m_flush_buf.data(), 1, m_backend.dtype(), ReduceOp::sum,
                   m_backend.stream(Lane::compute));
  m_pp->complete(m_backend.stream(Lane::compute));
}

ActionCosts measure_action_costs(Backend& backend, TrainStage& stage, OpTable& ops, bool split,
                                 MPI_Comm world) {
  Recorder silent(backend.clock(), ops);
  silent.set_enabled(false);
  // Host time: each pass synchronizes before its end mark, the first after the set-up.
  HostClock host;
  MarkRecorder marks(host);
  const int passes = split ? 3 : 2;
  std::vector<StampedSample> samples;
  for (int round = 0; round < 4; ++round) {
    stage.begin_iteration(silent, 1);
    stage.fill_input(0, 0, 0);
    stage.fill_grad_output(0, 0, 0);
    backend.synchronize();
    const size_t first = samples.size();
    stamped_loop(
        marks, Lane::compute, passes, passes,
        [&](int pass) {
          if (pass == 0)
            stage.forward(silent, 0, 0);
          else if (pass == 2)
            stage.backward_weight(silent, 0, 0);
          else if (split)
            stage.backward_input(silent, 0, 0);
          else
            stage.backward(silent, 0, 0);
          backend.synchronize();
        },
        samples);
    stage.release(0, 0);
    stage.end_iteration(silent, 0.0f);
    backend.synchronize();
    if (round == 0) samples.resize(first); // the first round warms up
  }
  marks.flush();
  std::vector<double> times[3];
  for (size_t i = 0; i < samples.size(); ++i)
    times[i % static_cast<size_t>(passes)].push_back(samples[i].ns(marks));
  double med[3] = {0, 0, 0};
  for (int k = 0; k < passes; ++k)
    med[k] = percentile(times[k], 50);
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, med, 3, MPI_DOUBLE, MPI_MAX, world));
  return ActionCosts{med[0], med[1] + med[2], med[1], med[2], 0};
}

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

} // namespace ridgeline
