// A trace run (see trace_run.hpp).
#include "app/trace_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "app/h5.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/stamped_loop.hpp"
#include "core/stats.hpp"

namespace ridgeline {
namespace {

// A step's entries hashed (kind, tokens, context of each): equal on every rank that decided the
// same step. Taken to 52 bits, which a double holds exactly.
double mix_hash(const StepMix& mix) {
  uint64_t h = kFnv1a64Offset;
  for (const StepEntry& e : mix.entries) {
    h = fnv1a64_u64(static_cast<uint64_t>(e.kind), h);
    h = fnv1a64_u64(static_cast<uint64_t>(e.tokens), h);
    h = fnv1a64_u64(static_cast<uint64_t>(e.context), h);
  }
  return static_cast<double>(h & ((uint64_t{1} << 52) - 1));
}

const char* const kStepTime = "the slowest rank's forward of the step's layers through the "
                              "device's completion (the host's switch to the step's mix and its "
                              "input fill before it are prepare_ns, not on the clock)";

} // namespace

TraceRunResult replay_trace(const ServingPlan& plan, TpStage& stage, OpTable& ops, Backend& backend,
                            MPI_Comm world, Watchdog& watchdog, const AttributionInput& attribution,
                            const Roofs& roofs) {
  TraceRunResult run;
  Recorder silent(backend.clock(), ops);
  silent.set_enabled(false);
  stage.set_mode(StageMode::full);
  int64_t index = 0;
  bool timed = false; // the untimed passes keep nothing of their steps
  // Host time: the scheduler needs each step's time before it decides the next, so each pass
  // synchronizes before its end mark.
  HostClock host;
  auto cost = [&](const StepMix& mix) {
    watchdog.iteration(index++);
    MarkRecorder marks(host);
    std::vector<StampedSample> passes; // the step's preparation, then its forward
    stamped_loop(
        marks, Lane::compute, 2, 2,
        [&](int pass) {
          if (pass == 0) {
            stage.set_mix(mix);
            stage.fill_input(0);
          } else {
            stage.forward(silent);
          }
          backend.synchronize();
        },
        passes);
    marks.flush();
    const double hash = mix_hash(mix);
    // The slowest rank's times, and whether every rank ran this step: max(h) == -max(-h).
    double agreed[4] = {passes[1].ns(marks), passes[0].ns(marks), hash, -hash};
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, agreed, 4, MPI_DOUBLE, MPI_MAX, world));
    if (agreed[2] != -agreed[3])
      throw Error("trace replay: the ranks decided different mixes for step " +
                  std::to_string(index - 1));
    if (timed) {
      run.step_ns.push_back(agreed[0]);
      run.prepare_ns.push_back(agreed[1]);
      run.split.push_back(roofs.empty() ? StepSplit{}
                                        : split_by_work_model(agreed[0],
                                                              work_model_bounds(stage.op_specs(),
                                                                                attribution, roofs),
                                                              attribution));
    }
    return std::max(agreed[0], 1.0);
  };
  // Untimed passes first: every step shape the measured pass runs has (nearly always) run once.
  for (int pass = 0; pass < plan.warmup_passes; ++pass) {
    watchdog.rearm("replaying the trace untimed (warm-up pass " + std::to_string(pass + 1) + ")");
    schedule_requests(plan.requests, plan.scheduler, cost);
  }
  watchdog.rearm("replaying the trace");
  index = 0;
  timed = true;
  run.schedule = schedule_requests(plan.requests, plan.scheduler, cost);
  run.metrics = serving_metrics(run.schedule, plan.slo_ttft_s, plan.slo_tpot_s);
  return run;
}

ReplayCheck check_replay(const ServingSchedule& schedule, TpStage& stage, OpTable& ops,
                         TpStage* reference, OpTable& reference_ops, Backend& backend,
                         MPI_Comm world, Watchdog& watchdog, double tolerance) {
  ReplayCheck c;
  c.tolerance = tolerance;
  Recorder silent(backend.clock(), ops), reference_silent(backend.clock(), reference_ops);
  silent.set_enabled(false);
  reference_silent.set_enabled(false);
  watchdog.rearm("checking the trace's steps against the TP=1 model");
  stage.reset_cache();
  if (reference) reference->reset_cache();
  double worst = 0; // a non-finite error counts as infinite
  int64_t index = 0;
  for (const ScheduledStep& step : schedule.steps) {
    watchdog.iteration(index++);
    stage.set_mix(step.mix);
    stage.fill_input(0);
    stage.forward(silent);
    const std::vector<float> got = stage.gather_output();
    double err = std::numeric_limits<double>::quiet_NaN();
    if (reference) {
      reference->set_mix(step.mix);
      reference->fill_input(0);
      reference->forward(reference_silent);
      err = relative_l2(got, backend.to_host(reference->output()));
      worst = std::isfinite(err) ? std::max(worst, err) : std::numeric_limits<double>::infinity();
    }
    c.step_error.push_back(err);
  }
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, world));
  c.steps = static_cast<int64_t>(schedule.steps.size());
  c.max_rel_error = worst;
  c.status = worst <= tolerance ? "passed" : "failed";
  return c;
}

