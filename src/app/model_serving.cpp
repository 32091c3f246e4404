// `ridgeline model --trace` / `--trace-gen`: a serving trace through the continuous-batching
// scheduler (models/serving.hpp), every step's mix predicted from the roofs as `model` predicts
// a layer, and the requests' latencies, goodput and the steps' ceilings reported.
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <ostream>

#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/model_detail.hpp"
#include "app/trace_run.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"

namespace ridgeline::model_detail {

namespace {

// The problems of options that predict something other than a trace.
std::vector<std::string> option_problems(const ModelOptions& o) {
  std::vector<std::string> problems;
  const ServingOptions& s = o.serving;
  if (!s.trace.empty() && !s.trace_gen.empty())
    problems.emplace_back("--trace and --trace-gen: give one trace");
  if (!s.rates.empty() && s.trace_gen.empty())
    problems.emplace_back("--rates sets a generated trace's arrival rate: give --trace-gen (a "
                          "--trace file's arrivals are its own)");
  if (!s.rates.empty() && !s.write_trace.empty())
    problems.emplace_back("--write-trace writes one trace; --rates predicts one per rate");
  if (const std::string p = check_scheduler_config(s.scheduler); !p.empty())
    problems.push_back("--token-budget/--chunk/--max-batch/--kv-capacity: " + p);
  if (!o.base.out.empty())
    problems.emplace_back("--out: a trace's prediction is printed and written by --json and "
                          "--markdown, not as a sweep file");
  if (!o.validate.empty())
    problems.emplace_back("--validate predicts a measured file, not a trace");
  if (!o.link_gbps.empty()) problems.emplace_back("--link-gbps predicts a grid, not a trace");
  if (!s.write_trace.empty()) {
    std::vector<NamedFile> inputs = input_files(o.base);
    inputs.push_back({s.trace, "--trace"});
    inputs.push_back({o.hardware, "--hardware"});
    for (std::string& p : file_problems({{s.write_trace, "--write-trace"},
                                         {o.base.json, "--json"},
                                         {o.base.markdown, "--markdown"}},
                                        inputs))
      problems.push_back(std::move(p));
    for (std::string& p : output_problems(s.write_trace, "--write-trace"))
      problems.push_back(std::move(p));
  }
  return problems;
}

// The one configuration the trace runs on: one value of each axis, one TP group.
std::vector<std::string> config_problems(const ModelOptions& o, const Machine& m, RunConfig& cfg) {
  std::vector<std::string> lists[std::size(kSweepAxes)];
  std::vector<std::string> axes;
  split_sweep_axis_lists(o.lists, lists, axes);
  if (!axes.empty())
    return {"--trace predicts one configuration: give one value of " + join(axes, ", ")};
  // The axes' single values first, then the defaults: a default hidden size applied first would
  // rescale the preset's MLP when the preset's own hidden size (an axis) comes in.
  cfg = sweep_grid(o.base, lists).front();
  apply_defaults(cfg, m.roofs.backend == "host" ? "host" : "cuda");
  // The scheduler sets each step's tokens and contexts: the configuration gives the model, the
  // TP degree and the dtype, checked as a prefill point.
  cfg.phase = "prefill";
  cfg.context = 0;
  if (cfg.pp != 1 || cfg.dp != 1) return {"--trace predicts one TP group: --pp 1 and --dp 1"};
  return validate(cfg, cfg.tp);
}

AttentionImpl attention_of(const RunConfig& cfg) {
  return cfg.attention == "naive" ? AttentionImpl::naive : AttentionImpl::fused;
}

// A step's predictor: its mix's ops under the options of the phase holding most of its tokens
// (the calibration's efficiencies and gap of that phase).
class StepPredictor {
public:
  StepPredictor(const RunConfig& cfg, const ModelOptions& o, const Machine& m,
                const Calibration& cal)
      : m_cfg(cfg), m_spec(model_spec(cfg)), m_dtype(parse_dtype(cfg.dtype)),
        m_roofs(roofs_for(m, o, false)) {
    RunConfig decode = cfg;
    decode.phase = "decode";
    m_prefill = place(cfg, o, m, cal);
    m_decode = place(decode, o, m, cal);
  }

