// Megatron-style tensor-parallel transformer blocks: column-parallel QKV and FC1, row-parallel
// projection and FC2, an all-reduce after each row-parallel GEMM. One TpStage holds the
// weights, KV caches and activations of the consecutive layers of one pipeline stage on one
// TP rank, and runs them forward while recording every op.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/communicator.hpp"
#include "core/timeline.hpp"
#include "models/backend.hpp"
#include "models/model_spec.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

/// Generator roles of the tensors of one layer (tensor_id(layer, role)).
enum TensorRole : int64_t {
  role_wq = 1, role_wk = 2, role_wv = 3, role_wo = 4, role_w1 = 5, role_w1_up = 6, role_w2 = 7,
  role_k_cache = 8, role_v_cache = 9, role_input = 10
};

/// What one stage computes.
struct StageSpec {
  ModelSpec model;
  LayerShape shape;           ///< per microbatch (batch = sequences per microbatch)
  AttentionImpl attention = AttentionImpl::fused;
  int tp_rank = 0;
  int64_t first_layer = 0;    ///< global index of this stage's first layer
  int64_t num_layers = 1;
  uint64_t seed = 0;
};

class TpStage {
 public:
  /// Allocates and generates this rank's shard of every weight (and KV cache for decode).
  /// `tp_comm` may be null when shape.tp == 1. Op ids are interned into `ops`.
  TpStage(Backend& backend, Communicator* tp_comm, const StageSpec& spec, OpTable& ops);

  /// Input activations [tokens, hidden] of this stage (filled by fill_input() or a recv).
  Tensor input() const { return m_input; }
  /// Output activations [tokens, hidden] after forward().
  Tensor output() const { return m_output; }
  /// Generates the model input of microbatch `mb` (first stage), identical on every TP rank.
  void fill_input(int64_t microbatch);
  /// Runs every layer of the stage on input() into output(). Asynchronous on GPUs.
  void forward(Recorder& rec);
  /// Bytes of weights, caches and activations this stage allocated.
  size_t allocated_bytes() const { return m_allocated; }
  const std::vector<OpSpec>& op_specs() const { return m_ops; }

 private:
  struct LayerWeights {
    Buffer ln1_gamma, ln1_beta, ln2_gamma, ln2_beta, wqkv, wo, w1, w2, k_cache, v_cache;
  };
  Buffer alloc(int64_t rows, int64_t cols);
  void init_layer(int64_t layer, LayerWeights& w);
  void run_layer(Recorder& rec, int64_t layer, const LayerWeights& w, const Tensor& x, Tensor y);
  /// All-reduce of a row-parallel GEMM's partial sums, serialized on the compute queue.
  void all_reduce(Recorder& rec, int slot, int64_t layer, Tensor t);

  Backend& m_backend;
  Communicator* m_comm;
  StageSpec m_spec;
  std::vector<OpSpec> m_ops;
  std::vector<int32_t> m_op_ids;              ///< op table id per layer slot (-1: absent)
  std::vector<const OpSpec*> m_slot_specs;  ///< work-model entry per layer slot
  int64_t m_hl = 0, m_kvl = 0, m_kv0 = 0, m_d = 0, m_fl = 0, m_tokens = 0;
  size_t m_allocated = 0;
  std::vector<LayerWeights> m_layers;
  Buffer m_in_buf, m_out_buf, m_tmp_buf, m_ln_buf, m_qkv_buf, m_attn_buf, m_proj_buf, m_fc1_buf,
      m_act_buf, m_fc2_buf;
  Tensor m_input, m_output;
};

}  // namespace ridgeline
