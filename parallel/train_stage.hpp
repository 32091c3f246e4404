// The train phase's stage executor: the layers of one pipeline stage (one or more model chunks)
// on one TP rank, forward and backward, with the activations of every microbatch in flight kept
// until its backward, weight gradients accumulated over microbatches and, with data
// parallelism, reduced across replicas in buckets as their layers finish. Runs the actions a
// PipelineSchedule emits (forward, backward, or backward-input and backward-weight apart).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "collectives/communicator.hpp"
#include "core/timeline.hpp"
#include "models/backend.hpp"
#include "models/layer_plan.hpp"
#include "parallel/layer_weights.hpp"

namespace ridgeline {

struct TrainSpec {
  ModelSpec model;
  LayerShape shape; ///< per microbatch (prefill-shaped: batch sequences of seq tokens)
  AttentionImpl attention = AttentionImpl::fused;
  /// TP collectives on the comm lane, the backward's all-reduce beside the weight-gradient GEMM
  /// (--overlap async); on the compute lane otherwise (--overlap none).
  bool async_comm = false;
  int tp_rank = 0;
  /// Per local model chunk: its first global layer and layer count.
  std::vector<std::pair<int64_t, int64_t>> chunks;
  /// Keep only each layer's input and recompute the rest of its forward before its backward.
  bool recompute = false;
  uint64_t seed = 0;
};

/// Data-parallel gradient reduction of a stage.
struct DataParallel {
  Communicator* comm = nullptr; ///< the DP group (null or size 1: nothing to reduce)
  size_t bucket_bytes = 25u << 20;
  /// Reduce each bucket as soon as its layers' gradients are final (beside the rest of the
  /// backward) rather than after the whole backward.
  bool overlap = true;
  /// Reduce-scatter instead of all-reduce (a sharded optimizer: each replica keeps 1/dp).
  bool shard = false;
};

/// One layer's parameter gradients (views into the stage's gradient buffer).
struct LayerGrads {
  Tensor ln1_gamma, ln1_beta, ln2_gamma, ln2_beta, wqkv, wo, w1, w2;
};

class TrainStage {
public:
  TrainStage(Backend& backend, Communicator* tp_comm, const TrainSpec& spec, OpTable& ops);
  ~TrainStage();

  int chunks() const { return static_cast<int>(m_spec.chunks.size()); }
  void set_data_parallel(const DataParallel& dp) { m_dp = dp; }
  /// Where the activation of (microbatch, chunk) arrives (a receive, or fill_input()).
  Tensor activation_in(int microbatch, int chunk);
  /// The chunk's output after forward(microbatch, chunk).
  Tensor activation_out(int microbatch, int chunk);
  /// Where the gradient of the chunk's output arrives (a receive, or fill_grad_output()).
  Tensor gradient_in(int microbatch, int chunk);
  /// The gradient of the chunk's input after backward / backward_input.
  Tensor gradient_out(int microbatch, int chunk);
  /// The first row of global microbatch `global_mb`'s stream (every microbatch's rows counted
  /// in order) that this rank holds: its own block under sequence parallelism.
  int64_t first_row(int64_t global_mb) const;
  /// Model input of global microbatch `global_mb` into activation_in(microbatch, chunk).
  void fill_input(int microbatch, int chunk, int64_t global_mb);
  /// The loss gradient of global microbatch `global_mb` (generated: the loss is the sum of the
  /// model output times it) into gradient_in(microbatch, chunk).
  void fill_grad_output(int microbatch, int chunk, int64_t global_mb);

