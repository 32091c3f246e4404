// Transformer layer dimensions (a model preset) and the workload run on them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checked_math.hpp"
#include "core/dtype.hpp"

namespace ridgeline {

enum class MlpKind { gelu, swiglu };
enum class NormKind { layernorm, rmsnorm };
/// How an MoE router turns its logits into the weights of the chosen experts: softmax
/// (Mixtral, Qwen3-MoE: top-k of the logits, softmax over those k) or sigmoid (DeepSeek-V3: top-k
/// of the sigmoid scores, normalised to sum 1 over those k).
enum class GatingKind { softmax, sigmoid };
/// Prefill: seq tokens of batch sequences at once. Decode: one new token per sequence
/// against a KV cache of `context` tokens.
enum class Phase { prefill, decode };

const char* mlp_name(MlpKind k);
const char* norm_name(NormKind k);
const char* phase_name(Phase p);
const char* gating_name(GatingKind k);
MlpKind parse_mlp(const std::string& s);
NormKind parse_norm(const std::string& s);
Phase parse_phase(const std::string& s);
GatingKind parse_gating(const std::string& s);

/// Dimensions of one transformer block (pre-norm, Megatron layout).
struct ModelSpec {
  std::string name = "custom";
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;   ///< grouped-query attention: heads % kv_heads == 0
  int64_t ffn_hidden = 0; ///< MLP inner width (per branch for SwiGLU)
  int64_t layers = 0;     ///< layers actually run
  MlpKind mlp = MlpKind::gelu;
  NormKind norm = NormKind::layernorm;
  bool rotary = false;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  /// Routed experts of the MLP (a mixture of experts); 0: the dense MLP of ffn_hidden.
  int64_t experts = 0;
  int64_t top_k = 0;             ///< routed experts each token goes through
  int64_t expert_ffn_hidden = 0; ///< each expert's SwiGLU inner width (per branch)
  /// Experts every token goes through beside the routed ones, each of expert_ffn_hidden.
  int64_t shared_experts = 0;
  GatingKind gating = GatingKind::softmax;

  int64_t head_dim() const { return heads > 0 ? hidden / heads : 0; }
  /// Whether the MLP is a mixture of experts.
  bool moe() const { return experts > 0; }
};

/// What one rank of a tensor-parallel group computes per layer.
struct LayerShape {
  Phase phase = Phase::prefill;
  int64_t batch = 1;
  int64_t seq = 1;     ///< prefill tokens per sequence (decode: 1)
  int64_t context = 0; ///< decode: tokens already in the KV cache before the first step
  /// Decode: steps generated from `context` (step i appends at position context + i and sees
  /// context + i + 1 keys); the cache holds context + decode_steps rows per sequence. Costs of
  /// the work model are the mean over these steps (attention is linear in the keys).
  int64_t decode_steps = 1;
  int tp = 1;
  DType dtype = DType::f32;
  /// Megatron sequence parallelism: norms and residuals on tokens / tp rows per rank, an
  /// all-gather before each column-parallel GEMM and a reduce-scatter after each row-parallel one.
  bool sequence_parallel = false;

  int64_t tokens() const {
    return phase == Phase::prefill ? checked_mul(batch, seq, "tokens (batch x seq)") : batch;
  }
  /// Keys visible to the last query of a sequence (prefill: seq; decode: context + 1 at the
  /// first step).
  int64_t kv_len() const { return phase == Phase::prefill ? seq : context + 1; }
  /// Decode: keys visible per sequence, averaged over the decode steps.
  double mean_kv_len() const {
    return phase == Phase::prefill
               ? static_cast<double>(seq)
               : static_cast<double>(context) + static_cast<double>(decode_steps + 1) / 2.0;
  }
  /// Decode: KV cache rows per sequence (context + decode_steps).
  int64_t cache_rows() const { return context + (decode_steps > 0 ? decode_steps : 1); }
};

/// Heads of each kind on one rank. When kv_heads < tp, each rank holds one replicated KV head.
int64_t local_heads(const ModelSpec& m, int tp);
int64_t local_kv_heads(const ModelSpec& m, int tp);
/// First global KV head held by `tp_rank`.
int64_t first_kv_head(const ModelSpec& m, int tp, int tp_rank);

} // namespace ridgeline
