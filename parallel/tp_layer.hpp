// Megatron-style tensor-parallel transformer blocks: column-parallel QKV and FC1, row-parallel
// projection and FC2, an all-reduce after each row-parallel GEMM (or, under sequence
// parallelism, an all-gather before each column-parallel GEMM and a reduce-scatter after each
// row-parallel one). One TpStage holds the weights, KV caches and activations of the
// consecutive layers of one pipeline stage on one TP rank, runs them forward under an overlap
// strategy, and records every op.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/peer_exchange.hpp"
#include "core/timeline.hpp"
#include "models/backend.hpp"
#include "models/layer_plan.hpp"
#include "models/model_spec.hpp"
#include "models/serving.hpp"
#include "models/work_model.hpp"
#include "parallel/layer_op_index.hpp"
#include "parallel/layer_weights.hpp"
#include "parallel/overlap.hpp"
#include "parallel/overlap_policy.hpp"
#include "parallel/stage_core.hpp"
#include "parallel/stage_lanes.hpp"

namespace ridgeline {

/// An MLP in place of a stage's dense one (an MoE layer's), unsplit by TP: it reads rows of the
/// second norm's output x [rows, hidden], writes the MLP's output of them y [rows, hidden] and
/// records its own ops. At tp 1 the rows are every token; at tp > 1 each rank of the TP group
/// gives it its block of tokens / tp rows (under sequence parallelism its own rows), and without
/// sequence parallelism the stage all-gathers the outputs over the group (moe_allgather) before
/// adding them to the residual stream.
class StageMlp {
public:
  virtual ~StageMlp() = default;
  virtual void forward(Recorder& rec, int64_t layer, const Tensor& x, Tensor y) = 0;
};

/// What one stage computes.
struct StageSpec {
  ModelSpec model;
  LayerShape shape; ///< per microbatch (batch = sequences per microbatch)
  AttentionImpl attention = AttentionImpl::fused;
  Overlap overlap;
  int overlap_gemm_sms = 0; ///< SM target of GEMMs beside a collective (0 = every SM)
  /// Whether the symm: strategies may run: the stage then asks its communicator for symmetric
  /// memory at construction (collective over the TP group) and keeps a second set of the
  /// collectives' buffers in it.
  bool symmetric_buffers = false;
  int tp_rank = 0;
  int64_t first_layer = 0; ///< global index of this stage's first layer
  int64_t num_layers = 1;
  uint64_t seed = 0;
  /// A mixed step's sequences (decode tokens and prefill chunks, each at its own context);
  /// empty for prefill and decode. The shape is then a prefill of one sequence of
  /// mix.tokens() tokens: the GEMMs run over every token of the step, the attention sequence
  /// by sequence against each one's KV cache. TpStage::set_mix() switches a stage to another
  /// mix within this one.
  StepMix mix;
  bool mixed() const { return !mix.entries.empty(); }
  StageMlp* mlp = nullptr; ///< not owned; null: the dense MLP (else one part: none or async)
};

/// The ops of one layer of `spec`'s stage on its rank as the work model sees them: layer_ops(),
/// or for a mixed step mixed_step_ops() (the same pricing `ridgeline model --trace` predicts
/// with).
std::vector<OpSpec> stage_ops(const StageSpec& spec, AttentionImpl attention);
/// Bytes of the KV caches of a mixed step's sequences on one rank over `layers` layers (each
/// sequence a block of mix_cache_rows(mix) rows of this rank's keys and values); 0 without one.
double mixed_cache_bytes(const ModelSpec& m, const StepMix& mix, int tp, DType dtype,
                         int64_t layers);
/// Why a mixed step cannot run under `overlap` ("" if it can): its attention runs sequence by
/// sequence on the whole step, so the strategy may not cut the step into parts (split:N), nor
/// put its rows through a ring (ce-ring); sequence parallelism is refused likewise.
std::string mixed_overlap_problem(const Overlap& overlap, bool sequence_parallel);

/// What a forward() runs: everything, the compute without collectives, or the collectives
/// without compute (same messages, same order); the last two isolate each lane's time.
enum class StageMode { full, compute_only, comm_only };

class TpStage : public StageCore {
public:
  /// Allocates and generates this rank's shard of every weight (and KV cache for decode).
  /// `tp_comm` may be null when shape.tp == 1. Op ids are interned into `ops` (which set_mix()
  /// interns into too: it must outlive a mixed stage's switches). `exchange`,
  /// over the same ranks with windows of exchange_windows() bytes, is what ce-ring puts through
  /// (needed for it when tp > 1); its windows then also hold the buffers the collectives of the
  /// other strategies gather into.
  TpStage(Backend& backend, Communicator* tp_comm, const StageSpec& spec, OpTable& ops,
          PeerExchange* exchange = nullptr);
  /// The windows a PeerExchange for this stage needs (bytes each, in the stage's dtype).
  static std::vector<size_t> exchange_windows(const StageSpec& spec, DType dtype);
  /// The buffers every collective of the stage reads or writes (norm output, gathered norm
  /// output, the row-parallel GEMMs' outputs and their shards), bytes each, in the order the
  /// symm: strategies' symmetric block holds them; none at tp 1.
  static std::vector<size_t> collective_buffers(const StageSpec& spec, DType dtype);
  /// What a stage built for these strategies allocates beyond stage_memory_bytes() (the
  /// estimate checked before anything is allocated): with an `exchange` (ce-ring at tp > 1) its
  /// windows less the buffers they stand in for, and with spec.symmetric_buffers the
  /// symmetric block (collective_buffers() at 4 KiB boundaries).
  static double overlap_memory_bytes(const StageSpec& spec, DType dtype, bool exchange);

