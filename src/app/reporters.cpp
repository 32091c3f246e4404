// Reporters: console tables, JSON and markdown (see reporters.hpp).
#include "app/reporters.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>

#include "app/config_mixed.hpp"
#include "app/summary.hpp"
#include "app/sweep.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "models/attribution.hpp"
#include "models/layer_plan.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

namespace {

// A configuration value as text, "?" where the file lacks it.
std::string config_text(const RunData& d, const char* key) {
  const AttrValue* v = find_attr(d.config, key);
  return v ? attr_to_string(*v) : std::string("?");
}

// The run's configuration as the report's first line (debug builds warned first).
void print_run_line(std::ostream& out, const RunData& d) {
  auto cfg = [&](const char* key) { return config_text(d, key); };
  const AttrValue* debug = find_attr(d.stack, "debug_build");
  if (debug && attr_to_string(*debug) == "1")
    out << "WARNING: DEBUG BUILD -- timings are not representative; rebuild with "
           "-DCMAKE_BUILD_TYPE=Release\n";
  // A mixed step's tokens are its mix's, not --batch, --seq and --context.
  const AttrValue* share = find_attr(d.config, "prefill_share");
  const double* share_value = share ? std::get_if<double>(share) : nullptr;
  const std::string step =
      cfg("phase") == "mixed"
          ? "prefill-seqs=" + cfg("prefill_seqs") + " chunk=" + cfg("chunk") +
                " chunk-context=" + cfg("chunk_context") + " decode-batch=" + cfg("decode_batch") +
                (share_value ? " prefill-share=" + share_text(*share_value) : "")
          : "batch=" + cfg("batch") + " seq=" + cfg("seq") + " context=" + cfg("context");
  char line[512];
  std::snprintf(line, sizeof(line),
                "ridgeline run: model %s  h=%s heads=%s kv=%s ffn=%s layers=%s  %s %s  tp=%s pp=%s "
                "dp=%s  backend=%s %s  attention=%s\n",
                cfg("model").c_str(), cfg("hidden").c_str(), cfg("heads").c_str(),
                cfg("kv_heads").c_str(), cfg("ffn_hidden").c_str(), cfg("layers").c_str(),
                cfg("phase").c_str(), step.c_str(), cfg("tp").c_str(), cfg("pp").c_str(),
                cfg("dp").c_str(), cfg("backend").c_str(), cfg("dtype").c_str(),
                cfg("attention").c_str());
  out << line;
}

// Returns the names of the ops measured faster than their ceiling allows.
std::vector<std::string> print_op_table(std::ostream& out, const RunSummary& summary, bool giga,
                                        bool attributed) {
  char line[512];
  std::snprintf(line, sizeof(line), "%-16s %-11s %-7s %7s %11s %7s %10s %10s", "op", "kind", "lane",
                "count", "p50 (us)", "share", giga ? "GFLOP/s" : "TFLOP/s", "GB/s");
  out << line;
  // The scope of each collective's roof, where the file records it (written since scopes).
  bool scoped = false;
  for (const OpAggregate& a : summary.ops)
    scoped = scoped || !a.scope.empty();
  scoped = scoped && attributed;
  if (attributed) {
    std::snprintf(line, sizeof(line), " %11s %-12s %6s%s", "bound (us)", "ceiling", "eff",
                  scoped ? "  scope" : "");
    out << line;
  }
  out << "\n";
  std::vector<std::string> over;
  for (const OpAggregate& a : summary.ops) {
    // A collective's reduction adds are no compute rate worth reading: its rate is GB/s. An op
    // without FLOPs (or bytes) has no such rate at all, rather than a rate of 0.
    const bool comm = a.kind == "collective" || a.kind == "p2p";
    const double bytes = comm ? a.comm_bytes : a.hbm_bytes;
    char rate[32] = "-", gbps[32] = "-";
    if (!comm && a.flops > 0)
      std::snprintf(rate, sizeof(rate), "%.3f", a.achieved_tflops * (giga ? 1e3 : 1.0));
    if (bytes > 0) std::snprintf(gbps, sizeof(gbps), "%.2f", a.achieved_gbps);
    std::snprintf(line, sizeof(line), "%-16s %-11s %-7s %7lld %11.2f %6.1f%% %10s %10s",
                  a.name.c_str(), a.kind.c_str(), a.lane.c_str(), static_cast<long long>(a.count),
                  a.p50_ns / 1e3, 100.0 * a.share, rate, gbps);
    out << line;
    if (attributed) {
      if (a.ceiling == "none")
        std::snprintf(line, sizeof(line), " %11s %-12s %6s", "-", "none", "-");
      else
        std::snprintf(line, sizeof(line), " %11.2f %-12s %6.3f", a.bound_ns / 1e3,
                      a.ceiling.c_str(), a.efficiency);
      out << line;
      if (scoped) out << "  " << (a.scope.empty() ? "-" : a.scope);
      if (a.efficiency > kEfficiencyLimit) over.push_back(a.name);
    }
    out << "\n";
  }
  return over;
}

// What the op table's columns mean, and the notes some runs need beneath it.
void print_op_legend(std::ostream& out, const RunData& d, bool giga, bool attributed) {
  out << "share: the op's time in a step (the union of its instances' intervals on a rank, so that "
         "instances in flight together count once; the longest rank's; median over the timed "
         "iterations) over the p50 step, at most 100 %; p50: the median instance; "
      << (giga ? "GFLOP/s" : "TFLOP/s")
      << " and GB/s at the median instance (HBM bytes; collectives: their message bytes; -: an "
         "op without FLOPs or bytes, and collectives' FLOPs)";
  if (attributed)
    out << "; bound: the time its ceiling (the roof allowing the longest time) allows one "
           "instance; eff = bound / p50";
  bool scoped = false;
  for (const OpAggregate& a : d.summary.ops)
    scoped = scoped || !a.scope.empty();
  if (attributed && scoped)
    out << "; scope: where a collective's group sat (intra: one node; inter: one rank per node; "
           "hier: several nodes, several ranks on some), whose interconnect roof bounds it";
  out << "\n";
  bool posted = false; // MPI's data-parallel reductions: open from their post to one wait
  for (const OpAggregate& a : d.summary.ops)
    posted = posted || a.name == op::dp_allreduce || a.name == op::dp_reducescatter;
  if (posted && config_text(d, "backend") == "host")
    out << "dp buckets (host): each instance runs from its post to the wait that completes every "
           "bucket of the step\n";
  if (const AttrValue* none = find_attr(d.summary.attrs, "unattributed_ops"))
    out << "ceiling none: " << attr_to_string(*none) << "\n";
}

// The step's percentiles and, for decode, the per-token time by bins of context length.
void print_step_times(std::ostream& out, const RunSummary& summary) {
  const SeriesStats& st = summary.step;
  char line[512];
  std::snprintf(line, sizeof(line),
                "step time (ms): p50 %.4f  p95 %.4f  p99 %.4f  mean %.4f  min %.4f  max %.4f  "
                "(%zu timed iterations; steady after %lld of %zu warm-up)\n",
                st.p50 / 1e6, st.p95 / 1e6, st.p99 / 1e6, st.mean / 1e6, st.min / 1e6, st.max / 1e6,
                st.count, static_cast<long long>(summary.warmup_to_steady),
                summary.warmup_step_ns.size());
  out << line;
  const std::vector<DecodeBin> bins = decode_bins(summary);
  if (bins.empty()) return;
  // Each timed iteration generated one token per sequence: the step is the per-token time.
  std::snprintf(line, sizeof(line),
                "per token (ms): p50 %.4f  p95 %.4f  p99 %.4f  over %zu tokens per sequence, "
                "context %lld to %lld keys\n",
                st.p50 / 1e6, st.p95 / 1e6, st.p99 / 1e6, st.count,
                static_cast<long long>(bins.front().context_first),
                static_cast<long long>(bins.back().context_last));
  out << line;
  std::snprintf(line, sizeof(line), "%-19s %7s %10s %10s %10s %10s\n", "context (keys)", "tokens",
                "p50 ms", "p95 ms", "p99 ms", "mean ms");
  out << line;
  for (const DecodeBin& b : bins) {
    const std::string range =
        std::to_string(b.context_first) + "-" + std::to_string(b.context_last);
    std::snprintf(line, sizeof(line), "%-19s %7lld %10.4f %10.4f %10.4f %10.4f\n", range.c_str(),
                  static_cast<long long>(b.tokens), b.p50_ns / 1e6, b.p95_ns / 1e6, b.p99_ns / 1e6,
                  b.mean_ns / 1e6);
    out << line;
  }
}

// A run across nodes: each node's compute time and span per step, and the node that stands out.
void print_nodes(std::ostream& out, const RunSummary& summary) {
  if (summary.nodes.empty()) return;
  char line[512];
  std::snprintf(line, sizeof(line), "%-20s %5s %32s %32s\n", "node", "ranks",
                "compute ms: p50 [95 % interval]", "span ms: p50 [95 % interval]");
  out << line;
  auto cell = [](const Interval& i) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.4f [%.4f, %.4f]", i.median / 1e6, i.lo / 1e6, i.hi / 1e6);
    return std::string(text);
  };
  std::string slow;
  for (const NodeFigures& f : summary.nodes) {
    std::snprintf(line, sizeof(line), "%-20s %5lld %32s %32s%s\n", f.node.c_str(),
                  static_cast<long long>(f.ranks), cell(f.compute).c_str(), cell(f.span).c_str(),
                  f.slow ? "  slow" : "");
    out << line;
    if (f.slow) slow += (slow.empty() ? "" : ", ") + f.node;
  }
  out << "per node and step: compute, the longest of its ranks' compute-lane time (no wait for "
         "other ranks); span, the longest of its ranks' first-to-last op; slow: a compute "
         "interval above the other nodes' together\n";
  out << (slow.empty() ? std::string("slow nodes: none stands out\n")
                       : "slow nodes: " + slow +
                             " (every collective waits for them: the whole job runs at their "
                             "pace)\n");
}

