// The small mixture-of-experts model the MoE tests compute on the host backend.
#pragma once

#include <cstdint>

#include "models/model_spec.hpp"

namespace ridgeline {

inline ModelSpec small_moe(GatingKind gating, int64_t shared, int64_t experts = 6) {
  ModelSpec m;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn_hidden = 24;
  m.mlp = MlpKind::swiglu;
  m.experts = experts;
  m.top_k = 2;
  m.expert_ffn_hidden = 24;
  m.shared_experts = shared;
  m.gating = gating;
  return m;
}

} // namespace ridgeline