Attrs serving_attrs(const ServingPlan& plan, const TraceRunResult& run) {
  const ServingMetrics& m = run.metrics;
  return {{"source", plan.source},
          {"requests", static_cast<int64_t>(plan.requests.size())},
          {"steps", static_cast<int64_t>(run.schedule.steps.size())},
          {"token_budget", plan.scheduler.token_budget},
          {"chunk", plan.scheduler.chunk},
          {"max_batch", plan.scheduler.max_batch},
          {"kv_capacity_tokens", plan.scheduler.kv_capacity_tokens},
          {"duration_s", plan.duration_s},
          {"warmup_passes", static_cast<int64_t>(plan.warmup_passes)},
          {"slo_ttft_s", plan.slo_ttft_s},
          {"slo_tpot_s", plan.slo_tpot_s},
          {"ttft_p50_s", m.ttft_s.p50},
          {"ttft_p95_s", m.ttft_s.p95},
          {"ttft_p99_s", m.ttft_s.p99},
          {"tpot_p50_s", m.tpot_s.p50},
          {"tpot_p95_s", m.tpot_s.p95},
          {"tpot_p99_s", m.tpot_s.p99},
          {"e2e_p50_s", m.e2e_s.p50},
          {"e2e_p95_s", m.e2e_s.p95},
          {"e2e_p99_s", m.e2e_s.p99},
          {"good", m.good},
          {"span_s", m.span_s},
          {"goodput_per_s", m.goodput_per_s},
          {"throughput_per_s", m.throughput_per_s},
          {"step_time", std::string(kStepTime)},
          {"check", run.check.status},
          {"check_steps", run.check.steps},
          {"check_max_rel_error", run.check.max_rel_error},
          {"check_tolerance", run.check.tolerance}};
}

Table serving_steps_table(const TraceRunResult& run) {
  std::vector<int64_t> step, pt, dt, ps, ds, cmin, cmax;
  std::vector<double> start, end, cmean, by_class[kCeilingClasses];
  std::vector<std::string> ceiling;
  std::vector<double> check(run.schedule.steps.size(), std::numeric_limits<double>::quiet_NaN());
  for (size_t i = 0; i < run.schedule.steps.size(); ++i) {
    if (i < run.check.step_error.size()) check[i] = run.check.step_error[i];
    for (int c = 0; c < kCeilingClasses; ++c)
      by_class[c].push_back(run.split[i].by_class_ns[c]);
    ceiling.emplace_back(ceiling_name(run.split[i].ceiling));
    const ScheduledStep& s = run.schedule.steps[i];
    const MixSummary m = mix_summary(s.mix);
    step.push_back(static_cast<int64_t>(i));
    start.push_back(s.start_s);
    end.push_back(s.end_s);
    pt.push_back(m.prefill_tokens);
    dt.push_back(m.decode_tokens);
    ps.push_back(m.prefill_sequences);
    ds.push_back(m.decode_sequences);
    cmin.push_back(m.context_min);
    cmax.push_back(m.context_max);
    cmean.push_back(m.context_mean);
  }
  return {{"step", step},
          {"start_s", start},
          {"end_s", end},
          {"step_ns", run.step_ns},
          {"prepare_ns", run.prepare_ns},
          {"prefill_tokens", pt},
          {"decode_tokens", dt},
          {"prefill_sequences", ps},
          {"decode_sequences", ds},
          {"context_min", cmin},
          {"context_max", cmax},
          {"context_mean", cmean},
          {"compute_ns", by_class[0]},
          {"hbm_ns", by_class[1]},
          {"interconnect_ns", by_class[2]},
          {"launch_ns", by_class[3]},
          {"ceiling", ceiling},
          {"check_rel_error", check}};
}