  StepPrediction operator()(const StepMix& mix) const {
    const Placed& pl = mix.prefill_tokens >= mix.decode_tokens ? m_prefill : m_decode;
    const std::vector<OpSpec> ops = mixed_step_ops(m_spec, mix, m_cfg.tp, m_dtype,
                                                   attention_of(m_cfg), m_cfg.sequence_parallel);
    return predict_step(predict_ops(ops, m_cfg.tp, m_dtype, pl.scopes, m_cfg.layers), m_roofs,
                        pl.options);
  }

  /// Why the configuration cannot be placed on the machine ("": it can).
  const std::string& problem() const { return m_prefill.problem; }

private:
  const RunConfig& m_cfg;
  ModelSpec m_spec;
  DType m_dtype;
  Roofs m_roofs;
  Placed m_prefill, m_decode;
};

} // namespace

std::vector<std::string> trace_problems(const ModelOptions& o, const Machine& m,
                                        TracePrediction& t) {
  std::vector<std::string> problems = option_problems(o);
  if (!problems.empty()) return problems;
  problems = config_problems(o, m, t.cfg);
  if (!problems.empty()) return problems;
  const int64_t capacity = o.serving.scheduler.kv_capacity_tokens;
  try {
    if (!o.serving.trace.empty()) {
      t.source = o.serving.trace;
      t.requests = read_trace(o.serving.trace, capacity);
    } else {
      t.source = "--trace-gen " + o.serving.trace_gen;
      TraceGenerator g = parse_trace_generator(o.serving.trace_gen);
      t.requests = generate_trace(g);
      check_trace(t.requests, capacity, "--trace-gen");
      t.by_rate.clear();
      for (double rate : o.serving.rates) {
        g.rate_per_s = rate; // the lengths are the same draws at every rate; only gaps scale
        char text[32];
        std::snprintf(text, sizeof(text), "--rates %g", rate);
        t.by_rate.push_back({rate, generate_trace(g), {}, 0});
        check_trace(t.by_rate.back().requests, capacity, text);
      }
    }
  } catch (const UsageError& e) {
    return {e.what()};
  }
  // A step of one token of each kind: every roof a step needs, or the one missing.
  StepMix probe;
  probe.entries = {{0, EntryKind::decode, 1, 1}, {1, EntryKind::prefill, 1, 0}};
  probe.decode_tokens = probe.prefill_tokens = probe.decode_sequences = probe.prefill_sequences = 1;
  const Calibration none;
  const StepPredictor predict(t.cfg, o, m, none);
  if (!predict.problem().empty()) return {predict.problem()};
  const StepPrediction s = predict(probe);
  if (!s.missing.empty())
    problems.push_back("no interconnect roof for " + s.missing +
                       ": give --hardware FILE for the link presets");
  return problems;
}

void predict_trace(TracePrediction& t, const ModelOptions& o, const Machine& m,
                   const Calibration& cal) {
  const StepPredictor predict(t.cfg, o, m, cal);
  t.steps.clear();
  auto cost = [&](const StepMix& mix) {
    const StepPrediction s = predict(mix);
    StepSplit step;
    std::copy(std::begin(s.class_ns), std::end(s.class_ns), step.by_class_ns);
    step.ceiling = s.ceiling;
    t.steps.push_back(step);
    return s.step_ns;
  };
  t.schedule = schedule_requests(t.requests, o.serving.scheduler, cost);
  t.metrics = serving_metrics(t.schedule, o.serving.slo_ttft_ms / 1e3, o.serving.slo_tpot_ms / 1e3);
}

void predict_trace_rates(TracePrediction& t, const ModelOptions& o, const Machine& m,
                         const Calibration& cal) {
  for (TracePrediction::AtRate& r : t.by_rate) {
    t.requests = r.requests;
    predict_trace(t, o, m, cal);
    r.metrics = t.metrics;
    r.steps = static_cast<int64_t>(t.schedule.steps.size());
  }
}

void write_trace_file(const TracePrediction& t, const ModelOptions& o, std::ostream& out) {
  const std::string& path = o.serving.write_trace;
  if (path.empty()) return;
  write_trace(path, t.requests, trace_format_of(path));
  out << "wrote the trace's requests to " << path << "\n";
}

namespace {

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char line[256];
  std::snprintf(line, sizeof(line), fmt, a, b, c, d);
  return line;
}

// "TTFT <= 200 ms and TPOT <= 50 ms", or the targets given.
std::string targets(const ServingOptions& s) {
  std::vector<std::string> t;
  if (s.slo_ttft_ms > 0) t.push_back(format("TTFT <= %g ms", s.slo_ttft_ms));
  if (s.slo_tpot_ms > 0) t.push_back(format("TPOT <= %g ms", s.slo_tpot_ms));
  return t.empty() ? "no latency target (--slo-ttft-ms, --slo-tpot-ms)" : join(t, " and ");
}

// The steps by kind and size: how prefill and decode mixed.
void print_mix(std::ostream& out, const ServingSchedule& s) {
  int64_t by_kind[kStepKinds] = {0, 0, 0}, max_tokens = 0, max_seqs = 0;
  double tokens = 0, seqs = 0;
  for (const ScheduledStep& step : s.steps) {
    const StepMix& m = step.mix;
    ++by_kind[static_cast<int>(step_kind(m))];
    tokens += static_cast<double>(m.tokens());
    seqs += static_cast<double>(m.entries.size());
    max_tokens = std::max(max_tokens, m.tokens());
    max_seqs = std::max<int64_t>(max_seqs, static_cast<int64_t>(m.entries.size()));
  }
  const double n = static_cast<double>(std::max<size_t>(1, s.steps.size()));
  out << "steps: " << s.steps.size() << " (prefill only "
      << by_kind[static_cast<int>(StepKind::prefill_only)] << ", decode only "
      << by_kind[static_cast<int>(StepKind::decode_only)] << ", mixed "
      << by_kind[static_cast<int>(StepKind::mixed)] << "); per step "
      << format("%.1f tokens (max %.0f), %.1f sequences (max %.0f)\n", tokens / n,
                static_cast<double>(max_tokens), seqs / n, static_cast<double>(max_seqs));
}

// The steps by ceiling: how many steps each class bound and its share of the predicted time.
void print_ceilings(std::ostream& out, const TracePrediction& t) {
  out << "ceiling: " << steps_by_ceiling(t.steps) << "\n";
}

// --rates: one line per arrival rate, the percentiles, goodput and throughput.
void print_rates(std::ostream& out, const TracePrediction& t, const ModelOptions& o) {
  out << "latency (ms) by arrival rate; goodput at " << targets(o.serving) << "\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%10s %10s %10s %10s %10s %10s %10s %11s %11s %7s\n", "rate/s",
                "ttft p50", "ttft p95", "tpot p50", "tpot p95", "e2e p50", "e2e p95", "goodput/s",
                "through/s", "steps");
  out << line;
  for (const TracePrediction::AtRate& r : t.by_rate) {
    const ServingMetrics& m = r.metrics;
    std::snprintf(line, sizeof(line),
                  "%10g %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %11.3f %11.3f %7lld\n",
                  r.rate_per_s, 1e3 * m.ttft_s.p50, 1e3 * m.ttft_s.p95, 1e3 * m.tpot_s.p50,
                  1e3 * m.tpot_s.p95, 1e3 * m.e2e_s.p50, 1e3 * m.e2e_s.p95, m.goodput_per_s,
                  m.throughput_per_s, static_cast<long long>(r.steps));
    out << line;
  }
}

} // namespace