// The p50 step split by ceiling, where the run was attributed.
void print_step_by_ceiling(std::ostream& out, const RunSummary& summary) {
  const AttrValue* ceiling = find_attr(summary.attrs, "ceiling");
  if (ceiling == nullptr) return;
  auto ms = [&](const char* key) {
    const AttrValue* v = find_attr(summary.attrs, key);
    return v ? std::get<double>(*v) / 1e6 : 0.0;
  };
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "step by ceiling (ms, p50 step): compute %.4f  hbm %.4f  interconnect %.4f  launch %.4f"
      "  -> ceiling: %s\n",
      ms("step_compute_ns"), ms("step_hbm_ns"), ms("step_interconnect_ns"), ms("step_launch_ns"),
      attr_to_string(*ceiling).c_str());
  out << line;
}

} // namespace

void print_report(std::ostream& out, const RunData& d, bool all_scalars) {
  print_run_line(out, d);
  // CPU runs reach a fraction of a TFLOP/s: their rates read better in GFLOP/s. Collectives
  // show no FLOP rate (below), so theirs does not choose the unit.
  double fastest_tflops = 0;
  for (const OpAggregate& a : d.summary.ops)
    if (a.kind != "collective" && a.kind != "p2p")
      fastest_tflops = std::max(fastest_tflops, a.achieved_tflops);
  const bool giga = fastest_tflops < 1.0;
  bool attributed = false;
  for (const OpAggregate& a : d.summary.ops)
    attributed = attributed || a.ceiling != "none";
  const std::vector<std::string> over = print_op_table(out, d.summary, giga, attributed);
  print_op_legend(out, d, giga, attributed);
  print_step_times(out, d.summary);
  print_nodes(out, d.summary);
  print_step_by_ceiling(out, d.summary);
  for (const std::string& name : over)
    out << "WARNING: " << name << " ran faster than its ceiling allows (efficiency > "
        << kEfficiencyLimit << "): a roof or the work model is wrong for it\n";
  if (!all_scalars) return;
  for (const auto& [k, v] : d.summary.attrs)
    out << k << ": " << attr_to_string(v) << "\n";
}

