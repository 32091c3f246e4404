// A plan's ops bound once to their registry indexes (models/op_registry.hpp), for both executors
// (TpStage: prefill, decode and mixed steps; TrainStage: forward and backward): each index's
// op-table id and plan entry, so that a layer's loops do no lookups. The names, kinds, lanes and
// passes are the registry's, the costs the plan's (models/work_model.hpp, models/layer_plan.hpp):
// an index only says which of its entries an executor's call site is.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "models/op_registry.hpp"
#include "models/work_model.hpp"

namespace ridgeline::layer_op {

/// A plan's ops by registry index (LayerOp). bind() interns every entry of the plan into the op
/// table in the plan's order (so the table's ids are the plan's order, whichever entries have an
/// index) and keeps, per index, the id and a pointer to the entry: the plan must stay where it is,
/// and be bound again once replaced. An index the plan does not hold is absent (id -1, no entry).
class LayerOpIndex {
public:
  void bind(const std::vector<OpSpec>& plan, OpTable& table) {
    m_id.fill(-1);
    m_spec.fill(nullptr);
    for (const OpSpec& o : plan) {
      const int32_t id = table.intern(o.name, o.kind);
      const int i = op_index(o.name);
      if (i < 0) continue;
      m_id[static_cast<size_t>(i)] = id;
      m_spec[static_cast<size_t>(i)] = &o;
    }
  }
  int32_t id(int o) const { return m_id[static_cast<size_t>(o)]; }
  /// The entry of `o`, or null where the plan has none.
  const OpSpec* find(int o) const { return m_spec[static_cast<size_t>(o)]; }
  /// The entry of `o`, which the plan must hold.
  const OpSpec& spec(int o) const {
    const OpSpec* s = find(o);
    RIDGELINE_REQUIRE(s != nullptr, std::string("the layer plan has no op ") + kOpRows[o].name);
    return *s;
  }
  /// A record of op `o` of `layer` on its lane, with `share` of its plan cost (a part's, a
  /// unit's or a piece's), enqueued on the compute lane.
  ScopedOp scope(Recorder& rec, int o, int64_t layer, double share = 1.0) const {
    const OpSpec& s = spec(o);
    return ScopedOp(rec, id(o), static_cast<int32_t>(layer), s.lane, scaled(s.cost, share),
                    Lane::compute);
  }
  /// A record of op `o` that runs with `folded` fused into its kernel: its cost and theirs (an
  /// index the plan lacks, such as rotary in a layer without it, adds nothing).
  ScopedOp fused_scope(Recorder& rec, int o, std::initializer_list<int> folded,
                       int64_t layer) const {
    const OpSpec& s = spec(o);
    OpCost cost = s.cost;
    for (int f : folded)
      if (const OpSpec* other = find(f)) cost = cost + other->cost;
    return ScopedOp(rec, id(o), static_cast<int32_t>(layer), s.lane, cost, Lane::compute);
  }
  /// A ce-ring site's adds and copies (enqueued on the compute lane) recorded as its collective
  /// `o`, without cost: its bytes are counted once, by the puts' record.
  ScopedOp ring_scope(Recorder& rec, int o, int64_t layer) const {
    spec(o); // throws where the plan lacks it
    return ScopedOp(rec, id(o), static_cast<int32_t>(layer), Lane::comm, OpCost{}, Lane::compute);
  }

private:
  std::array<int32_t, op_count> m_id{};
  std::array<const OpSpec*, op_count> m_spec{};
};

} // namespace ridgeline::layer_op