  /// Starts an iteration: gradients zeroed, bucket state reset.
  void begin_iteration(Recorder& rec, int microbatches);
  void forward(Recorder& rec, int microbatch, int chunk);
  /// Input and weight gradients of every layer of the chunk, layer by layer. The actions keep
  /// the microbatch's activations until release().
  void backward(Recorder& rec, int microbatch, int chunk);
  /// Input gradients only (zero-bubble B); the weight gradients wait for backward_weight().
  void backward_input(Recorder& rec, int microbatch, int chunk);
  void backward_weight(Recorder& rec, int microbatch, int chunk);
  /// Ends an iteration: the data-parallel reductions not yet issued, then waits for all of
  /// them; with a learning rate, the plain SGD update w -= lr * grad.
  /// With `gather_shards` (--dp-shard), every replica's share is all-gathered back so that
  /// whole gradients can be checked.
  void end_iteration(Recorder& rec, float sgd_lr, bool gather_shards = false);
  /// Frees the activations of (microbatch, chunk) for a later microbatch, once its backward
  /// (or its backward_weight) ran and its gradient was sent.
  void release(int microbatch, int chunk);
  /// Allocates activation sets of `chunk` until it holds `sets` (live and free): what a
  /// schedule takes at once, allocated before the first iteration, since an allocation inside
  /// one serialises the device behind the transfers in flight.
  void reserve(int chunk, int sets);
  /// Switches the attention implementation and where TP collectives run (weights stay).
  void set_variant(AttentionImpl attention, bool async_comm);
  /// The most bytes of microbatch activation sets alive at once so far (with the gradients
  /// zero-bubble schedules keep for their deferred weight gradients).
  size_t peak_activation_bytes() const { return m_peak_bytes; }

  /// Gradients of local layer i (chunk-major, layer order within a chunk).
  const LayerGrads& grads(size_t local_layer) const { return m_grads[local_layer]; }
  size_t local_layers() const { return m_grads.size(); }
  /// Global layer index of local layer i.
  int64_t global_layer(size_t local_layer) const { return m_global[local_layer]; }
  const LayerGeometry& geometry() const { return m_geo; }
  const TrainSpec& spec() const { return m_spec; }

private:
  struct LayerActs;
  struct Slot;
  struct Scratch;
  Slot& slot(int microbatch, int chunk);
  std::unique_ptr<Slot> new_slot(int chunk);
  LayerActs& recompute_acts();
  // Allocates what a layer's forward saves for its backward (all but its input).
  void allocate_saved(LayerActs& a);
  Buffer alloc(int64_t rows, int64_t cols);
  void forward_layer(Recorder& rec, size_t local, LayerActs& a, Tensor y);
  void backward_layer_input(Recorder& rec, size_t local, LayerActs& a, LayerActs* saved,
                            const Tensor& dy, Tensor dx);
  void backward_layer_weight(Recorder& rec, size_t local, const LayerActs& a);
  // A TP collective of plan op `op`: on the comm lane under async_comm, recorded from its issue.
  void tp_collective(Recorder& rec, int op, int64_t layer,
                     const std::function<void(Stream)>& issue);
  void tp_all_reduce(Recorder& rec, int op, int64_t layer, Tensor t);
  void tp_all_gather(Recorder& rec, int op, int64_t layer, const Tensor& rows, Tensor full);
  void tp_reduce_scatter(Recorder& rec, int op, int64_t layer, const Tensor& full, Tensor rows);

  void wait_tp(Recorder& rec);
  void layer_done(Recorder& rec, size_t local);
  void issue_buckets(Recorder& rec, bool all);
  ScopedOp op_scope(Recorder& rec, int op, int64_t layer) const;

  Backend& m_backend;
  Communicator* m_comm;
  TrainSpec m_spec;
  LayerGeometry m_geo;
  DataParallel m_dp;
  std::vector<OpSpec> m_plan;          ///< forward then backward ops of one layer
  std::vector<int32_t> m_ids;          ///< op table id per plan entry
  std::vector<int> m_index;            ///< plan entry per TrainOp (-1: absent)
  std::vector<LayerWeights> m_weights; ///< per local layer
  std::vector<LayerGrads> m_grads;
  std::vector<int64_t> m_global;
  std::vector<size_t> m_chunk_first; ///< first local layer of each chunk
  Buffer m_grad_buf;                 ///< every gradient of the stage, in reduction order
  std::vector<std::pair<size_t, size_t>> m_grad_range; ///< per local layer: bytes [begin, end)
  std::map<std::pair<int, int>, std::unique_ptr<Slot>> m_live;
  std::vector<std::vector<std::unique_ptr<Slot>>> m_free; ///< per chunk
  std::unique_ptr<Scratch> m_scratch;
  std::vector<size_t> m_open_comm;
  int m_microbatches = 1;
  std::vector<int> m_weight_passes; ///< per local layer: weight gradients done this iteration
  std::vector<std::pair<size_t, size_t>> m_buckets; ///< bytes [begin, end)
  size_t m_buckets_issued = 0;
  std::vector<size_t> m_dp_open;
  size_t m_live_bytes = 0, m_peak_bytes = 0;
  size_t m_allocated = 0;
};

} // namespace ridgeline
