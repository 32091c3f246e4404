// The ops a stage executor runs in a layer, one index each, for both executors (TpStage:
// prefill, decode and mixed steps; TrainStage: forward and backward), and a plan's ops bound to
// them once: each index's op-table id and plan entry, so that a layer's loops do no lookups. The
// names, kinds, costs, lanes and passes are the plan's (models/work_model.hpp,
// models/layer_plan.hpp): an index only says which of its entries an executor's call site is.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/timeline.hpp"
#include "models/layer_plan.hpp"
#include "models/serving.hpp"
#include "models/work_model.hpp"

namespace ridgeline::layer_op {

enum LayerOp {
  // The forward.
  op_norm1,
  op_qkv,
  op_rotary,
  op_kv_append,
  op_attention,
  op_attn_prefill, // a mixed step's attention of its prefill chunks
  op_attn_decode,  // and of its decode tokens
  op_proj,
  op_ar_attn,
  op_res1_norm2,
  op_fc1,
  op_act,
  op_fc2,
  op_ar_mlp,
  op_res2,
  // The backward.
  op_fc2_dgrad,
  op_fc2_wgrad,
  op_act_bwd,
  op_fc1_dgrad,
  op_ar_mlp_bwd,
  op_fc1_wgrad,
  op_norm2_bwd,
  op_res2_bwd,
  op_proj_dgrad,
  op_proj_wgrad,
  op_attention_bwd,
  op_rotary_bwd,
  op_qkv_dgrad,
  op_ar_attn_bwd,
  op_qkv_wgrad,
  op_norm1_bwd,
  op_res1_bwd,
  // Sequence parallelism's collectives, forward then backward.
  op_ag_attn,
  op_rs_attn,
  op_ag_mlp,
  op_rs_mlp,
  op_ag_mlp_bwd,
  op_rs_mlp_bwd,
  op_ag_attn_bwd,
  op_rs_attn_bwd,
  op_count
};
inline const char* const kLayerOpNames[op_count] = {op::norm1,
                                                    op::qkv,
                                                    op::rotary,
                                                    op::kv_append,
                                                    op::attention,
                                                    op::attention_prefill,
                                                    op::attention_decode,
                                                    op::proj,
                                                    op::allreduce_attn,
                                                    op::residual1_norm2,
                                                    op::fc1,
                                                    op::act,
                                                    op::fc2,
                                                    op::allreduce_mlp,
                                                    op::residual2,
                                                    op::fc2_dgrad,
                                                    op::fc2_wgrad,
                                                    op::act_bwd,
                                                    op::fc1_dgrad,
                                                    op::allreduce_mlp_bwd,
                                                    op::fc1_wgrad,
                                                    op::norm2_bwd,
                                                    op::residual2_bwd,
                                                    op::proj_dgrad,
                                                    op::proj_wgrad,
                                                    op::attention_bwd,
                                                    op::rotary_bwd,
                                                    op::qkv_dgrad,
                                                    op::allreduce_attn_bwd,
                                                    op::qkv_wgrad,
                                                    op::norm1_bwd,
                                                    op::residual1_bwd,
                                                    op::allgather_attn,
                                                    op::reducescatter_attn,
                                                    op::allgather_mlp,
                                                    op::reducescatter_mlp,
                                                    op::allgather_mlp_bwd,
                                                    op::reducescatter_mlp_bwd,
                                                    op::allgather_attn_bwd,
                                                    op::reducescatter_attn_bwd};

/// A plan's ops by LayerOp. bind() interns every entry of the plan into the op table in the
/// plan's order (so the table's ids are the plan's order, whichever entries have an index) and
/// keeps, per index, the id and a pointer to the entry: the plan must stay where it is, and be
/// bound again once replaced. An index the plan does not hold is absent (id -1, no entry).
class LayerOpIndex {
public:
  void bind(const std::vector<OpSpec>& plan, OpTable& table) {
    m_id.fill(-1);
    m_spec.fill(nullptr);
    for (const OpSpec& o : plan) {
      const int32_t id = table.intern(o.name, o.kind);
      for (size_t i = 0; i < op_count; ++i)
        if (o.name == kLayerOpNames[i]) {
          m_id[i] = id;
          m_spec[i] = &o;
        }
    }
  }
  int32_t id(int o) const { return m_id[static_cast<size_t>(o)]; }
  /// The entry of `o`, or null where the plan has none.
  const OpSpec* find(int o) const { return m_spec[static_cast<size_t>(o)]; }
  /// The entry of `o`, which the plan must hold.
  const OpSpec& spec(int o) const {
    const OpSpec* s = find(o);
    RIDGELINE_REQUIRE(s != nullptr, std::string("the layer plan has no op ") + kLayerOpNames[o]);
    return *s;
  }

private:
  std::array<int32_t, op_count> m_id{};
  std::array<const OpSpec*, op_count> m_spec{};
};

} // namespace ridgeline::layer_op
