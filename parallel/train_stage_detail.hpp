// What TrainStage's sources share and its header keeps private: the ops of a layer and the
// activation sets. Internal to train_stage.cpp and train_layer.cpp.
#pragma once

#include <vector>

#include "models/work_model.hpp"
#include "parallel/train_stage.hpp"

namespace ridgeline::train_detail {

// The ops of one layer the executor runs, forward then backward; each is resolved once to its
// plan entry, which gives its op id and cost.
enum TrainOp {
  t_norm1,
  t_qkv,
  t_rotary,
  t_attention,
  t_proj,
  t_ar_attn,
  t_res1_norm2,
  t_fc1,
  t_act,
  t_fc2,
  t_ar_mlp,
  t_res2,
  t_fc2_dgrad,
  t_fc2_wgrad,
  t_act_bwd,
  t_fc1_dgrad,
  t_ar_mlp_bwd,
  t_fc1_wgrad,
  t_norm2_bwd,
  t_res2_bwd,
  t_proj_dgrad,
  t_proj_wgrad,
  t_attention_bwd,
  t_rotary_bwd,
  t_qkv_dgrad,
  t_ar_attn_bwd,
  t_qkv_wgrad,
  t_norm1_bwd,
  t_res1_bwd,
  // Sequence parallelism's collectives, forward then backward.
  t_ag_attn,
  t_rs_attn,
  t_ag_mlp,
  t_rs_mlp,
  t_ag_mlp_bwd,
  t_rs_mlp_bwd,
  t_ag_attn_bwd,
  t_rs_attn_bwd,
  t_count
};
inline const char* const kTrainOpNames[t_count] = {op::norm1,
                                                   op::qkv,
                                                   op::rotary,
                                                   op::attention,
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

} // namespace ridgeline::train_detail

namespace ridgeline {

// What one layer's forward saved for its backward (recompute: only x), and, when the weight
// gradients are deferred, the gradients they need. Under sequence parallelism x and y1 are this
// rank's rows (stream_tokens) and ln1, ln2 the gathered norm outputs (every row, what the
// GEMMs read); dy and dy1 are then the gathered gradients the weight-gradient GEMMs read.
struct TrainStage::LayerActs {
  Buffer x_buf, ln1_buf, qkv_buf, attn_buf, lse_buf, y1_buf, ln2_buf, fc1_buf, act_buf;
  Buffer dy_buf, dy1_buf, dfc1_buf, dqkv_buf, dyg_buf; ///< dyg: dy gathered (sequence parallel)
  Tensor x, ln1, qkv, attn, y1, ln2, fc1, act;
  void* lse = nullptr;
  Tensor dy, dy1, dfc1, dqkv; ///< gradients of the layer's output, y1, fc1 and qkv
};

// One microbatch's activations on one chunk.
struct TrainStage::Slot {
  size_t bytes = 0; ///< what the set holds (activations, boundary tensors, kept gradients)
  std::vector<LayerActs> layers;
  Buffer out_buf, grad_in_buf, grad_out_buf;
  Tensor out, grad_in, grad_out;
};

// Buffers every microbatch shares: the forward's unsaved outputs, the backward's working
// gradients (all of them when the weight gradients run at once), and the recomputed layer.
struct TrainStage::Scratch {
  Buffer proj, fc2, dtmp, dact, dattn, dln, ping, pong;
  // Sequence parallelism: a norm's output on this rank's rows before its all-gather, a
  // reduce-scatter's output (this rank's rows), and the gathered output gradient.
  Buffer ln_rows, rs_rows, dy_full;
  LayerActs acts; ///< the recomputed forward (recompute) or the backward's gradients
};

} // namespace ridgeline