Table serving_requests_table(const ServingPlan& plan, const TraceRunResult& run) {
  std::vector<int64_t> id, prompt, output;
  std::vector<double> arrival, first, finish, ttft, e2e, tpot;
  for (size_t i = 0; i < run.schedule.requests.size(); ++i) {
    const RequestTimes& t = run.schedule.requests[i];
    id.push_back(t.id);
    arrival.push_back(t.arrival_s);
    prompt.push_back(plan.requests[i].prompt_tokens);
    output.push_back(t.output_tokens);
    first.push_back(t.first_token_s);
    finish.push_back(t.finish_s);
    ttft.push_back(t.ttft_s());
    e2e.push_back(t.e2e_s());
    tpot.push_back(t.has_tpot() ? t.tpot_s() : std::numeric_limits<double>::quiet_NaN());
  }
  return {{"request", id},           {"arrival_s", arrival},   {"prompt_tokens", prompt},
          {"output_tokens", output}, {"first_token_s", first}, {"finish_s", finish},
          {"ttft_s", ttft},          {"e2e_s", e2e},           {"tpot_s", tpot}};
}

void print_serving(std::ostream& out, const ServingPlan& plan, const TraceRunResult& run) {
  const ServingMetrics& m = run.metrics;
  char line[256];
  out << "\ntrace: " << plan.source << ": " << m.requests << " request(s) in "
      << run.schedule.steps.size() << " measured step(s) (token budget "
      << plan.scheduler.token_budget << ", chunk " << plan.scheduler.chunk << ", max batch "
      << plan.scheduler.max_batch << ")\n";
  std::snprintf(line, sizeof(line), "  %-8s %10s %10s %10s\n", "latency", "p50 ms", "p95 ms",
                "p99 ms");
  out << line;
  auto row = [&](const char* name, const Percentiles& p) {
    std::snprintf(line, sizeof(line), "  %-8s %10.3f %10.3f %10.3f\n", name, p.p50 * 1e3,
                  p.p95 * 1e3, p.p99 * 1e3);
    out << line;
  };
  row("TTFT", m.ttft_s);
  row("TPOT", m.tpot_s);
  row("e2e", m.e2e_s);
  std::vector<double> by_kind[kStepKinds];
  int64_t prefill = 0, decode = 0;
  for (size_t i = 0; i < run.schedule.steps.size(); ++i) {
    const StepMix& mix = run.schedule.steps[i].mix;
    by_kind[static_cast<int>(step_kind(mix))].push_back(run.step_ns[i]);
    prefill += mix.prefill_tokens;
    decode += mix.decode_tokens;
  }
  for (int k = 0; k < kStepKinds; ++k) {
    if (by_kind[k].empty()) continue;
    std::snprintf(line, sizeof(line), "  steps %-13s %6zu, step p50 %.3f ms\n",
                  step_kind_name(static_cast<StepKind>(k)), by_kind[k].size(),
                  percentile(by_kind[k], 50) / 1e6);
    out << line;
  }
  if (std::any_of(run.split.begin(), run.split.end(),
                  [](const StepSplit& s) { return s.ceiling != Ceiling::none; }))
    out << "  ceiling (each step split by its ops' bounds under the roofs): "
        << steps_by_ceiling(run.split) << "\n";
  std::snprintf(line, sizeof(line),
                "  tokens: %lld prefill, %lld decode; goodput %.3f req/s of %.3f req/s (%lld of "
                "%lld within the targets)\n",
                static_cast<long long>(prefill), static_cast<long long>(decode), m.goodput_per_s,
                m.throughput_per_s, static_cast<long long>(m.good),
                static_cast<long long>(m.requests));
  out << line;
  const ReplayCheck& c = run.check;
  out << "  check: every step against the TP=1 model: " << c.status;
  if (c.status == "passed" || c.status == "failed") {
    std::snprintf(line, sizeof(line), " (max rel error %.3g over %lld step(s), tolerance %.3g)",
                  c.max_rel_error, static_cast<long long>(c.steps), c.tolerance);
    out << line;
  }
  out << "\n";
}

bool has_serving(const std::string& path) {
  const h5::Handle file = h5::open_file_read(path);
  return h5::exists(file.id(), "/serving/steps") && h5::exists(file.id(), "/serving/requests");
}