void print_headline(std::ostream& out, const RunSummary& summary, const std::string& label,
                    const std::string& check, const std::string& axis,
                    const std::string& crossover_value, const std::string& crossover_note) {
  const AttrValue* ceiling = find_attr(summary.attrs, "ceiling");
  char line[512];
  std::snprintf(line, sizeof(line), "\nanswer: %s: step p50 %.4f ms (p99 %.4f)", label.c_str(),
                summary.step.p50 / 1e6, summary.step.p99 / 1e6);
  out << line;
  const char* keys[] = {"step_compute_ns", "step_hbm_ns", "step_interconnect_ns", "step_launch_ns"};
  const char* names[] = {"compute", "hbm", "interconnect", "launch"};
  double total = 0, ns[4];
  for (int c = 0; c < 4; ++c) {
    const AttrValue* v = find_attr(summary.attrs, keys[c]);
    ns[c] = v ? std::get<double>(*v) : 0.0;
    total += ns[c];
  }
  if (ceiling != nullptr && total > 0) {
    out << ", bound by " << attr_to_string(*ceiling) << " (";
    for (int c = 0; c < 4; ++c) {
      std::snprintf(line, sizeof(line), "%s%s %.0f %%", c ? ", " : "", names[c],
                    100 * ns[c] / total);
      out << line;
    }
    out << ")";
  } else {
    out << " (no roofs: not attributed)";
  }
  out << "; check " << check << "\n";
  if (ceiling != nullptr && attr_to_string(*ceiling) == "interconnect")
    out << "        the interconnect is the ceiling here\n";
  else if (!crossover_value.empty())
    out << "        the interconnect would become the ceiling at " << axis << "=" << crossover_value
        << " (predicted: " << crossover_note << ")\n";
  else if (!crossover_note.empty())
    out << "        along " << axis << ": " << crossover_note << "\n";
}

