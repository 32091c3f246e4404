// Attribution of a run summary (see attribution.hpp).
#include "app/attribution.hpp"

#include <map>
#include <set>

#include "app/command_support.hpp"
#include "collectives/collective_bench.hpp"

namespace ridgeline {
namespace {

const OpSpec* find_spec(const AttributionInput& in, const std::string& name) {
  for (const std::vector<OpSpec>* list : {&in.specs, &in.p2p, &in.stage})
    for (const OpSpec& s : *list)
      if (s.name == name) return &s;
  return nullptr;
}

void store_bounds(OpAggregate& a, const OpBounds& b) {
  a.compute_bound_ns = b.compute_ns;
  a.hbm_bound_ns = b.hbm_ns;
  a.interconnect_bound_ns = b.interconnect_ns;
  a.launch_bound_ns = b.launch_ns;
  a.bound_ns = b.bound_ns;
  a.ceiling = ceiling_name(b.ceiling);
  a.efficiency = a.p50_ns > 0 ? b.bound_ns / a.p50_ns : 0;
}

} // namespace

OpWork op_work(const OpSpec& spec, const OpCost& cost, int tp, DType dtype,
               const GridScopes& scopes) {
  OpWork w;
  w.kind = spec.kind;
  w.flops = cost.flops;
  w.hbm_bytes = cost.hbm_bytes;
  w.comm_bytes = cost.comm_bytes;
  w.collective = spec.collective;
  w.group_size = spec.kind == OpKind::p2p ? 2 : spec.group_size > 0 ? spec.group_size : tp;
  w.dtype = dtype;
  w.scope = spec.kind == OpKind::p2p      ? scopes.p2p
            : spec.group == CommGroup::pp ? scopes.pp
            : spec.group == CommGroup::dp ? scopes.dp
            : spec.group == CommGroup::ep ? scopes.ep
                                          : scopes.tp;
  if (const CollectiveSpec* c = find_collective(spec.collective))
    w.busbw_factor = c->busbw_factor(static_cast<int>(w.group_size));
  return w;
}

std::vector<OpBounds> work_model_bounds(const std::vector<OpSpec>& specs,
                                        const AttributionInput& in, const Roofs& roofs) {
  std::vector<OpBounds> bounds;
  for (const OpSpec& s : specs)
    bounds.push_back(
        op_bounds(op_work(s, s.cost, in.tp, in.dtype, in.scopes), roofs, in.transport));
  return bounds;
}

StepSplit split_by_work_model(double step_ns, const std::vector<OpBounds>& bounds,
                              const AttributionInput& in) {
  const std::vector<double> per_step(bounds.size(),
                                     static_cast<double>(in.layers * in.microbatches));
  return split_step_by_bounds(step_ns, bounds, per_step);
}

void attribute(RunSummary& summary, const AttributionInput& in, const Roofs& roofs) {
  const double step_ns = summary.step.p50;
  const double iters = static_cast<double>(std::max<size_t>(1, summary.step.count));
  std::set<std::string> missing;
  std::map<std::string, std::string> lacks; // op -> the roof it needed and the roofs lack
  StepSplit split;
  double step_flops = 0, step_hbm = 0, step_comm = 0;
  int64_t over = 0;
  if (!in.graph_op.empty()) {
    // A replayed graph has one timeline op per microbatch: its ops' bounds come from the work
    // model, and the step is split in the proportions of those bounds.
    const std::vector<OpBounds> bounds = work_model_bounds(in.specs, in, roofs);
    OpBounds total;
    for (const OpBounds& b : bounds)
      if (!b.missing.empty()) missing.insert(b.missing);
    split = split_by_work_model(step_ns, bounds, in);
    for (OpAggregate& a : summary.ops) {
      if (a.name != in.graph_op) continue;
      for (size_t i = 0; i < bounds.size(); ++i) {
        const double n = static_cast<double>(in.layers);
        total.compute_ns += bounds[i].compute_ns * n;
        total.hbm_ns += bounds[i].hbm_ns * n;
        total.interconnect_ns += bounds[i].interconnect_ns * n;
        total.launch_ns += bounds[i].launch_ns * n;
        total.bound_ns += bounds[i].bound_ns * n;
      }
      total.ceiling = split.ceiling;
      store_bounds(a, total);
    }
    for (const OpAggregate& a : summary.ops) {
      const double n = static_cast<double>(a.count) / iters;
      step_flops += a.flops * n;
      step_hbm += a.hbm_bytes * n;
      step_comm += a.comm_bytes * n;
    }
  } else {
    std::vector<StepPart> parts;
    for (OpAggregate& a : summary.ops) {
      const OpSpec* spec = find_spec(in, a.name);
      const bool comm = a.kind == "collective" || a.kind == "p2p";
      const double n = static_cast<double>(a.count) / iters;
      step_flops += a.flops * n;
      step_hbm += a.hbm_bytes * n;
      step_comm += a.comm_bytes * n;
      Ceiling ceiling = Ceiling::none;
      if (spec != nullptr) {
        const OpWork work =
            op_work(*spec, OpCost{a.flops, a.hbm_bytes, a.comm_bytes}, in.tp, in.dtype, in.scopes);
        const OpBounds b = op_bounds(work, roofs, in.transport);
        if (comm) a.scope = scope_name(work.scope);
        if (!b.missing.empty()) {
          missing.insert(b.missing);
          lacks[a.name] = b.missing;
        }
        store_bounds(a, b);
        ceiling = b.ceiling;
      }
      parts.push_back({a.per_step_p50_ns, comm, ceiling});
    }
    split = split_step(step_ns, parts);
  }
  for (const OpAggregate& a : summary.ops)
    if (a.efficiency > kEfficiencyLimit) ++over;
  Attrs& attrs = summary.attrs;
  attrs.emplace_back("ceiling", std::string(ceiling_name(split.ceiling)));
  const Ceiling classes[] = {Ceiling::compute, Ceiling::hbm, Ceiling::interconnect,
                             Ceiling::launch};
  for (Ceiling c : classes)
    attrs.emplace_back(std::string("step_") + ceiling_name(c) + "_ns",
                       split.by_class_ns[static_cast<int>(c)]);
  attrs.emplace_back("exposed_interconnect_ns", split.exposed_interconnect_ns);
  attrs.emplace_back("attribution", std::string(in.graph_op.empty()
                                                    ? "measured ops"
                                                    : "work model under the roofs (graph replay)"));
  attrs.emplace_back("ops_over_ceiling", over);
  attrs.emplace_back("step_flops", step_flops);
  attrs.emplace_back("step_hbm_bytes", step_hbm);
  attrs.emplace_back("step_comm_bytes", step_comm);
  attrs.emplace_back("roofs_source", roofs.source);
  if (!missing.empty())
    attrs.emplace_back("roofs_missing",
                       join(std::vector<std::string>(missing.begin(), missing.end()), "; "));
  // Every op left without a ceiling, and why: a reader of the table sees `none` and its reason.
  std::vector<std::string> unattributed;
  for (const OpAggregate& a : summary.ops) {
    if (a.ceiling != "none") continue;
    std::string why = "not in the work model";
    if (const auto it = lacks.find(a.name); it != lacks.end())
      why = "the roofs lack " + it->second;
    else if (const auto it = in.no_roof.find(a.name); it != in.no_roof.end())
      why = it->second;
    else if (!in.graph_op.empty() && a.name != in.graph_op)
      why = "outside the replayed graph";
    unattributed.push_back(a.name + ": " + why);
  }
  if (!unattributed.empty()) attrs.emplace_back("unattributed_ops", join(unattributed, "; "));
}

} // namespace ridgeline