void print_trace(std::ostream& out, const TracePrediction& t, const ModelOptions& o,
                 const std::string& calibration) {
  const SchedulerConfig& c = o.serving.scheduler;
  const ServingMetrics& m = t.metrics;
  out << "ridgeline model: " << t.requests.size() << " request(s) of " << t.source
      << (t.by_rate.empty()
              ? ""
              : " at each of " + std::to_string(t.by_rate.size()) + " arrival rates (--rates)")
      << " through continuous batching, every step predicted\n";
  out << "configuration: " << (t.cfg.model.empty() ? "custom" : t.cfg.model) << ", " << t.cfg.layers
      << " layer(s), tp " << t.cfg.tp << ", " << t.cfg.dtype << "\n";
  out << "scheduler: token budget " << c.token_budget << ", chunk " << c.chunk << ", max batch "
      << c.max_batch << ", KV cache " << c.kv_capacity_tokens << " tokens\n";
  out << calibration;
  if (!t.by_rate.empty()) {
    print_rates(out, t, o);
    out << "every step is predicted (analytic model), none measured\n";
    return;
  }
  out << "latency (ms)        p50         p95         p99   requests\n";
  const std::pair<const char*, const Percentiles*> rows[] = {
      {"ttft", &m.ttft_s}, {"tpot", &m.tpot_s}, {"e2e", &m.e2e_s}};
  for (const auto& [name, p] : rows) {
    char line[160];
    std::snprintf(line, sizeof(line), "%-10s %12.3f %11.3f %11.3f %10lld\n", name, 1e3 * p->p50,
                  1e3 * p->p95, 1e3 * p->p99, static_cast<long long>(p->count));
    out << line;
  }
  out << "goodput: " << format("%.3f", m.goodput_per_s) << " request(s)/s at " << targets(o.serving)
      << " (" << m.good << " of " << m.requests << "); throughput "
      << format("%.3f request(s)/s over %.3f s\n", m.throughput_per_s, m.span_s);
  print_mix(out, t.schedule);
  print_ceilings(out, t);
  out << "every step is predicted (analytic model), none measured: `run --phase mixed --trace` "
         "replays a trace with measured steps\n";
}

