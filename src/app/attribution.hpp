// Attribution of a run's ops and steps against the roofs: each /summary/ops row gets the time
// every roof alone allows it, its ceiling and efficiency; /summary gets the step's time split
// by ceiling and the step's ceiling. The arithmetic is models/attribution.hpp's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "app/run_data.hpp"
#include "models/attribution.hpp"
#include "models/roofs.hpp"
#include "models/work_model.hpp"
#include "parallel/grid.hpp"

namespace ridgeline {

/// What the run's ops are, as the work model describes them.
struct AttributionInput {
  std::vector<OpSpec> specs; ///< one layer's ops on one rank
  std::vector<OpSpec> p2p;   ///< pipeline transfers (collective "sendrecv" between 2 ranks)
  /// Ops of the stage outside the layers (train: gradient zeroing, data-parallel reductions,
  /// pipeline exchanges and flush), each collective with its own group size.
  std::vector<OpSpec> stage;
  /// Ops no roof applies to (waits: no work of their own), with the reason the report gives.
  std::map<std::string, std::string> no_roof;
  int64_t layers = 1; ///< layers of the stage
  int64_t microbatches = 1;
  int tp = 1;
  DType dtype = DType::f32;
  std::string transport; ///< the job's interconnect transport
  GridScopes scopes;     ///< where the grid's groups sit on the job's nodes
  std::string graph_op;  ///< non-empty: each microbatch is one replayed graph, recorded as this op
};

/// Adds the bounds, ceiling and efficiency of every op of `summary`, and the step split and
/// ceiling attributes (ceiling, step_<class>_ns, exposed_interconnect_ns, attribution,
/// ops_over_ceiling, step_flops, step_hbm_bytes, step_comm_bytes, roofs_source[, roofs_missing]
/// [, unattributed_ops: every op left with ceiling none, and why]).
void attribute(RunSummary& summary, const AttributionInput& input, const Roofs& roofs);

/// Each op of `specs` bounded by `roofs` as the work model prices it (op_work() under `in`'s
/// tp, dtype, scopes and transport).
std::vector<OpBounds> work_model_bounds(const std::vector<OpSpec>& specs,
                                        const AttributionInput& in, const Roofs& roofs);
/// A step that the timeline cannot resolve (a replayed graph, a trace run's step) split by
/// ceiling in the proportions of its ops' `bounds` (work_model_bounds()), each op
/// in.layers x in.microbatches times a step: split_step_by_bounds().
StepSplit split_by_work_model(double step_ns, const std::vector<OpBounds>& bounds,
                              const AttributionInput& in);

/// The work of one op for attribution: its per-instance costs, collective, group and the
/// group's scope (p2p ops: scopes.p2p; collectives: the scope of their CommGroup).
OpWork op_work(const OpSpec& spec, const OpCost& cost, int tp, DType dtype,
               const GridScopes& scopes = {});

} // namespace ridgeline
