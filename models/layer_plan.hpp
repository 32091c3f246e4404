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