namespace {

// --rates: one row per arrival rate.
Table rate_table(const TracePrediction& t) {
  std::vector<double> rate, goodput, throughput;
  std::vector<int64_t> good, requests, steps;
  std::vector<double> ms[9]; // ttft, tpot, e2e x p50, p95, p99
  for (const TracePrediction::AtRate& r : t.by_rate) {
    const ServingMetrics& m = r.metrics;
    rate.push_back(r.rate_per_s), goodput.push_back(m.goodput_per_s);
    throughput.push_back(m.throughput_per_s), good.push_back(m.good);
    requests.push_back(m.requests), steps.push_back(r.steps);
    const Percentiles* p[3] = {&m.ttft_s, &m.tpot_s, &m.e2e_s};
    for (int k = 0; k < 3; ++k) {
      ms[3 * k].push_back(1e3 * p[k]->p50);
      ms[3 * k + 1].push_back(1e3 * p[k]->p95);
      ms[3 * k + 2].push_back(1e3 * p[k]->p99);
    }
  }
  Table table = {{"rate_per_s", rate}};
  const char* names[9] = {"ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p95_ms",
                          "tpot_p99_ms", "e2e_p50_ms",  "e2e_p95_ms",  "e2e_p99_ms"};
  for (int k = 0; k < 9; ++k)
    table.push_back({names[k], ms[k]});
  table.push_back({"goodput_per_s", goodput});
  table.push_back({"throughput_per_s", throughput});
  table.push_back({"good", good});
  table.push_back({"requests", requests});
  table.push_back({"steps", steps});
  return table;
}

} // namespace

std::vector<std::pair<std::string, Table>> trace_tables(const TracePrediction& t) {
  if (!t.by_rate.empty()) return {{"rates", rate_table(t)}};
  const ServingMetrics& m = t.metrics;
  const Table latency = {
      {"metric", std::vector<std::string>{"ttft", "tpot", "e2e"}},
      {"p50_ms", std::vector<double>{1e3 * m.ttft_s.p50, 1e3 * m.tpot_s.p50, 1e3 * m.e2e_s.p50}},
      {"p95_ms", std::vector<double>{1e3 * m.ttft_s.p95, 1e3 * m.tpot_s.p95, 1e3 * m.e2e_s.p95}},
      {"p99_ms", std::vector<double>{1e3 * m.ttft_s.p99, 1e3 * m.tpot_s.p99, 1e3 * m.e2e_s.p99}},
      {"requests", std::vector<int64_t>{m.ttft_s.count, m.tpot_s.count, m.e2e_s.count}}};
  std::vector<int64_t> id, prompt, output;
  std::vector<double> arrival, ttft, tpot, e2e;
  for (size_t k = 0; k < t.requests.size(); ++k) {
    const RequestTimes& r = t.schedule.requests[k];
    id.push_back(r.id), prompt.push_back(t.requests[k].prompt_tokens);
    output.push_back(r.output_tokens), arrival.push_back(r.arrival_s);
    ttft.push_back(1e3 * r.ttft_s()), tpot.push_back(1e3 * r.tpot_s());
    e2e.push_back(1e3 * r.e2e_s());
  }
  std::vector<double> start, duration;
  std::vector<int64_t> prefill, decode, prefill_seqs, decode_seqs;
  std::vector<std::string> ceiling;
  for (size_t k = 0; k < t.schedule.steps.size(); ++k) {
    const ScheduledStep& s = t.schedule.steps[k];
    start.push_back(1e3 * s.start_s), duration.push_back(1e3 * (s.end_s - s.start_s));
    prefill.push_back(s.mix.prefill_tokens), decode.push_back(s.mix.decode_tokens);
    prefill_seqs.push_back(s.mix.prefill_sequences), decode_seqs.push_back(s.mix.decode_sequences);
    ceiling.emplace_back(ceiling_name(t.steps[k].ceiling));
  }
  return {{"latency", latency},
          {"requests",
           {{"id", id},
            {"arrival_s", arrival},
            {"prompt_tokens", prompt},
            {"output_tokens", output},
            {"ttft_ms", ttft},
            {"tpot_ms", tpot},
            {"e2e_ms", e2e}}},
          {"steps",
           {{"start_ms", start},
            {"duration_ms", duration},
            {"prefill_tokens", prefill},
            {"decode_tokens", decode},
            {"prefill_sequences", prefill_seqs},
            {"decode_sequences", decode_seqs},
            {"ceiling", ceiling}}}};
}