void print_overlap_table(std::ostream& out, const std::vector<StrategyResult>& results) {
  char line[256];
  std::snprintf(line, sizeof(line), "%-12s %10s %10s %10s %10s %8s %8s %8s %8s %-13s %s\n",
                "overlap", "step ms", "comp ms", "comm ms", "exposed", "eff", "interf", "c-interf",
                "vs none", "bound", "check");
  out << "\n" << line;
  double none_ns = 0;
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].name == "none") none_ns = results[i].loops.plain_ns;
  bool silent = false; // a strategy whose step runs no collective
  for (size_t i = 0; i < results.size(); ++i) {
    const Attrs& metrics = results[i].summary.attrs;
    auto num = [&](const char* key) { return std::get<double>(*find_attr(metrics, key)); };
    const LoopTimes& t = results[i].loops;
    bool comm = false;
    for (const OpAggregate& a : results[i].summary.ops)
      comm = comm || a.kind == "collective" || a.kind == "p2p";
    silent = silent || !comm;
    // Without collectives the comm-only loop times the loop alone: no figure of overlap.
    auto cell = [&](const char* format, double v) {
      char text[32] = "-";
      if (comm) std::snprintf(text, sizeof(text), format, v);
      return std::string(text);
    };
    std::snprintf(line, sizeof(line), "%-12s %10.4f %10.4f %10s %10s %8s %8.3f %8s %8s %-13s %s\n",
                  results[i].name.c_str(), t.plain_ns / 1e6, t.compute_only_ns / 1e6,
                  cell("%.4f", t.comm_only_ns / 1e6).c_str(),
                  cell("%.4f", num("exposed_comm_ns") / 1e6).c_str(),
                  cell("%.3f", num("overlap_efficiency")).c_str(), num("interference"),
                  cell("%.3f", num("comm_interference")).c_str(),
                  none_ns > 0 ? std::to_string(t.plain_ns / none_ns).substr(0, 5).c_str() : "-",
                  std::get<std::string>(*find_attr(metrics, "bound")).c_str(),
                  results[i].check.status.c_str());
    out << line;
  }
  out << "step, comp(ute-only), comm(-only): uninstrumented, the median of the per-iteration "
         "means of each loop's sub-batches (max over ranks) over "
      << interleaved_rounds(results.size())
      << " round(s) in which the strategies take turns; "
         "exposed = max(0, step - compute-only); eff = (serialized - step) / min(comp, comm); "
         "interf = compute time in the overlapped step / compute-only time; c-interf = the same "
         "for the collectives (their own slow-down beside the compute)";
  if (silent) out << "; -: the step runs no collective (nothing to expose or overlap)";
  out << "\n";
}

void print_pipeline_table(std::ostream& out, const std::vector<StrategyResult>& results,
                          int stages) {
  char line[256];
  std::snprintf(line, sizeof(line), "%-16s %5s %10s %9s %9s %9s %11s %11s %11s %s\n", "strategy",
                "stage", "step ms", "bubble", "theory", "sim", "p2p ms", "dp ms", "act MiB",
                "check");
  out << "\n" << line;
  for (const StrategyResult& r : results) {
    const Attrs& a = r.summary.attrs;
    auto num = [&](const std::string& key) {
      const AttrValue* v = find_attr(a, key);
      return v && std::holds_alternative<double>(*v) ? std::get<double>(*v) : 0.0;
    };
    for (int p = 0; p < stages; ++p) {
      const std::string k = "stage" + std::to_string(p) + ".";
      char sim[32] = "-";
      if (find_attr(a, "bubble_simulated"))
        std::snprintf(sim, sizeof(sim), "%.3f", num("bubble_simulated"));
      std::snprintf(line, sizeof(line),
                    "%-16s %5d %10.4f %9.3f %9.3f %9s %11.4f %11.4f %11.2f %s\n",
                    p == 0 ? r.name.c_str() : "", p, r.loops.plain_ns / 1e6, num(k + "bubble"),
                    num("bubble_theory"), sim, num(k + "p2p_exposed_ns") / 1e6,
                    num(k + "dp_exposed_ns") / 1e6, num(k + "peak_activation_bytes") / 1048576.0,
                    p == 0 ? r.check.status.c_str() : "");
      out << line;
    }
  }
  out << "bubble: share of the iteration (median of the timed ones) in which the stage ran "
         "neither its compute nor its own collectives; theory: the schedule's bubble with free "
         "transfers (sim: at the measured action times, train with a pipeline); p2p: time the "
         "compute waited for pipeline receives; dp: data-parallel reduction left "
         "after the stage's last compute op; act: peak activation memory of the microbatches in "
         "flight\n";
}