  /// Input activations of this stage: [tokens, hidden], or this rank's [tokens / tp, hidden]
  /// rows under sequence parallelism (filled by fill_input() or a pipeline receive).
  Tensor input() const { return m_input; }
  /// Output activations after forward(), laid out like input().
  Tensor output() const { return m_output; }
  /// Generates the model input of microbatch `mb` (first stage): this rank's rows of it.
  void fill_input(int64_t microbatch);
  void set_mode(StageMode mode) { m_mode = mode; }
  /// Switches the overlap strategy (weights and buffers stay); throws UsageError if the
  /// tokens cannot be split for it.
  void set_overlap(const Overlap& overlap);
  /// Decode: the step later forward() calls run, in [0, shape.decode_steps): it appends at
  /// position context + step and attends to context + step + 1 keys. Steps must run in order
  /// from 0 for the cache to hold what the earlier steps appended.
  void set_decode_step(int64_t step);
  int64_t decode_step() const { return m_decode_step; }
  /// Switches the attention implementation (and the attention op's cost in op_specs()).
  void set_attention(AttentionImpl impl);
  /// A mixed stage: switches it to `mix`, which the next forward() runs (input(), output() and
  /// op_specs() become that mix's; weights, buffers and KV caches stay). The mix given at
  /// construction is the stage's capacity: `mix` may hold at most its tokens and its entries,
  /// and need at most its mix_cache_rows() rows per sequence. Entry i attends against cache
  /// block i, whose rows keep the capacity's stride, so that a block holds what earlier steps
  /// appended to it; the keys and values a block starts with are those of the stage built at
  /// the capacity, so the stage built directly at `mix` holds the same ones only where
  /// mix_cache_rows(mix) is the capacity's. Ops `mix` adds are interned into the OpTable the
  /// stage was built with.
  /// Throws UsageError (the stage unchanged) for a stage built without a mix, a mix without
  /// entries or whose counts are not its entries', one beyond the capacity, or one whose tokens
  /// the overlap strategy cannot cut into its chunks.
  void set_mix(const StepMix& mix);
  /// A decode or mixed stage: every layer's KV cache back to the keys and values it was built
  /// with (what the steps since appended is gone), so that the steps run next read what a
  /// stage built afresh would. Asynchronous on GPUs.
  void reset_cache();
  /// The mix the stage was built for (its capacity); empty for prefill and decode.
  const StepMix& mix_capacity() const { return m_capacity; }
  /// Runs every layer of the stage on input() into output(). Asynchronous on GPUs.
  void forward(Recorder& rec);
  /// The whole [tokens, hidden] output in token order (gathers the shards under sequence
  /// parallelism). Every rank of the TP group calls it.
  std::vector<float> gather_output();
  /// Where the symm: strategies' collective buffers live (StageSpec::symmetric_buffers): the
  /// communicator's SymmetricMemory::describe(), or "none: " and why they are ordinary buffers.
  /// Empty without symmetric_buffers.
  const std::string& symmetric_path() const { return m_lanes.symmetric_path(); }
  const std::vector<OpSpec>& op_specs() const { return m_ops; }

