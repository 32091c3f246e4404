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
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/peer_exchange.hpp"
#include "core/timeline.hpp"
#include "models/backend.hpp"
#include "models/layer_plan.hpp"
#include "parallel/layer_op_index.hpp"
#include "parallel/layer_weights.hpp"
#include "parallel/overlap_policy.hpp"
#include "parallel/stage_core.hpp"
#include "parallel/stage_lanes.hpp"

namespace ridgeline {

struct TrainSpec {
  ModelSpec model;
  LayerShape shape; ///< per microbatch (prefill-shaped: batch sequences of seq tokens)
  AttentionImpl attention = AttentionImpl::fused;
  /// The strategy of the TP collectives (overlap_policy.hpp), forward and backward: none,
  /// async, chunked:K, split:N (whole sequences per part), ce-ring, ce-ring:K (through the
  /// stage's PeerExchange) or symm: one of the first three. Under async and every strategy after
  /// it the collectives run on the comm lane and the backward's input-gradient reductions
  /// beside the weight-gradient GEMMs.
  Overlap overlap;
  /// Whether the symm: strategies may run: the stage then asks its communicator for symmetric
  /// memory at construction (collective over the TP group) and keeps a second set of its shared
  /// collective buffers in it.
  bool symmetric_buffers = false;
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

class TrainStage : public StageCore {
public:
  /// Throws UsageError when spec.overlap cannot run on spec.shape (policy_problems). `exchange`,
  /// over the TP group with windows of exchange_windows() bytes, is what ce-ring puts through
  /// (needed for it when tp > 1).
  TrainStage(Backend& backend, Communicator* tp_comm, const TrainSpec& spec, OpTable& ops,
             PeerExchange* exchange = nullptr);
  ~TrainStage();
  /// The buffers the collectives read or write that every microbatch shares (the row-parallel
  /// outputs, the input gradients' partial sums and, under sequence parallelism, the norms'
  /// rows, the reduce-scatters' outputs and the gathered output gradients), bytes each, in the
  /// order the symm: strategies' symmetric block holds them; none at tp 1.
  static std::vector<size_t> collective_buffers(const TrainSpec& spec, DType dtype);
  /// The windows a PeerExchange for ce-ring needs (bytes each, in the stage's dtype): where the
  /// peers' partial pieces land, and where their gathered rows land; none at tp 1.
  static std::vector<size_t> exchange_windows(const TrainSpec& spec, DType dtype);
  /// What a stage allocates for its strategies beyond the rest: with spec.symmetric_buffers the
  /// symmetric block, with an `exchange` (ce-ring at tp > 1) its windows.
  static double overlap_memory_bytes(const TrainSpec& spec, DType dtype, bool exchange = false);

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
  /// The rows of global microbatch `global_mb`'s stream (every microbatch's rows counted in
  /// order) that this rank holds, as (first row, rows) in the order it holds them: all of them,
  /// or under sequence parallelism its 1/tp share of every unit of the current strategy (a chunk
  /// of a part), so that a unit's all-gather lands the unit's rows contiguous and in token order.
  std::vector<std::pair<int64_t, int64_t>> row_blocks(int64_t global_mb) const;
  /// Units of that layout (1 without sequence parallelism): it changes with the strategy.
  int row_units() const { return m_geo.sequence_parallel ? m_policy.units() : 1; }
  /// Generates this rank's rows (row_blocks) of global microbatch `global_mb` of the generated
  /// tensor `key` into `t` ([stream tokens, hidden]).
  void fill_rows(Tensor t, const GenKey& key, int64_t global_mb);
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
  /// Switches the attention implementation and the overlap strategy (weights stay); throws
  /// UsageError where the strategy cannot run on the stage's shape. Under sequence parallelism
  /// the rows a rank holds follow the strategy's units (row_blocks): inputs made for another
  /// strategy must be generated again.
  void set_variant(AttentionImpl attention, const Overlap& overlap);
  /// Where the symm: strategies' collective buffers live (TrainSpec::symmetric_buffers): the
  /// communicator's SymmetricMemory::describe(), or "none: " and why they are ordinary buffers.
  /// Empty without symmetric_buffers.
  const std::string& symmetric_path() const { return m_lanes.symmetric_path(); }
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
  struct LayerPass;
  Slot& slot(int microbatch, int chunk);
  std::unique_ptr<Slot> new_slot(int chunk);
  LayerActs& recompute_acts();
  // Allocates what a layer's forward saves for its backward (all but its input).
  void allocate_saved(LayerActs& a);