void print_attention_table(std::ostream& out, const std::vector<StrategyResult>& results) {
  char line[320];
  std::snprintf(line, sizeof(line), "%-14s %10s %10s %7s %9s %-8s %11s %7s %-13s %s\n", "attention",
                "step ms", "attn ms", "share", "TFLOP/s", "ceiling", "ceil TFLOP/s", "eff",
                "step ceiling", "check");
  out << "\n" << line;
  for (const StrategyResult& r : results) {
    const OpAggregate* a = nullptr;
    for (const OpAggregate& o : r.summary.ops)
      if (o.name == op::attention) a = &o;
    const AttrValue* step_ceiling = find_attr(r.summary.attrs, "ceiling");
    const double ceil_tflops = a != nullptr && a->bound_ns > 0 ? a->flops / a->bound_ns / 1e3 : 0;
    std::snprintf(
        line, sizeof(line), "%-14s %10.4f %10.4f %6.1f%% %9.2f %-8s %11.2f %7.3f %-13s %s\n",
        r.name.c_str(), r.loops.plain_ns / 1e6, a != nullptr ? a->per_step_p50_ns / 1e6 : 0.0,
        a != nullptr ? 100 * a->share : 0.0, a != nullptr ? a->achieved_tflops : 0.0,
        a != nullptr ? a->ceiling.c_str() : "-", ceil_tflops, a != nullptr ? a->efficiency : 0.0,
        step_ceiling != nullptr ? attr_to_string(*step_ceiling).c_str() : "-",
        r.check.status.c_str());
    out << line;
  }
  out << "attn: the attention op per step (median); TFLOP/s at its median instance (causal "
         "forward: 2 * 2 * b * h * s * ctx * d / 2); ceil TFLOP/s: what its ceiling allows "
         "(the roofs); eff = ceiling time / op time\n";
}

void print_repeats(std::ostream& out, const std::vector<StrategyResult>& results, size_t used) {
  auto number = [](const Attrs& a, const char* key) {
    const AttrValue* v = find_attr(a, key);
    return v == nullptr ? 0.0 : std::get<double>(*v);
  };
  for (const StrategyResult& r : results) {
    const AttrValue* repeats = find_attr(r.summary.attrs, "repeats");
    if (repeats == nullptr) continue;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "%s: step p50 over %lld repeats %.4f ms, 95 %% interval [%.4f, %.4f] ms\n",
                  r.name.c_str(), static_cast<long long>(std::get<int64_t>(*repeats)),
                  number(r.summary.attrs, "step_p50_median_ns") / 1e6,
                  number(r.summary.attrs, "step_p50_lo_ns") / 1e6,
                  number(r.summary.attrs, "step_p50_hi_ns") / 1e6);
    out << line;
  }
  out << "(the file keeps repeat " << used + 1 << ", the median; intervals: " << kIntervalMethod
      << ")\n";
}

void print_gpu_table(std::ostream& out, const std::vector<StrategyResult>& results, int sample_ms) {
  const char* const loops[] = {"instrumented", "step", "compute_only", "comm_only"};
  bool any = false;
  for (const StrategyResult& r : results)
    any = any || find_attr(r.summary.attrs, "gpu.instrumented.sm_clock_mhz");
  if (!any) return;
  out << "\ngpu (NVML every " << sample_ms
      << " ms, mean of all ranks): SM MHz / W / share of samples power-capped\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%-12s %-22s %-22s %-22s %-22s\n", "overlap", loops[0],
                loops[1], loops[2], loops[3]);
  out << line;
  for (const StrategyResult& r : results) {
    // "-": a loop this strategy did not run, or a figure NVML did not give.
    std::string cells[4] = {"-", "-", "-", "-"};
    for (int i = 0; i < 4; ++i) {
      const std::string key = std::string("gpu.") + loops[i];
      const AttrValue* mhz = find_attr(r.summary.attrs, key + ".sm_clock_mhz");
      if (mhz == nullptr) continue;
      const double watts = std::get<double>(*find_attr(r.summary.attrs, key + ".power_w"));
      char power[16] = "-";
      if (watts >= 0) std::snprintf(power, sizeof(power), "%3.0f", watts);
      char cell[64];
      std::snprintf(cell, sizeof(cell), "%4.0f / %3s / %3.0f%%", std::get<double>(*mhz), power,
                    100 *
                        std::get<double>(*find_attr(r.summary.attrs, key + ".power_capped_share")));
      cells[i] = cell;
    }
    std::snprintf(line, sizeof(line), "%-12s %-22s %-22s %-22s %-22s\n", r.name.c_str(),
                  cells[0].c_str(), cells[1].c_str(), cells[2].c_str(), cells[3].c_str());
    out << line;
  }
}