namespace {

template <class T>
const std::vector<T>& table_column(const Table& t, const char* name, const std::string& path) {
  const Column* c = h5::find_column(t, name);
  if (c == nullptr || !std::holds_alternative<std::vector<T>>(c->values))
    throw Error(path + ": no column '" + name + "' of the expected type");
  return std::get<std::vector<T>>(c->values);
}

double attr_number(const Attrs& a, const char* name, const std::string& path) {
  const AttrValue* v = find_attr(a, name);
  if (v != nullptr) {
    if (const double* d = std::get_if<double>(v)) return *d;
    if (const int64_t* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  }
  throw Error(path + ": no number attribute '" + name + "'");
}

} // namespace

MeasuredTrace read_serving(const std::string& path) {
  const h5::Handle file = h5::open_file_read(path);
  if (!h5::exists(file.id(), "/serving"))
    throw Error(path + ": no /serving (not a trace run's file)");
  const Attrs a = h5::read_attrs(h5::open_group(file.id(), "/serving").id());
  MeasuredTrace t;
  if (const AttrValue* v = find_attr(a, "source")) t.source = attr_to_string(*v);
  const std::string sp = path + ": /serving";
  t.scheduler.token_budget = static_cast<int64_t>(attr_number(a, "token_budget", sp));
  t.scheduler.chunk = static_cast<int64_t>(attr_number(a, "chunk", sp));
  t.scheduler.max_batch = static_cast<int64_t>(attr_number(a, "max_batch", sp));
  t.scheduler.kv_capacity_tokens = static_cast<int64_t>(attr_number(a, "kv_capacity_tokens", sp));
  t.slo_ttft_s = attr_number(a, "slo_ttft_s", sp);
  t.slo_tpot_s = attr_number(a, "slo_tpot_s", sp);
  ServingMetrics& m = t.metrics;
  m.ttft_s = {attr_number(a, "ttft_p50_s", sp), attr_number(a, "ttft_p95_s", sp),
              attr_number(a, "ttft_p99_s", sp), 0};
  m.tpot_s = {attr_number(a, "tpot_p50_s", sp), attr_number(a, "tpot_p95_s", sp),
              attr_number(a, "tpot_p99_s", sp), 0};
  m.e2e_s = {attr_number(a, "e2e_p50_s", sp), attr_number(a, "e2e_p95_s", sp),
             attr_number(a, "e2e_p99_s", sp), 0};
  m.requests = static_cast<int64_t>(attr_number(a, "requests", sp));
  m.good = static_cast<int64_t>(attr_number(a, "good", sp));
  m.span_s = attr_number(a, "span_s", sp);
  m.goodput_per_s = attr_number(a, "goodput_per_s", sp);
  m.throughput_per_s = attr_number(a, "throughput_per_s", sp);

  const std::string rp = path + ": /serving/requests";
  const Table req = h5::read_table(file.id(), "/serving/requests");
  const auto& id = table_column<int64_t>(req, "request", rp);
  const auto& arrival = table_column<double>(req, "arrival_s", rp);
  const auto& prompt = table_column<int64_t>(req, "prompt_tokens", rp);
  const auto& output = table_column<int64_t>(req, "output_tokens", rp);
  for (size_t i = 0; i < id.size(); ++i)
    t.requests.push_back({id[i], arrival[i], prompt[i], output[i]});
  const std::string stp = path + ": /serving/steps";
  const Table steps = h5::read_table(file.id(), "/serving/steps");
  t.step_ns = table_column<double>(steps, "step_ns", stp);
  const auto& pt = table_column<int64_t>(steps, "prefill_tokens", stp);
  const auto& dt = table_column<int64_t>(steps, "decode_tokens", stp);
  const auto& ps = table_column<int64_t>(steps, "prefill_sequences", stp);
  const auto& ds = table_column<int64_t>(steps, "decode_sequences", stp);
  for (size_t i = 0; i < pt.size(); ++i) {
    MixSummary s;
    s.prefill_tokens = pt[i];
    s.decode_tokens = dt[i];
    s.prefill_sequences = ps[i];
    s.decode_sequences = ds[i];
    t.steps.push_back(s);
  }
  if (t.steps.size() != t.step_ns.size()) throw Error(stp + ": its columns differ in length");
  return t;
}

ServingSchedule measured_schedule(const MeasuredTrace& t) {
  size_t next = 0;
  const ServingSchedule s = schedule_requests(t.requests, t.scheduler, [&](const StepMix&) {
    const double ns = next < t.step_ns.size() ? t.step_ns[next] : 1.0;
    ++next;
    return std::max(ns, 1.0);
  });
  if (s.steps.size() != t.steps.size())
    throw Error("the scheduler makes " + std::to_string(s.steps.size()) +
                " steps of the file's requests and step times, the file holds " +
                std::to_string(t.steps.size()));
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const StepMix& m = s.steps[i].mix;
    const MixSummary& f = t.steps[i];
    if (m.prefill_tokens != f.prefill_tokens || m.decode_tokens != f.decode_tokens ||
        m.prefill_sequences != f.prefill_sequences || m.decode_sequences != f.decode_sequences)
      throw Error("step " + std::to_string(i) +
                  " of the file is not the one the scheduler makes of its requests and step "
                  "times");
  }
  return s;
}

} // namespace ridgeline
