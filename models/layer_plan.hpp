// One layer's geometry on one rank (the one place shard sizes live) and the layer plan of the
// train phase: the backward ops of a layer in execution order, each with its cost, lane and
// pass. The executor in parallel/ records each op against its plan entry, so the work model
// and what runs cannot drift apart.
#pragma once

#include <cstdint>
#include <vector>

#include "models/model_spec.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

/// Shard sizes of one layer on one TP rank.
struct LayerGeometry {
  int64_t hidden = 0;
  int64_t head_dim = 0;
  int64_t heads = 0;    ///< query heads on this rank
  int64_t kv_heads = 0; ///< key/value heads on this rank
  int64_t kv_head0 = 0; ///< first global KV head of this rank
  int64_t ffn = 0;      ///< MLP inner width on this rank (per branch for SwiGLU)
  int64_t tokens = 0;   ///< rows per microbatch
  int64_t stream_tokens =
      0; ///< rows of the residual stream (tokens / tp under sequence parallelism)
  bool swiglu = false;
  bool sequence_parallel = false;
  /// KV heads are replicated (kv_heads < tp): ranks sharing a head each hold a copy.
  bool kv_replicated = false;

  int64_t q_cols() const { return heads * head_dim; }
  int64_t kv_cols() const { return kv_heads * head_dim; }
  int64_t qkv_cols() const { return q_cols() + 2 * kv_cols(); }
  int64_t fc1_cols() const { return swiglu ? 2 * ffn : ffn; }
};

LayerGeometry layer_geometry(const ModelSpec& m, const LayerShape& s, int tp_rank);

/// Backward op names, in execution order for one layer.
namespace op {
inline constexpr const char* fc2_dgrad = "fc2_dgrad";
inline constexpr const char* fc2_wgrad = "fc2_wgrad";
inline constexpr const char* act_bwd = "activation_bwd";
inline constexpr const char* fc1_dgrad = "fc1_dgrad";
inline constexpr const char* allreduce_mlp_bwd = "allreduce_mlp_bwd";
inline constexpr const char* fc1_wgrad = "fc1_wgrad";
inline constexpr const char* norm2_bwd = "norm2_bwd";
inline constexpr const char* residual2_bwd = "residual2_bwd";
inline constexpr const char* proj_dgrad = "proj_dgrad";
inline constexpr const char* proj_wgrad = "proj_wgrad";
inline constexpr const char* attention_bwd = "attention_bwd";
inline constexpr const char* rotary_bwd = "rotary_bwd";
inline constexpr const char* qkv_dgrad = "qkv_dgrad";
inline constexpr const char* allreduce_attn_bwd = "allreduce_attn_bwd";
/// Sequence parallelism's backward collectives, mirroring the forward's: the output gradient
/// all-gathered before a row-parallel GEMM's input gradient (the forward reduce-scattered
/// there), the column-parallel GEMM's input gradient reduce-scattered (the forward gathered).
inline constexpr const char* allgather_mlp_bwd = "allgather_mlp_bwd";
inline constexpr const char* reducescatter_mlp_bwd = "reducescatter_mlp_bwd";
inline constexpr const char* allgather_attn_bwd = "allgather_attn_bwd";
inline constexpr const char* reducescatter_attn_bwd = "reducescatter_attn_bwd";
inline constexpr const char* qkv_wgrad = "qkv_wgrad";
inline constexpr const char* norm1_bwd = "norm1_bwd";
inline constexpr const char* residual1_bwd = "residual1_bwd";
/// Stage-level ops of the train phase and of scheduled pipelines.
inline constexpr const char* grad_zero = "grad_zero";
/// Sequence parallelism: a layer's norm gamma and beta gradients, each rank's from its own rows,
/// all-reduced over the TP group once they are final.
inline constexpr const char* allreduce_norm_grads = "allreduce_norm_grads";
inline constexpr const char* dp_allreduce = "dp_allreduce";
inline constexpr const char* dp_reducescatter = "dp_reducescatter";
inline constexpr const char* sgd_update = "sgd_update";
inline constexpr const char* pp_exchange = "pp_exchange";
inline constexpr const char* pp_flush = "pp_flush";
inline constexpr const char* pp_wait = "pp_wait";
} // namespace op

/// The backward ops of one layer on one rank, in execution order: input-gradient ops have
/// pass backward_input, weight-gradient GEMMs backward_weight (zero-bubble schedules run them
/// later). GEMMs cost what their forward costs; attention's backward 2.5 x its forward FLOPs
/// (five matrix products for two). TP collectives: the all-reduce of the column-parallel
/// GEMMs' input gradients; under sequence parallelism the output gradients all-gathered before
/// the row-parallel GEMMs' input gradients and those of the column-parallel GEMMs
/// reduce-scattered (prefill-shaped layers).
std::vector<OpSpec> backward_layer_ops(const ModelSpec& m, const LayerShape& s, AttentionImpl attn);
/// The train phase's layer plan: the forward ops (layer_ops) then the backward ops.
std::vector<OpSpec> train_layer_plan(const ModelSpec& m, const LayerShape& s, AttentionImpl attn);

} // namespace ridgeline