namespace {

std::string fixed(double value, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << value;
  return s.str();
}

template <class T> const std::vector<T>& column_of(const NamedTable& t, const char* name) {
  for (const Column& c : t.table)
    if (c.name == name) return std::get<std::vector<T>>(c.values);
  throw UsageError(t.path + ": no field " + name);
}

int64_t int_of(const Attrs& attrs, const char* key, int64_t otherwise) {
  const AttrValue* v = find_attr(attrs, key);
  return v != nullptr && std::holds_alternative<int64_t>(*v) ? std::get<int64_t>(*v) : otherwise;
}

std::string text_of(const Attrs& attrs, const char* key) {
  const AttrValue* v = find_attr(attrs, key);
  return v != nullptr ? attr_to_string(*v) : std::string("?");
}

std::string collective_name(const NamedTable& t) {
  return t.path.substr(t.path.find_last_of('/') + 1);
}

double average_busbw(const NamedTable& t) {
  const std::vector<double>& busbw = column_of<double>(t, "busbw_gbps");
  double sum = 0;
  for (double b : busbw)
    sum += b;
  return busbw.empty() ? 0 : sum / static_cast<double>(busbw.size());
}

} // namespace

bool is_collective_result(const NamedTable& t) {
  const std::string suffix = "_samples_ns";
  return t.path.rfind("/collectives/", 0) == 0 &&
         !(t.path.size() >= suffix.size() &&
           t.path.compare(t.path.size() - suffix.size(), suffix.size(), suffix) == 0);
}

void print_collective_header(std::ostream& os, const NamedTable& t, const Attrs& config) {
  const Attrs& a = t.attrs;
  const int64_t groups = int_of(a, "groups", 1);
  const bool in_place = int_of(a, "in_place", 0) != 0;
  const bool graph = int_of(config, "graph", 0) != 0;
  os << "#\n# " << collective_name(t) << ": group size " << int_of(a, "group_size", 0) << " x "
     << groups << " group(s), backend " << text_of(a, "backend") << ", transport "
     << text_of(a, "transport")
     << (find_attr(a, "scope") != nullptr
             ? ", scope " + text_of(a, "scope") + " (" +
                   std::to_string(int_of(a, "group_nodes", 1)) + " node(s) a group)"
             : "")
     << (find_attr(a, "buffers") != nullptr && text_of(a, "buffers") != "ordinary"
             ? ", symmetric window"
             : "")
     << ", " << (in_place ? "in-place" : "out-of-place")
     << (int_of(config, "in_place", 0) != 0 && !in_place ? " (no in-place form)" : "")
     << (graph ? ", CUDA graph of " + std::to_string(int_of(config, "iters", 0)) + " launches" : "")
     << ", busbw factor " << fixed(std::get<double>(*find_attr(a, "busbw_factor")), 4) << "\n";
  os << "#" << std::setw(13) << "size(B)" << std::setw(14) << "count(elems)" << std::setw(8)
     << "type" << std::setw(7) << "redop" << std::setw(6) << "root" << std::setw(11) << "time(us)"
     << std::setw(13) << "algbw(GB/s)" << std::setw(13) << "busbw(GB/s)" << std::setw(8) << "#wrong"
     << std::setw(11) << "p50(us)" << std::setw(11) << "p99(us)";
  if (groups > 1) os << std::setw(17) << "busbw_all(GB/s)";
  os << "\n";
}

void print_collective_rows(std::ostream& os, const NamedTable& t, size_t first, size_t last) {
  const auto& size = column_of<int64_t>(t, "size_bytes");
  const auto& count = column_of<int64_t>(t, "count");
  const auto& wrong = column_of<int64_t>(t, "wrong");
  const auto& mean = column_of<double>(t, "time_mean_ns");
  const auto& p50 = column_of<double>(t, "time_p50_ns");
  const auto& p99 = column_of<double>(t, "time_p99_ns");
  const auto& algbw = column_of<double>(t, "algbw_gbps");
  const auto& busbw = column_of<double>(t, "busbw_gbps");
  const bool all_groups = int_of(t.attrs, "groups", 1) > 1;
  for (size_t i = first; i < std::min(last, size.size()); ++i) {
    os << std::setw(14) << size[i] << std::setw(14) << count[i] << std::setw(8)
       << text_of(t.attrs, "dtype") << std::setw(7) << text_of(t.attrs, "redop") << std::setw(6)
       << int_of(t.attrs, "root", -1) << std::setw(11) << fixed(mean[i] / 1e3, 2) << std::setw(13)
       << fixed(algbw[i], 3) << std::setw(13) << fixed(busbw[i], 3) << std::setw(8) << wrong[i]
       << std::setw(11) << fixed(p50[i] / 1e3, 2) << std::setw(11) << fixed(p99[i] / 1e3, 2);
    if (all_groups)
      os << std::setw(17) << fixed(column_of<double>(t, "busbw_all_groups_gbps")[i], 3);
    os << "\n";
  }
}

