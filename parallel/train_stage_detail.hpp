// What TrainStage's sources share and its header keeps private: the activation sets. Internal
// to train_stage.cpp, train_layer.cpp and train_ring.cpp.
#pragma once

#include <vector>

#include "models/work_model.hpp"
#include "parallel/train_stage.hpp"

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
