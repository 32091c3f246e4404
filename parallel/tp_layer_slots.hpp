// The op slots of a TpStage layer: indices into its op table resolved once, so that the forward
// loop does no lookups. Internal to TpStage's sources.
#pragma once

#include "models/serving.hpp"
#include "models/work_model.hpp"

namespace ridgeline::tp_slots {

enum Slot {
  s_norm1,
  s_ag_attn,
  s_qkv,
  s_rotary,
  s_kv_append,
  s_attention,
  s_attn_prefill, // a mixed step's attention of its prefill chunks
  s_attn_decode,  // and of its decode tokens
  s_proj,
  s_ar_attn,
  s_rs_attn,
  s_res1_norm2,
  s_ag_mlp,
  s_fc1,
  s_act,
  s_fc2,
  s_ar_mlp,
  s_rs_mlp,
  s_res2,
  s_count
};
inline const char* const kSlotNames[s_count] = {op::norm1,
                                                op::allgather_attn,
                                                op::qkv,
                                                op::rotary,
                                                op::kv_append,
                                                op::attention,
                                                op::attention_prefill,
                                                op::attention_decode,
                                                op::proj,
                                                op::allreduce_attn,
                                                op::reducescatter_attn,
                                                op::residual1_norm2,
                                                op::allgather_mlp,
                                                op::fc1,
                                                op::act,
                                                op::fc2,
                                                op::allreduce_mlp,
                                                op::reducescatter_mlp,
                                                op::residual2};

} // namespace ridgeline::tp_slots