void print_collective_footer(std::ostream& os, const NamedTable& t) {
  os << "# Avg bus bandwidth    : " << fixed(average_busbw(t), 3) << " GB/s\n";
}

void print_collectives_summary(std::ostream& os, const std::vector<NamedTable>& tables,
                               const NamedTable* roof) {
  os << "#\n# Avg bus bandwidth and interconnect roof (time = alpha + size * factor / beta)\n";
  // Files written since scopes name where group 0's ranks sat.
  bool scoped = false;
  if (roof != nullptr)
    for (const Column& c : roof->table)
      scoped = scoped || c.name == "scope";
  os << "#" << std::setw(16) << "collective" << std::setw(22) << "avg busbw(GB/s)" << std::setw(12)
     << "alpha(us)" << std::setw(13) << "beta(GB/s)" << (scoped ? "   scope" : "") << "\n";
  for (const NamedTable& t : tables) {
    if (!is_collective_result(t)) continue;
    const std::string name = collective_name(t);
    os << "#" << std::setw(16) << name << std::setw(22) << fixed(average_busbw(t), 3);
    bool fitted = false;
    if (roof != nullptr) {
      const auto& names = column_of<std::string>(*roof, "collective");
      for (size_t i = 0; i < names.size() && !fitted; ++i)
        if (names[i] == name) {
          os << std::setw(12) << fixed(column_of<double>(*roof, "alpha_us")[i], 2) << std::setw(13)
             << fixed(column_of<double>(*roof, "beta_gbps")[i], 3);
          if (scoped) os << "   " << column_of<std::string>(*roof, "scope")[i];
          fitted = true;
        }
    }
    if (!fitted) os << std::setw(25) << "(not fitted)";
    os << "\n";
  }
}

void print_collectives_file(std::ostream& os, const RunData& d) {
  const NamedTable* roof = nullptr;
  for (const NamedTable& t : d.tables) {
    if (t.path == "/roofs/interconnect") roof = &t;
    if (!is_collective_result(t)) continue;
    print_collective_header(os, t, d.config);
    print_collective_rows(os, t, 0, column_of<int64_t>(t, "size_bytes").size());
    print_collective_footer(os, t);
  }
  print_collectives_summary(os, d.tables, roof);
}

namespace {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string json_value(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return json_number(*d);
  return json_string(std::get<std::string>(v));
}

// Cell `row` of a column as JSON, or as markdown text.
std::string cell(const Column& c, size_t row, bool json) {
  if (const auto* i = std::get_if<std::vector<int64_t>>(&c.values))
    return std::to_string((*i)[row]);
  if (const auto* d = std::get_if<std::vector<double>>(&c.values)) {
    if (json) return json_number((*d)[row]);
    return attr_to_string(AttrValue((*d)[row]));
  }
  const std::string& text = std::get<std::vector<std::string>>(c.values)[row];
  return json ? json_string(text) : text;
}

size_t rows(const Table& t) {
  if (t.empty()) return 0;
  return std::visit([](const auto& v) { return v.size(); }, t.front().values);
}

} // namespace

namespace {

void json_document(std::ostream& out, const std::vector<std::pair<std::string, Attrs>>& attrs,
                   const std::vector<std::pair<std::string, Table>>& tables) {
  out << "{";
  const char* sep = "\n  ";
  for (const auto& [name, group] : attrs) {
    out << sep << json_string(name) << ": {";
    for (size_t i = 0; i < group.size(); ++i)
      out << (i ? ", " : "") << json_string(group[i].first) << ": " << json_value(group[i].second);
    out << "}";
    sep = ",\n  ";
  }
  for (const auto& [name, table] : tables) {
    out << sep << json_string(name) << ": [";
    for (size_t r = 0; r < rows(table); ++r) {
      out << (r ? ",\n    {" : "\n    {");
      for (size_t c = 0; c < table.size(); ++c)
        out << (c ? ", " : "") << json_string(table[c].name) << ": " << cell(table[c], r, true);
      out << "}";
    }
    out << "]";
    sep = ",\n  ";
  }
  out << "\n}\n";
}

void markdown_document(std::ostream& out, const std::string& title,
                       const std::vector<std::pair<std::string, Attrs>>& attrs,
                       const std::vector<std::pair<std::string, Table>>& tables) {
  out << "# " << title << "\n";
  for (const auto& [name, group] : attrs) {
    out << "\n## " << name << "\n\n";
    for (const auto& [key, value] : group)
      out << "- `" << key << "`: " << attr_to_string(value) << "\n";
  }
  for (const auto& [name, table] : tables) {
    out << "\n## " << name << "\n\n|";
    for (const Column& c : table)
      out << " " << c.name << " |";
    out << "\n|";
    for (size_t c = 0; c < table.size(); ++c)
      out << " --- |";
    out << "\n";
    for (size_t r = 0; r < rows(table); ++r) {
      out << "|";
      for (const Column& c : table)
        out << " " << cell(c, r, false) << " |";
      out << "\n";
    }
  }
}

} // namespace

