// Attribution arithmetic (see attribution.hpp).
#include "models/attribution.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ridgeline {

const char* ceiling_name(Ceiling c) {
  switch (c) {
  case Ceiling::compute:
    return "compute";
  case Ceiling::hbm:
    return "hbm";
  case Ceiling::interconnect:
    return "interconnect";
  case Ceiling::launch:
    return "launch";
  case Ceiling::none:
    break;
  }
  return "none";
}

double OpBounds::of(Ceiling c) const {
  switch (c) {
  case Ceiling::compute:
    return compute_ns;
  case Ceiling::hbm:
    return hbm_ns;
  case Ceiling::interconnect:
    return interconnect_ns;
  case Ceiling::launch:
    return launch_ns;
  case Ceiling::none:
    break;
  }
  return 0;
}

OpBounds op_bounds(const OpWork& op, const Roofs& roofs, const std::string& transport) {
  OpBounds b;
  const bool comm = op.kind == OpKind::collective || op.kind == OpKind::p2p;
  if (comm) {
    // A collective's own reduction and its HBM traffic are inside the interconnect roof, which
    // was measured on the same collective: only that roof and the launch floor apply.
    if (op.group_size > 1 && op.comm_bytes > 0) {
      const InterconnectRoof* r =
          roofs.interconnect_for(op.collective, op.group_size, transport, op.scope);
      if (r == nullptr) {
        b.missing = op.collective + " over " + std::to_string(op.group_size) + " ranks (" +
                    scope_name(op.scope) + ", " + transport + ")";
      } else {
        const double bus_bytes = op.comm_bytes * op.busbw_factor;
        b.interconnect_ns = r->floor_alpha_us * 1e3 +
                            (std::isinf(r->floor_beta_gbps) ? 0.0 : bus_bytes / r->floor_beta_gbps);
      }
    }
  } else {
    const double peak = roofs.peak_tflops(op.dtype);
    if (op.flops > 0) {
      if (peak > 0)
        b.compute_ns = op.flops / (peak * 1e3);
      else
        b.missing = std::string("GEMM peak of ") + dtype_name(op.dtype);
    }
    const double gbps = roofs.memory_gbps(op.hbm_bytes);
    if (op.hbm_bytes > 0) {
      if (gbps > 0)
        b.hbm_ns = op.hbm_bytes / gbps;
      else
        b.missing = "memory bandwidth";
    }
  }
  // Without its own roof an op has no ceiling: the launch floor alone would misname it.
  if (!b.missing.empty()) return b;
  b.launch_ns = op.kernels * roofs.launch_floor_ns();
  const Ceiling order[] = {Ceiling::compute, Ceiling::hbm, Ceiling::interconnect, Ceiling::launch};
  for (Ceiling c : order)
    if (b.of(c) > b.bound_ns) {
      b.bound_ns = b.of(c);
      b.ceiling = c;
    }
  return b;
}

namespace {
Ceiling largest_class(const double (&t)[kCeilingClasses]) {
  Ceiling c = Ceiling::none;
  double best = 0;
  for (int i = 0; i < kCeilingClasses; ++i)
    if (t[i] > best) {
      best = t[i];
      c = static_cast<Ceiling>(i);
    }
  return c;
}
} // namespace

StepSplit split_step(double step_ns, const std::vector<StepPart>& parts) {
  StepSplit s;
  double compute_lane = 0, comm_lane = 0;
  for (const StepPart& p : parts)
    (p.comm ? comm_lane : compute_lane) += p.per_step_ns;
  const double scale = compute_lane > step_ns && compute_lane > 0 ? step_ns / compute_lane : 1.0;
  for (const StepPart& p : parts)
    if (!p.comm) {
      // An op with no ceiling (no roof applied) is overhead, like the gaps between ops.
      const Ceiling c = p.ceiling == Ceiling::none ? Ceiling::launch : p.ceiling;
      s.by_class_ns[static_cast<int>(c)] += p.per_step_ns * scale;
    }
  const double left = std::max(0.0, step_ns - compute_lane * scale);
  s.exposed_interconnect_ns = std::min(left, comm_lane);
  s.by_class_ns[static_cast<int>(Ceiling::interconnect)] += s.exposed_interconnect_ns;
  s.by_class_ns[static_cast<int>(Ceiling::launch)] += left - s.exposed_interconnect_ns;
  s.ceiling = largest_class(s.by_class_ns);
  return s;
}

StepSplit split_step_by_bounds(double step_ns, const std::vector<OpBounds>& bounds,
                               const std::vector<double>& instances_per_step) {
  StepSplit s;
  double total = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (bounds[i].ceiling == Ceiling::none) continue;
    const double t = bounds[i].bound_ns * instances_per_step[i];
    s.by_class_ns[static_cast<int>(bounds[i].ceiling)] += t;
    total += t;
  }
  if (total > 0)
    for (double& t : s.by_class_ns)
      t *= step_ns / total;
  s.exposed_interconnect_ns = s.by_class_ns[static_cast<int>(Ceiling::interconnect)];
  s.ceiling = largest_class(s.by_class_ns);
  return s;
}

std::string steps_by_ceiling(const std::vector<StepSplit>& steps) {
  int64_t count[kCeilingClasses] = {0, 0, 0, 0};
  double class_ns[kCeilingClasses] = {0, 0, 0, 0}, total_ns = 0;
  for (const StepSplit& s : steps) {
    if (s.ceiling != Ceiling::none) ++count[static_cast<int>(s.ceiling)];
    for (int c = 0; c < kCeilingClasses; ++c)
      class_ns[c] += s.by_class_ns[c], total_ns += s.by_class_ns[c];
  }
  std::string text = "steps bound by";
  for (int c = 0; c < kCeilingClasses; ++c)
    text += std::string(c ? ", " : " ") + ceiling_name(static_cast<Ceiling>(c)) + " " +
            std::to_string(count[c]);
  text += "; time by ceiling";
  for (int c = 0; c < kCeilingClasses; ++c) {
    char share[64];
    std::snprintf(share, sizeof(share), "%s %s %.1f %%", c ? "," : "",
                  ceiling_name(static_cast<Ceiling>(c)),
                  total_ns > 0 ? 100 * class_ns[c] / total_ns : 0.0);
    text += share;
  }
  return text;
}

} // namespace ridgeline
