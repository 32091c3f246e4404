// One point of a job (see point.hpp).
#include "app/point.hpp"

#include <cstdio>

#include "app/moe_point.hpp"
#include "app/tp_point.hpp"
#include "app/train_point.hpp"
#include "core/error.hpp"
#include "models/work_model.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {

ResolvedPoint resolve_point(JobContext& job, RunConfig& cfg) {
  const std::vector<std::string>& hosts = job.mpi().hosts();
  const NodeMap nodes = map_nodes(hosts);
  ResolvedPoint resolved;
  std::vector<std::string>& problems = resolved.problems;
  // A --tp auto that cannot be resolved leaves no grid for validation to judge. The grid reads
  // only --tp/--pp/--dp, which no default touches, so it is resolved first.
  problems = resolve_grid(cfg, nodes, job.mpi().size());
  apply_defaults(cfg, job.backend_name(), nodes.nodes);
  if (problems.empty()) {
    ValidatedPoint validated = validate_point(cfg, job.mpi().size());
    problems = std::move(validated.problems);
    resolved.spec = std::move(validated.spec);
  }
  if (cfg.backend == "cuda" && job.gpus() == 0)
    problems.push_back("--backend cuda: no CUDA device is visible");
  // TP is innermost, so that a TP group sits on one node's links; a group that spans nodes is
  // refused unless asked for.
  if (cfg.tp > 1 && !cfg.allow_tp_across_nodes && static_cast<int64_t>(hosts.size()) % cfg.tp == 0)
    if (const std::string span = tp_span_problem(hosts, cfg.tp); !span.empty())
      problems.push_back(span + ": place the ranks node by node (mpirun --map-by ppr:N:node, srun "
                                "--distribution=block) with --tp at most the ranks of a node "
                                "(--tp auto), or pass --allow-tp-across-nodes");
  if (!all_ranks_true(job.mpi().world(), problems.empty())) {
    if (problems.empty()) problems.emplace_back("another rank rejected the configuration");
    return resolved;
  }
  const PointSpec& spec = resolved.spec;
  // Memory: this stage, plus the TP=1 reference model when checking, against the smallest
  // free memory of any rank, before anything is allocated.
  const int64_t free_bytes = job.min_free_bytes();
  const CheckPlan check = plan_check(spec, job.cuda(), free_bytes);
  const double overlap =
      spec.scheduled() ? scheduled_overlap_bytes(spec) : overlap_memory_bytes(spec);
  const double need =
      (spec.scheduled() ? scheduled_memory_bytes(spec)
                        : stage_memory_bytes(spec.model, spec.shape, spec.stage_layers()) +
                              mixed_cache_bytes(spec.model, spec.mix, spec.tp, spec.dtype,
                                                spec.stage_layers())) +
      overlap + (check.enabled ? check.ref_bytes : 0.0) + moe_memory_bytes(spec, check.enabled);
  // A point plans for 90 % of it: the rest stays for the CUDA context, cuBLASLt's workspaces
  // and NCCL's buffers.
  const double plannable = 0.9 * static_cast<double>(free_bytes);
  if (free_bytes >= 0 && need > plannable) {
    char msg[400];
    std::snprintf(msg, sizeof(msg),
                  "does not fit in memory: needs about %.2f GiB per rank (weights, caches, "
                  "activations%s%s), more than the 90 %% (%.2f GiB) of the smallest free memory "
                  "of any rank (%.2f GiB) that a point may plan for",
                  need / 1073741824.0, overlap > 0 ? ", overlap buffers" : "",
                  check.enabled ? ", TP=1 check" : "", plannable / 1073741824.0,
                  static_cast<double>(free_bytes) / 1073741824.0);
    problems.push_back(std::string(msg) + " (" + job.free_bytes_bound() + ")");
  }
  return resolved;
}

PointResult run_point(JobContext& job, const PointSpec& spec, const Roofs& roofs,
                      Watchdog& watchdog) {
  if (spec.scheduled()) return run_scheduled_point(job, spec, roofs, watchdog);
  return run_tp_point(job, spec, roofs, watchdog);
}

} // namespace ridgeline
