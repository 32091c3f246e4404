// One point of a job (see point.hpp).
#include "app/point.hpp"

#include <algorithm>
#include <cstdio>

#include "app/tp_point.hpp"
#include "app/train_point.hpp"
#include "core/error.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

ResolvedPoint resolve_point(JobContext& job, RunConfig& cfg) {
  apply_defaults(cfg, job.backend_name());
  ResolvedPoint resolved;
  std::vector<std::string>& problems = resolved.problems;
  problems = validate(cfg, job.mpi().size());
  if (cfg.backend == "cuda" && job.gpus() == 0)
    problems.push_back("--backend cuda: no CUDA device is visible");
  // TP is innermost (world rank = (dp_rank * pp + pp_rank) * tp + tp_rank) so that a TP group
  // sits on one node's links; a group that spans nodes is refused unless asked for.
  const std::vector<std::string> hosts = allgather_strings(job.mpi().world(), job.mpi().hostname());
  if (cfg.tp > 1 && !cfg.allow_tp_across_nodes && static_cast<int64_t>(hosts.size()) % cfg.tp == 0)
    for (size_t g = 0; g < hosts.size(); g += static_cast<size_t>(cfg.tp))
      if (std::any_of(hosts.begin() + static_cast<std::ptrdiff_t>(g),
                      hosts.begin() + static_cast<std::ptrdiff_t>(g) + cfg.tp,
                      [&](const std::string& h) { return h != hosts[g]; })) {
        problems.push_back("the TP group of world ranks " + std::to_string(g) + ".." +
                           std::to_string(g + static_cast<size_t>(cfg.tp) - 1) + " spans nodes (" +
                           hosts[g] +
                           " and others): place --tp ranks on one "
                           "node (--map-by, --ntasks-per-node) or pass --allow-tp-across-nodes");
        break;
      }
  if (!all_ranks_true(job.mpi().world(), problems.empty())) {
    if (problems.empty()) problems.emplace_back("another rank rejected the configuration");
    return resolved;
  }
  const PointSpec& spec = resolved.spec = point_spec(cfg);
  // Memory: this stage, plus the TP=1 reference model when checking, against the smallest
  // free memory of any rank, before anything is allocated.
  const int64_t free_bytes = job.min_free_bytes();
  const CheckPlan check = plan_check(spec, job.cuda(), free_bytes);
  const double overlap = overlap_memory_bytes(spec);
  const double need =
      (spec.scheduled() ? scheduled_memory_bytes(spec)
                        : stage_memory_bytes(spec.model, spec.shape, spec.stage_layers())) +
      overlap + (check.enabled ? check.ref_bytes : 0.0);
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
