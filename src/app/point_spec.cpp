// The typed point (see point_spec.hpp).
#include "app/point_spec.hpp"

#include <algorithm>
#include <climits>

#include "app/config_mixed.hpp"
#include "core/error.hpp"

namespace ridgeline {

const char* run_phase_name(RunPhase phase) {
  switch (phase) {
  case RunPhase::prefill:
    return "prefill";
  case RunPhase::decode:
    return "decode";
  case RunPhase::train:
    return "train";
  case RunPhase::mixed:
    return "mixed";
  }
  return "?";
}

const char* check_mode_name(CheckMode mode) {
  switch (mode) {
  case CheckMode::automatic:
    return "auto";
  case CheckMode::on:
    return "on";
  case CheckMode::off:
    return "off";
  }
  return "?";
}

PointSpec point_spec(const RunConfig& c, PointOptions parsed) {
  PointSpec s;
  s.model = model_spec(c);
  s.shape = layer_shape(c);
  s.phase = c.phase == "train"    ? RunPhase::train
            : c.phase == "decode" ? RunPhase::decode
            : c.phase == "mixed"  ? RunPhase::mixed
                                  : RunPhase::prefill;
  s.mix = mixed_step_of(c);
  if (trace_run(c)) s.serving = std::make_shared<const ServingPlan>(serving_plan_of(c));
  s.batch = c.batch;
  s.microbatches = c.microbatches;
  s.decode_steps = c.decode_steps;
  s.tp = c.tp;
  s.pp = c.pp;
  s.dp = c.dp;
  s.ep = c.ep;
  s.routing = parse_routing(c.routing, c.routing_seed).value_or(RoutingControl{});
  s.ipc_a2a = c.a2a == "ipc";
  s.schedule = parsed.schedule;
  s.recompute = c.recompute == "full";
  s.sgd_lr = c.sgd_lr;
  s.dp_overlap = c.dp_overlap == "on";
  s.bucket_mb = c.bucket_mb;
  s.dp_shard = c.dp_shard;

  s.cuda = c.backend == "cuda";
  s.dtype = parse_dtype(c.dtype);
  s.overlaps = std::move(parsed.overlaps);
  s.attentions = std::move(parsed.attentions);
  s.gemm_algo = c.gemm_algo == "search"   ? GemmAlgo::search
                : c.gemm_algo == "skinny" ? GemmAlgo::skinny
                                          : GemmAlgo::heuristic;
  s.grouped_gemm = c.grouped_gemm == "loop"     ? GroupedGemm::loop
                   : c.grouped_gemm == "cublas" ? GroupedGemm::cublas
                                                : GroupedGemm::streams;
  if (s.cuda) s.tuning = parsed.tuning;
  s.allreduce = c.allreduce;
  s.allreduce_table = c.allreduce_table;
  s.graphs = c.graphs;
  s.nccl_max_ctas = c.nccl_max_ctas;
  s.nccl_min_ctas = c.nccl_min_ctas;
  s.nccl_cta_policy = c.nccl_cta_policy;
  s.comm_high_priority = c.comm_priority == "high";
  s.overlap_gemm_sms = c.overlap_gemm_sms;

  s.warmup = c.warmup;
  s.iters = c.iters;
  s.check = c.check == "on"    ? CheckMode::on
            : c.check == "off" ? CheckMode::off
                               : CheckMode::automatic;
  s.seed = c.seed;
  s.sample_ms = c.sample_ms;
  s.timeout_s = c.timeout_s;
  return s;
}

PointSpec point_spec(const RunConfig& c) {
  const int64_t ranks = static_cast<int64_t>(c.tp) * c.pp * c.dp;
  ValidatedPoint v = validate_point(c, static_cast<int>(std::min<int64_t>(ranks, INT32_MAX)));
  if (!v.problems.empty()) throw UsageError(v.problems.front());
  return std::move(v.spec);
}

} // namespace ridgeline