std::string validate_trace(const std::string& path, const RunConfig& measured,
                           const ModelOptions& o, const Machine& m, const Calibration& cal,
                           Table& table) {
  const MeasuredTrace t = read_serving(path);
  const ServingSchedule steps = measured_schedule(t);
  // The configuration the steps ran on, priced as `model --trace` prices a trace's steps.
  RunConfig cfg = measured;
  cfg.phase = "prefill";
  cfg.context = 0;
  const StepPredictor predict(cfg, o, m, cal);
  if (!predict.problem().empty()) throw Error(predict.problem());
  // Each measured step beside its mix's prediction.
  std::vector<double> error, abs_error;
  std::vector<double> by_kind[kStepKinds];
  int64_t count[kCeilingClasses] = {0, 0, 0, 0};
  for (size_t i = 0; i < steps.steps.size(); ++i) {
    const StepMix& mix = steps.steps[i].mix;
    const StepPrediction s = predict(mix);
    if (!s.missing.empty())
      throw Error("no interconnect roof for " + s.missing +
                  ": give --hardware FILE for the link presets");
    error.push_back((s.step_ns - t.step_ns[i]) / t.step_ns[i]);
    abs_error.push_back(std::fabs(error.back()));
    by_kind[static_cast<int>(step_kind(mix))].push_back(error.back());
    if (s.ceiling != Ceiling::none) ++count[static_cast<int>(s.ceiling)];
  }
  // The requests again, each step's time predicted.
  const ServingSchedule predicted = schedule_requests(
      t.requests, t.scheduler, [&](const StepMix& mix) { return predict(mix).step_ns; });
  const ServingMetrics pm = serving_metrics(predicted, t.slo_ttft_s, t.slo_tpot_s);
  const ServingMetrics& mm = t.metrics;
  std::vector<std::string> figure;
  std::vector<double> measured_v, predicted_v, error_pct;
  auto add = [&](const std::string& name, double meas, double pred) {
    figure.push_back(name);
    measured_v.push_back(meas);
    predicted_v.push_back(pred);
    error_pct.push_back(meas > 0 ? 100 * (pred - meas) / meas : 0.0);
  };
  const char* names[3] = {"ttft", "tpot", "e2e"};
  const Percentiles* mp[3] = {&mm.ttft_s, &mm.tpot_s, &mm.e2e_s};
  const Percentiles* pp[3] = {&pm.ttft_s, &pm.tpot_s, &pm.e2e_s};
  for (int k = 0; k < 3; ++k) {
    add(std::string(names[k]) + "_p50_ms", 1e3 * mp[k]->p50, 1e3 * pp[k]->p50);
    add(std::string(names[k]) + "_p95_ms", 1e3 * mp[k]->p95, 1e3 * pp[k]->p95);
    add(std::string(names[k]) + "_p99_ms", 1e3 * mp[k]->p99, 1e3 * pp[k]->p99);
  }
  add("throughput_per_s", mm.throughput_per_s, pm.throughput_per_s);
  add("steps", static_cast<double>(steps.steps.size()),
      static_cast<double>(predicted.steps.size()));
  add("step_ms_p50", percentile(t.step_ns, 50) / 1e6, [&] {
    std::vector<double> ns;
    for (const ScheduledStep& s : predicted.steps)
      ns.push_back((s.end_s - s.start_s) * 1e9);
    return percentile(ns, 50) / 1e6;
  }());
  table = {{"figure", figure},
           {"measured", measured_v},
           {"predicted", predicted_v},
           {"error_pct", error_pct}};

  std::string out = "\ntrace " + t.source + " (" + path +
                    "): " + std::to_string(t.requests.size()) + " request(s), " +
                    std::to_string(steps.steps.size()) + " measured step(s)\n";
  out += format("measured steps against their mixes' predictions: error median %+.1f %%, "
                "|error| median %.1f %%, p95 %.1f %%\n",
                100 * percentile(error, 50), 100 * percentile(abs_error, 50),
                100 * percentile(abs_error, 95));
  for (int k = 0; k < kStepKinds; ++k) {
    if (by_kind[k].empty()) continue;
    char kind_line[200];
    std::snprintf(kind_line, sizeof(kind_line),
                  "  %s: %zu step(s), error median %+.1f %%, p5 %+.1f %%, p95 %+.1f %%\n",
                  step_kind_name(static_cast<StepKind>(k)), by_kind[k].size(),
                  100 * percentile(by_kind[k], 50), 100 * percentile(by_kind[k], 5),
                  100 * percentile(by_kind[k], 95));
    out += kind_line;
  }
  out += "predicted ceiling of the measured steps:";
  for (int c = 0; c < kCeilingClasses; ++c)
    out += std::string(c ? ", " : " ") + ceiling_name(static_cast<Ceiling>(c)) + " " +
           std::to_string(count[c]);
  out += "\nthe measured requests scheduled on predicted steps, against the measured run:\n";
  char line[160];
  std::snprintf(line, sizeof(line), "  %-18s %12s %12s %8s\n", "figure", "measured", "predicted",
                "error");
  out += line;
  for (size_t i = 0; i < figure.size(); ++i) {
    std::snprintf(line, sizeof(line), "  %-18s %12.4f %12.4f %+7.1f%%\n", figure[i].c_str(),
                  measured_v[i], predicted_v[i], error_pct[i]);
    out += line;
  }
  return out;
}