void write_json(const std::string& path, const std::vector<std::pair<std::string, Attrs>>& attrs,
                const std::vector<std::pair<std::string, Table>>& tables) {
  write_text_file(path, [&](std::ostream& out) { json_document(out, attrs, tables); });
}

void write_markdown(const std::string& path, const std::string& title,
                    const std::vector<std::pair<std::string, Attrs>>& attrs,
                    const std::vector<std::pair<std::string, Table>>& tables) {
  write_text_file(path, [&](std::ostream& out) { markdown_document(out, title, attrs, tables); });
}

ConsoleReporter::ConsoleReporter(const MpiSession& mpi, std::function<void(std::ostream&)> print)
    : m_mpi(mpi), m_print(std::move(print)) {}

void ConsoleReporter::write() {
  if (m_mpi.rank() == 0) m_print(std::cout);
}

Hdf5Reporter::Hdf5Reporter(const MpiSession& mpi, const std::string& path, bool every_rank,
                           Writer writer)
    : m_mpi(mpi), m_path(path), m_every_rank(every_rank), m_writer(std::move(writer)),
      m_file(path, "--out", !every_rank || mpi.rank() == 0) {}

std::vector<NamedFile> Hdf5Reporter::outputs() const {
  return {{m_path, "--out"}};
}

void Hdf5Reporter::write() {
  if (m_path.empty() || (!m_every_rank && m_mpi.rank() != 0)) return;
  // A path that fails on any rank moves every rank to rank 0's fallback.
  m_file.write([&](const std::string& path) {
    m_note = m_writer(m_every_rank ? broadcast_string(m_mpi.world(), path, 0) : path);
  });
}

std::vector<const OutputFile*> Hdf5Reporter::files() const {
  if (m_path.empty()) return {};
  return {&m_file};
}

SummaryReporter::SummaryReporter(const MpiSession& mpi, const std::string& json,
                                 const std::string& markdown, std::string title)
    : m_mpi(mpi), m_title(std::move(title)), m_json_path(json), m_markdown_path(markdown),
      m_json(json, "--json"), m_markdown(markdown, "--markdown") {}

void SummaryReporter::set(std::vector<std::pair<std::string, Attrs>> attrs,
                          std::vector<std::pair<std::string, Table>> tables) {
  m_attrs = std::move(attrs);
  m_tables = std::move(tables);
}

std::vector<NamedFile> SummaryReporter::outputs() const {
  return {{m_json_path, "--json"}, {m_markdown_path, "--markdown"}};
}

void SummaryReporter::write() {
  if (m_mpi.rank() != 0) return;
  if (!m_json_path.empty())
    m_json.write([&](const std::string& path) { write_json(path, m_attrs, m_tables); });
  if (!m_markdown_path.empty())
    m_markdown.write(
        [&](const std::string& path) { write_markdown(path, m_title, m_attrs, m_tables); });
}

std::vector<const OutputFile*> SummaryReporter::files() const {
  std::vector<const OutputFile*> files;
  if (!m_json_path.empty()) files.push_back(&m_json);
  if (!m_markdown_path.empty()) files.push_back(&m_markdown);
  return files;
}

JobReports::JobReports(const CommandContext& ctx, std::vector<Reporter*> reporters)
    : m_ctx(ctx), m_reporters(std::move(reporters)) {}

std::vector<std::string> JobReports::file_problems(std::vector<NamedFile> inputs) const {
  std::vector<NamedFile> outputs;
  for (const Reporter* r : m_reporters)
    for (NamedFile& f : r->outputs())
      outputs.push_back(std::move(f));
  return check_outputs(m_ctx, outputs, std::move(inputs));
}

int JobReports::finish(int failure) {
  for (Reporter* r : m_reporters)
    r->write();
  int status = 0;
  if (m_ctx.mpi.rank() == 0) {
    std::vector<const OutputFile*> files;
    for (const Reporter* r : m_reporters)
      for (const OutputFile* f : r->files()) {
        files.push_back(f);
        if (!f->lost()) std::cout << "wrote " << f->path() << r->wrote_note() << "\n";
      }
    status = failure != 0 ? failure : output_status(files);
  }
  RIDGELINE_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, m_ctx.mpi.world()));
  return status;
}

} // namespace ridgeline