  // One layer's forward and backward (train_layer.cpp), part by part in phases separated by
  // the row-parallel sites' collectives (split:N interleaves the parts phase by phase); each
  // phase but the last returns the comm-lane fence the next one waits for.
  void forward_layer(Recorder& rec, size_t local, LayerActs& a, Tensor y);
  size_t forward_attention(Recorder& rec, LayerPass& pass, int part);
  size_t forward_mlp(Recorder& rec, LayerPass& pass, int part, size_t fence);
  void forward_residual(Recorder& rec, LayerPass& pass, int part, size_t fence);
  void backward_layer_input(Recorder& rec, size_t local, LayerActs& a, LayerActs* saved,
                            const Tensor& dy, Tensor dx);
  size_t backward_mlp(Recorder& rec, LayerPass& pass, int part);
  size_t backward_attention(Recorder& rec, LayerPass& pass, int part, size_t fence);
  void backward_residual(Recorder& rec, LayerPass& pass, int part, size_t fence);
  void backward_layer_weight(Recorder& rec, size_t local, const LayerActs& a);
  // A column-parallel GEMM of one part, gemm(input rows, output rows): under sequence
  // parallelism on `full`'s units gathered from this rank's `rows` (column_site); without, on
  // the part's rows of `full` (its input) at once.
  template <class Gemm>
  void column_gemm(Recorder& rec, int gather_op, int gemm_op, int64_t layer, const Tensor& rows,
                   const Tensor& full, const Tensor& out, int part, Gemm&& gemm);
  // A row-parallel GEMM of one part, gemm(first row, rows) writing those rows of `full` (a unit
  // at a time), each unit's partial
  // sums all-reduced in place (or reduce-scattered into `rows` under sequence parallelism) right
  // after it (row_site). Returns the fence after the part's collectives.
  template <class Gemm>
  size_t row_gemm(Recorder& rec, int gemm_op, int all_reduce_op, int reduce_scatter_op,
                  int64_t layer, const Tensor& full, const Tensor& rows, int part, Gemm&& gemm);
  // ce-ring (train_ring.cpp): a site's collective as puts through m_exchange, one piece of the
  // microbatch's rows per TP rank. The row-parallel GEMM, gemm(first row, rows), computes the
  // peers' pieces first (in ring_subpieces sub-pieces), each put to its owner while the next
  // computes, then this rank's own; the landed partial pieces are added onto it (into `rows`
  // under sequence parallelism) and, without, the summed piece is put into every peer and the
  // peers' copied into `full` as they land. The column-parallel GEMM (sequence parallelism)
  // puts this rank's `rows` into every peer and runs gemm(input rows, output rows) on each
  // piece of `full` as it lands. Each leaves nothing in flight.
  using RowGemm = std::function<void(int64_t, int64_t)>;
  using ColumnGemm = std::function<void(const Tensor&, Tensor)>;
  void ring_row_gemm(Recorder& rec, int gemm_op, int reduce_op, int64_t layer, const Tensor& full,
                     const Tensor& rows, const RowGemm& gemm);
  void ring_column_gemm(Recorder& rec, int gather_op, int gemm_op, int64_t layer,
                        const Tensor& rows, const Tensor& full, const Tensor& out,
                        const ColumnGemm& gemm);
  // Before each of a ring site's puts (StageLanes::ring_put), recorded as plan op `op`; and
  // after its last (StageLanes::ring_done).
  using RingRecord = StageLanes::RingRecord;
  void ring_begin(Recorder& rec, int op, int64_t layer, RingRecord& record);
  void ring_end(Recorder& rec, const RingRecord& record);
  void norm(Recorder& rec, int op, int64_t layer, const Tensor& in, const Buffer& gamma,
            const Buffer& beta, Tensor out);
  void norm_backward(Recorder& rec, int op, int64_t layer, const Tensor& x, const Buffer& gamma,
                     const Tensor& dy, Tensor dx, Tensor dgamma, Tensor dbeta);
  // dw += dout^T in, for a weight gradient of plan op `op`.
  void weight_gradient(Recorder& rec, int op, int64_t layer, double share, const Tensor& dout,
                       const Tensor& in, Tensor dw);
  // A TP collective of plan op `op` on one unit: on the policy's lane, recorded from its issue.
  void tp_collective(Recorder& rec, int op, int64_t layer,
                     const std::function<void(Stream)>& issue);
  void tp_all_reduce(Recorder& rec, int op, int64_t layer, Tensor t);
  void tp_all_gather(Recorder& rec, int op, int64_t layer, const Tensor& rows, Tensor full);
  void tp_reduce_scatter(Recorder& rec, int op, int64_t layer, const Tensor& full, Tensor rows);
  // The comm lane's fence after what was issued so far (0 where collectives run on the compute
  // lane), and the compute's wait for it, completing what the host started (m_lanes).
  size_t tp_fence() const { return m_lanes.fence(); }
  void wait_tp(Recorder& rec, size_t fence) { m_lanes.join(rec, fence); }
  void layer_done(Recorder& rec, size_t local);
  void issue_buckets(Recorder& rec, bool all);

