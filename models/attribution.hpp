// Attribution arithmetic: the time each roof alone allows an op, the op's ceiling and
// efficiency, and a step's time split by ceiling. Pure functions of the work model's costs and
// the measured roofs; src/app applies them to a run's summary.
#pragma once

#include <string>
#include <vector>

#include "core/timeline.hpp"
#include "models/roofs.hpp"

namespace ridgeline {

/// The roof that bounds an op or a step.
enum class Ceiling : int { compute = 0, hbm = 1, interconnect = 2, launch = 3, none = 4 };
inline constexpr int kCeilingClasses = 4; ///< compute, hbm, interconnect, launch
const char* ceiling_name(Ceiling c);

/// What attribution needs to know of one op instance.
struct OpWork {
  OpKind kind = OpKind::other;
  double flops = 0;
  double hbm_bytes = 0;
  double comm_bytes = 0;      ///< nccl-tests size of a collective's message (bytes)
  std::string collective;     ///< registry name for collective/p2p ops ("" otherwise)
  int64_t group_size = 1;     ///< ranks taking part in the collective
  Scope scope = Scope::intra; ///< where those ranks sit: the interconnect roof of that scope
  double busbw_factor = 0;    ///< bus bytes / size of that collective at group_size
  DType dtype = DType::f32;
  /// Kernels the op launches; the launch bound is kernels x the launch floor.
  int kernels = 1;
};

/// The time each roof alone allows one op instance, in ns.
struct OpBounds {
  double compute_ns = 0;      ///< flops / peak of its dtype (gemm, attention, norm, elementwise)
  double hbm_ns = 0;          ///< hbm_bytes / memory bandwidth at its working set
  double interconnect_ns = 0; ///< floor alpha + comm_bytes x factor / floor beta
  double launch_ns = 0;       ///< kernels x launch floor
  double bound_ns = 0;        ///< the largest of the four
  Ceiling ceiling = Ceiling::none;
  std::string missing; ///< a roof the op needed and the roofs lack ("" when complete)

  double of(Ceiling c) const;
};

/// The bounds of `op` under `roofs` on `transport` (the collectives' transport); a collective's
/// interconnect roof is the row of its collective, group size and scope, never another scope's.
OpBounds op_bounds(const OpWork& op, const Roofs& roofs, const std::string& transport);

/// Efficiency = bound / measured; above this an op ran faster than its own ceiling allows,
/// which means a wrong roof or a wrong work model.
inline constexpr double kEfficiencyLimit = 1.05;

/// One op's share of a step for the step split.
struct StepPart {
  double per_step_ns = 0;          ///< the op's measured time in one step (all its instances)
  bool comm = false;               ///< collective or p2p (the interconnect lane)
  Ceiling ceiling = Ceiling::none; ///< the op's own ceiling (compute lane ops)
};

/// A step's measured time split by ceiling, on the critical path.
struct StepSplit {
  double by_class_ns[kCeilingClasses] = {0, 0, 0, 0}; ///< indexed by Ceiling
  double exposed_interconnect_ns = 0;
  Ceiling ceiling = Ceiling::none; ///< the class holding the largest share
};

/// Splits a measured step: compute-lane ops count in their own ceiling's class; the
/// interconnect gets the step time the compute lane leaves (step - compute ops), at most the
/// interconnect ops' own time (what overlap hid is not on the critical path); what is left
/// beyond both (gaps between ops: host launch and synchronisation) counts as launch. When the
/// compute ops alone exceed the step (ops of different ranks), they are scaled to fit.
StepSplit split_step(double step_ns, const std::vector<StepPart>& parts);

/// The split of a step that the timeline cannot resolve (a replayed graph): each class's share
/// of the ops' summed bounds (the work model under the roofs), applied to the measured step.
StepSplit split_step_by_bounds(double step_ns, const std::vector<OpBounds>& bounds,
                               const std::vector<double>& instances_per_step);

/// Steps split by ceiling, added up: "steps bound by compute N, hbm N, interconnect N, launch
/// N; time by ceiling compute X %, hbm X %, interconnect X %, launch X %" (the shares of their
/// summed classes; a step of ceiling none is counted in no class).
std::string steps_by_ceiling(const std::vector<StepSplit>& steps);

} // namespace ridgeline