  /// One GEMM of the layer timed alone: `reps` back-to-back calls of the same shape on fresh
  /// operands, bracketed by two Recorder marks (resolve with mark_ns() after a flush()).
  struct GemmProbe {
    std::string op;
    double flops = 0;
    size_t start_mark = 0;
    size_t end_mark = 0;
    int reps = 0;
  };
  /// Times every GEMM shape of the layer standalone (the same library call as in the layer).
  std::vector<GemmProbe> probe_gemms(Recorder& rec, int warmup, int reps);

private:
  // The layer's weight shard and, for decode, its KV cache.
  struct LayerWeights : ridgeline::LayerWeights {
    Buffer kv_cache;     ///< [batch * cache rows][keys | values] (decode)
    int64_t kv_rows = 0; ///< kv_cache's rows
  };
  // m_ops' entries bound to the layer slots (ids interned into m_op_table); absent ops -1.
  void bind_ops();
  void init_layer(int64_t layer, LayerWeights& w);
  // The keys and values layer `layer`'s cache starts with (reset_cache()).
  void fill_cache(int64_t layer, LayerWeights& w);
  // One part of one layer in three phases separated by the row-parallel collectives; each of
  // the first two returns the comm-lane fence the next phase waits for.
  size_t attention_phase(Recorder& rec, int64_t layer, const LayerWeights& w, const Tensor& x,
                         int part);
  // A mixed step's rotary, cache appends and attention: the prefill chunks sequence by
  // sequence, the decode tokens in one ragged call (tp_layer_mixed.cpp).
  void mixed_attention(Recorder& rec, int64_t layer, const LayerWeights& w, const Tensor& qkv,
                       const Tensor& attn);
  size_t mlp_phase(Recorder& rec, int64_t layer, const LayerWeights& w, const Tensor& x, Tensor y,
                   int part, size_t fence);
  // The spec's StageMlp on `ln`'s rows this rank computes (see StageMlp); returns the fence of
  // the all-gather of its blocks, or 0 where none runs.
  size_t stage_mlp(Recorder& rec, int64_t layer, const Tensor& ln);
  // Refuses a policy that cuts the layer where the spec has its own MLP (it takes whole rows).
  void require_mlp_overlap(const OverlapPolicy& policy) const;
  void final_phase(Recorder& rec, int64_t layer, Tensor y, int part, size_t fence);
  // A GEMM of the layer; one that runs beside a collective in flight (`beside_comm`) targets
  // overlap_gemm_sms SMs so that NCCL's kernel can start before the GEMM ends.
  void gemm(const Tensor& a, const Tensor& w, Tensor c, bool beside_comm);
  bool split() const { return m_policy.parts > 1; }
  void norm(Recorder& rec, int slot, int64_t layer, const Tensor& in, const Buffer& gamma,
            const Buffer& beta, Tensor out);
  // Column-parallel GEMM of one part: under sequence parallelism each unit's all-gather is
  // followed by that unit's GEMM while the next unit's all-gather runs.
  void column_gemm(Recorder& rec, int gemm_slot, int gather_slot, int64_t layer, const Tensor& w,
                   Tensor out, int part);
  // Row-parallel GEMM of one part, unit by unit, each unit's reduction issued right after it.
  size_t row_gemm(Recorder& rec, int gemm_slot, int reduce_slot, int64_t layer, const Tensor& in,
                  const Tensor& w, Tensor out_full, Tensor out_shard, int part);
  void gather_unit(Recorder& rec, int slot, int64_t layer, const Tensor& shard, Tensor full,
                   int unit);
  // ce-ring: the column-parallel GEMM beside the puts of this rank's rows (sequence
  // parallelism), and the row-parallel GEMM piece by piece with its reduce-scatter (and, without
  // sequence parallelism, the all-gather of the summed pieces) as puts.
  void ring_column_gemm(Recorder& rec, int gemm_slot, int gather_slot, int64_t layer,
                        const Tensor& w, Tensor out);
  // What ring_row_gemm() left for the op that reads its rows next. Under sequence parallelism:
  // a peer's partial piece in the exchange's window, for that op to add as it reads the reduced
  // rows, and to release after it. Without: the all-gather half in flight (its puts' record
  // open), the peers' summed pieces landing in `gather_window`, for that op to run piece by
  // piece as they land (gathered_pieces()); with sub-pieces (ce-ring:K), all but the last
  // sub-piece of every peer already waited for on the comm lane before `landed`.
  struct PendingPiece {
    Tensor piece;
    int peer = -1; ///< -1: no piece pending
    size_t window = 0;
    bool gathering = false;
    size_t handle = 0;
    size_t gather_window = 0;
    size_t landed = 0; ///< comm-lane fence (with sub-pieces)
  };
  void ring_row_gemm(Recorder& rec, int gemm_slot, int reduce_slot, int64_t layer, const Tensor& in,
                     const Tensor& w, Tensor out_full, Tensor out_shard, size_t reduce_window,
                     size_t out_window, PendingPiece& pending);
  // ce-ring:K: every piece in K sub-pieces, the peers' first (each put while the next
  // computes), then this rank's own, each GEMM adding a peer's partial sub-piece in its
  // epilogue (Backend::gemm_add) and, without sequence parallelism, each summed sub-piece put
  // into the peers while the next computes.
  void ring_row_gemm_subpieces(Recorder& rec, int gemm_slot, int reduce_slot, int64_t layer,
                               const Tensor& in, const Tensor& w, Tensor out_full, Tensor out_shard,
                               size_t reduce_window, size_t out_window, PendingPiece& pending);
  // Before each of a ring site's puts (StageLanes::ring_put), recorded as layer slot `slot`.
  using RingRecord = StageLanes::RingRecord;
  void ring_comm_begin(Recorder& rec, int slot, int64_t layer, RingRecord& record);
  // The all-gather half in flight: what the op after the ring needs of it (gathered_pieces()).
  void ring_gather_pending(Recorder& rec, PendingPiece& pending, size_t handle, size_t out_window);
  void release_pending(PendingPiece& pending);
  // on_rows(first row, rows) on this rank's summed rows, then on each peer's as they land
  // (nearest first); then the all-gather half's puts complete and its record closes.
  template <class OnRows>
  void gathered_pieces(Recorder& rec, PendingPiece& pending, OnRows&& on_rows);
  PendingPiece m_pending_proj, m_pending_fc2;
  // ce-ring's all-gather half: `bytes` from `src` into every peer's window `w` at `offset`, on
  // the comm lane.
  void put_to_peers(size_t w, size_t offset, const void* src, size_t bytes);
  // Collective plumbing: the lanes (m_lanes) record and join; these say whether this forward
  // computes and communicates at all.
  bool computing() const { return m_mode != StageMode::comm_only; }
  bool communicating() const { return m_mode != StageMode::compute_only && m_spec.shape.tp > 1; }
  // Ops are recorded through m_op_index: scope() for a compute op, fused_scope() for a GEMM
  // with the ops after it folded into its kernel (Backend::gemm_epilogue(): the folded ops
  // record nothing).
  // Whether this forward folds a decode op of `kind` into the GEMM before it: rotary and the
  // cache append into QKV, the activation into FC1 and, at TP1, the last residual add into FC2.
  // Where the backend fuses it at this step's rows and the GEMM runs whole (one part, one chunk,
  // no sequence parallelism).
  bool fused(GemmEpilogue::Kind kind) const;
  template <class Issue>
  void collective(Recorder& rec, int slot, int64_t layer, double share, Issue&& issue);
  void wait_comm(Recorder& rec, size_t fence);