  TrainSpec m_spec;
  DataParallel m_dp;
  std::vector<OpSpec> m_plan;          ///< forward then backward ops of one layer (m_op_index's)
  std::vector<LayerWeights> m_weights; ///< per local layer
  std::vector<LayerGrads> m_grads;
  std::vector<int64_t> m_global;
  std::vector<size_t> m_chunk_first; ///< first local layer of each chunk
  Buffer m_grad_buf;                 ///< every gradient of the stage, in reduction order
  std::vector<std::pair<size_t, size_t>> m_grad_range; ///< per local layer: bytes [begin, end)
  std::map<std::pair<int, int>, std::unique_ptr<Slot>> m_live;
  std::vector<std::vector<std::unique_ptr<Slot>>> m_free; ///< per chunk
  std::unique_ptr<Scratch> m_scratch;
  // The shared buffers the collectives read or write: the row-parallel outputs (proj, fc2), the
  // column-parallel GEMMs' input gradients (dln) and, under sequence parallelism, the gathered
  // output gradients (dy_full, dy1_full), a norm's rows before their all-gather and a
  // reduce-scatter's output (ln_rows, rs_rows). m_plain: in the scratch buffers; m_symm: the
  // same in the communicator's symmetric memory (the symm: strategies), else equal to m_plain.
  struct CommBuffers {
    void* proj = nullptr;
    void* fc2 = nullptr;
    void* dln = nullptr;
    void* dy_full = nullptr;
    void* dy1_full = nullptr;
    void* ln_rows = nullptr;
    void* rs_rows = nullptr;
  };
  CommBuffers m_plain, m_symm;
  const CommBuffers& bufs() const { return m_policy.symmetric ? m_symm : m_plain; }
  int m_microbatches = 1;
  std::vector<int> m_weight_passes; ///< per local layer: weight gradients done this iteration
  std::vector<std::pair<size_t, size_t>> m_buckets; ///< bytes [begin, end)
  size_t m_buckets_issued = 0;
  std::vector<size_t> m_dp_open;
  size_t m_live_bytes = 0, m_peak_bytes = 0;
};

} // namespace ridgeline