void bind_serving_options(CLI::App& cmd, ServingOptions& s) {
  const char* group = "Serving trace";
  bind_trace_options(
      cmd,
      TraceOptionFields{
          &s.trace,
          &s.trace_gen,
          &s.scheduler.token_budget,
          &s.scheduler.max_batch,
          &s.scheduler.kv_capacity_tokens,
          &s.slo_ttft_ms,
          &s.slo_tpot_ms,
          {"Serving trace (CSV arrival_s,prompt_tokens,output_tokens, or .jsonl): its requests "
           "through continuous batching, every step predicted (docs/SERVING.md)",
           "Generated trace: rate=R (requests/s, Poisson),requests=N,prompt=L,output=L,seed=S; "
           "L is N, A:B (uniform) or A/B/C (one of a list)",
           "Tokens per step, decode and prefill together", "Sequences per step at most",
           "KV cache tokens of all running sequences together (a request holds its prompt + "
           "output from its first step to its last)",
           "Goodput's time-to-first-token target (ms)",
           "Goodput's time-per-output-token target (ms)"}},
      group);
  cmd.add_option("--rates", s.rates,
                 "With --trace-gen: the trace predicted at each of these arrival rates "
                 "(requests/s, comma list) in place of its rate=, from the same seed (the same "
                 "lengths, the gaps scaled): latency percentiles, goodput and throughput per "
                 "rate (`python3 -m ridgeline_analysis latency` draws them)")
      ->delimiter(',')
      ->check(CLI::Range(0.001, 1e9))
      ->group(group);
  cmd.add_option("--write-trace", s.write_trace,
                 "Write the trace's requests to this file (.jsonl: JSONL, else CSV), generated "
                 "or read: a --trace-gen trace kept to be given again with --trace")
      ->group(group);
  cmd.add_option("--chunk", s.scheduler.chunk, "Prefill tokens of one sequence per step at most")
      ->check(integer_in(1, int64_t{1} << 30))
      ->group(group);
}

} // namespace ridgeline::model_detail