  StageSpec m_spec;
  StageMode m_mode = StageMode::full;
  bool m_sp = false;
  OpTable* m_op_table;       ///< the constructor's `ops`
  std::vector<OpSpec> m_ops; ///< m_op_index's plan (bind_ops())
  // m_geo's tokens and stream tokens are the step's rows (a mixed stage's current mix's); the
  // buffers hold the capacity's.
  // A mixed stage: the mix it was built for (its mix_cache_rows() are each sequence's block of
  // the KV cache); empty otherwise.
  StepMix m_capacity;
  int64_t m_decode_step = 0;
  std::vector<LayerWeights> m_layers;
  Buffer m_in_buf, m_out_buf, m_tmp_buf, m_ln_buf, m_ln_full_buf, m_qkv_buf, m_attn_buf, m_proj_buf,
      m_proj_shard_buf, m_fc1_buf, m_act_buf, m_fc2_buf, m_fc2_shard_buf;
  Buffer m_mlp_block_buf; ///< a StageMlp's output of this rank's block (tp > 1, no sequence par.)
  // The buffers the collectives read or write: the norms' outputs ([stream tokens, hidden]:
  // the all-gathers' sources under sequence parallelism), the [tokens, hidden] buffers the
  // all-gathers land in and the row-parallel GEMMs write, and the reduce-scatters' outputs.
  struct CommBuffers {
    void* ln = nullptr;
    void* ln_full = nullptr;
    void* proj_full = nullptr;
    void* fc2_full = nullptr;
    void* proj_shard = nullptr;
    void* fc2_shard = nullptr;
  };
  // m_plain: the buffers above, or for the [tokens, hidden] ones the exchange's windows when the
  // stage has one (ce-ring puts into them). m_symm: the same in the communicator's symmetric
  // memory (the symm: strategies), else equal to m_plain.
  CommBuffers m_plain, m_symm;
  const CommBuffers& bufs() const { return m_policy.symmetric ? m_symm : m_plain; }
  Tensor m_input, m_output;
};

// Defined here, where both tp_layer.cpp and tp_layer_ring.cpp see it.
template <class OnRows>
inline void TpStage::gathered_pieces(Recorder& rec, PendingPiece& pending, OnRows&& on_rows) {
  const int tp = m_spec.shape.tp, r = m_spec.tp_rank;
  const int64_t n = m_geo.tokens / tp;
  const size_t bytes = full_view(bufs().proj_full).rows_slice(0, n).bytes();
  // Each peer's last sub-piece (its whole piece without sub-pieces); the comm lane waited for
  // the others before `landed`.
  const int sub = m_policy.ring_subpieces;
  const size_t q_bytes = bytes / static_cast<size_t>(sub);
  const size_t tail = bytes - q_bytes;
  const Stream compute = m_backend.stream(Lane::compute);
  for (int i = 0; i < tp; ++i) {
    const int j = (r + tp - i) % tp;
    if (i == 1 && sub > 1) m_backend.wait_fence(Lane::compute, pending.landed);
    if (i > 0) {
      m_exchange->wait(j, pending.gather_window, static_cast<size_t>(j) * bytes + tail, q_bytes,
                       compute);
      m_exchange->release(j, pending.gather_window, compute);
    }
    on_rows(j * n, n);
  }
  // The next GEMMs rewrite the pieces the puts read.
  m_lanes.ring_done(rec, *m_exchange, pending.handle);
  pending = PendingPiece{};
}

} // namespace ridgeline
