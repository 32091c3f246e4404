// Timeline reduction: every rank's timeline into the run summary.
#include "app/summary.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace ridgeline {
namespace {

bool is_comm(OpKind k) { return k == OpKind::collective || k == OpKind::p2p; }

double duration(const TimelineRecord& r) { return static_cast<double>(r.t_end_ns - r.t_start_ns); }

// Per iteration: the longest rank's span from its first op start to its last op end.
std::map<int32_t, double> step_spans(const std::vector<std::vector<TimelineRecord>>& timelines,
                                     bool warmup) {
  std::map<int32_t, double> steps;
  for (const auto& rank : timelines) {
    std::map<int32_t, std::pair<int64_t, int64_t>> span;
    for (const TimelineRecord& r : rank) {
      if ((r.warmup != 0) != warmup) continue;
      auto it = span.find(r.iteration);
      if (it == span.end()) span[r.iteration] = {r.t_start_ns, r.t_end_ns};
      else it->second = {std::min(it->second.first, r.t_start_ns), std::max(it->second.second, r.t_end_ns)};
    }
    for (const auto& [it, se] : span) {
      const double d = static_cast<double>(se.second - se.first);
      steps[it] = std::max(steps[it], d);
    }
  }
  return steps;
}

std::vector<double> values(const std::map<int32_t, double>& m) {
  std::vector<double> v;
  for (const auto& kv : m) v.push_back(kv.second);
  return v;
}

}  // namespace

RunSummary summarize_run(const OpTable& ops, const std::vector<std::vector<TimelineRecord>>& timelines) {
  RunSummary s;
  s.step_ns = values(step_spans(timelines, false));
  s.warmup_step_ns = values(step_spans(timelines, true));
  s.step = summarize(s.step_ns);
  s.warmup_to_steady = static_cast<int64_t>(warmup_to_steady(s.warmup_step_ns, s.step.p50, 0.10));

  for (size_t id = 0; id < ops.size(); ++id) {
    const OpKind kind = ops.kind(static_cast<int32_t>(id));
    using Key = std::tuple<int32_t, int32_t, int32_t, int>;  // layer, microbatch, iteration, rank
    std::map<Key, double> instance;     // collectives: rank folded to -1 with max
    std::map<std::pair<int32_t, int>, double> per_step;  // (iteration, rank) -> summed time
    const TimelineRecord* sample = nullptr;
    int ranks_with_op = 0;
    size_t timed_instances = 0;
    for (size_t rank = 0; rank < timelines.size(); ++rank) {
      bool seen = false;
      for (const TimelineRecord& r : timelines[rank]) {
        if (r.warmup || r.op_id != static_cast<int32_t>(id)) continue;
        seen = true;
        sample = &r;
        ++timed_instances;
        const Key key{r.layer, r.microbatch, r.iteration, is_comm(kind) ? -1 : static_cast<int>(rank)};
        double& t = instance[key];
        t = std::max(t, duration(r));
        per_step[{r.iteration, static_cast<int>(rank)}] += duration(r);
      }
      ranks_with_op += seen ? 1 : 0;
    }
    if (!sample) continue;
    std::vector<double> inst;
    for (const auto& kv : instance) inst.push_back(kv.second);
    std::map<int32_t, double> step_total;
    for (const auto& [k, t] : per_step) step_total[k.first] = std::max(step_total[k.first], t);

    OpAggregate a;
    a.name = ops.name(static_cast<int32_t>(id));
    a.kind = op_kind_name(kind);
    a.lane = lane_name(static_cast<Lane>(sample->lane));
    a.count = static_cast<int64_t>(timed_instances / static_cast<size_t>(std::max(1, ranks_with_op)));
    a.p50_ns = percentile(inst, 50);
    a.mean_ns = mean(inst);
    a.per_step_p50_ns = percentile(values(step_total), 50);
    a.share = s.step.p50 > 0 ? a.per_step_p50_ns / s.step.p50 : 0;
    a.flops = sample->flops;
    a.hbm_bytes = sample->hbm_bytes;
    a.comm_bytes = sample->comm_bytes;
    if (a.p50_ns > 0) {
      a.achieved_tflops = a.flops / a.p50_ns / 1e3;
      a.achieved_gbps = (is_comm(kind) ? a.comm_bytes : a.hbm_bytes) / a.p50_ns;
    }
    s.ops.push_back(a);
  }
  return s;
}

}  // namespace ridgeline
