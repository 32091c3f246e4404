// Names and head partitioning of model specs.
#include "models/model_spec.hpp"

#include "core/error.hpp"

namespace ridgeline {

const char* mlp_name(MlpKind k) {
  return k == MlpKind::gelu ? "gelu" : "swiglu";
}
const char* norm_name(NormKind k) {
  return k == NormKind::layernorm ? "layernorm" : "rmsnorm";
}
const char* phase_name(Phase p) {
  return p == Phase::prefill ? "prefill" : "decode";
}

const char* gating_name(GatingKind k) {
  return k == GatingKind::softmax ? "softmax" : "sigmoid";
}

MlpKind parse_mlp(const std::string& s) {
  if (s == "gelu") return MlpKind::gelu;
  if (s == "swiglu") return MlpKind::swiglu;
  throw UsageError("unknown MLP '" + s + "' (expected gelu or swiglu)");
}

NormKind parse_norm(const std::string& s) {
  if (s == "layernorm") return NormKind::layernorm;
  if (s == "rmsnorm") return NormKind::rmsnorm;
  throw UsageError("unknown norm '" + s + "' (expected layernorm or rmsnorm)");
}

Phase parse_phase(const std::string& s) {
  if (s == "prefill") return Phase::prefill;
  if (s == "decode") return Phase::decode;
  throw UsageError("unknown phase '" + s + "' (expected prefill or decode)");
}

GatingKind parse_gating(const std::string& s) {
  if (s == "softmax") return GatingKind::softmax;
  if (s == "sigmoid") return GatingKind::sigmoid;
  throw UsageError("unknown gating '" + s + "' (expected softmax or sigmoid)");
}

int64_t local_heads(const ModelSpec& m, int tp) {
  return m.heads / tp;
}

int64_t local_kv_heads(const ModelSpec& m, int tp) {
  return m.kv_heads >= tp ? m.kv_heads / tp : 1;
}

int64_t first_kv_head(const ModelSpec& m, int tp, int tp_rank) {
  if (m.kv_heads >= tp) return tp_rank * (m.kv_heads / tp);
  // tp % kv_heads == 0: tp / kv_heads consecutive ranks share one KV head.
  return tp_rank / (tp / m.kv_heads);
}

} // namespace ridgeline
