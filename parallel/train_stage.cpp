// The train phase's stage executor (see train_stage.hpp).
#include "parallel/train_stage.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>

#include "core/error.hpp"

namespace ridgeline {
namespace {
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
const char* const kTrainOpNames[t_count] = {op::norm1,
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

// Gradient tensors start at multiples of this many elements (aligned for vector loads).
constexpr int64_t kAlign = 64;
int64_t aligned(int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}
} // namespace

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

TrainStage::TrainStage(Backend& backend, Communicator* tp_comm, const TrainSpec& spec, OpTable& ops)
    : m_backend(backend), m_comm(tp_comm), m_spec(spec) {
  const LayerShape& s = spec.shape;
  RIDGELINE_REQUIRE(s.phase == Phase::prefill, "the train phase runs prefill-shaped layers");
  RIDGELINE_REQUIRE(s.tp == 1 || (tp_comm && tp_comm->size() == s.tp),
                    "tensor parallelism needs a communicator of tp ranks");
  RIDGELINE_REQUIRE(!spec.chunks.empty(), "a stage holds at least one chunk");
  m_geo = layer_geometry(spec.model, s, spec.tp_rank);
  RIDGELINE_REQUIRE(m_geo.stream_tokens * s.tp == m_geo.tokens || !m_geo.sequence_parallel,
                    "sequence parallelism needs the tokens of a microbatch to divide by tp");
  m_plan = train_layer_plan(spec.model, s, spec.attention);
  m_index.assign(t_count, -1);
  for (size_t i = 0; i < m_plan.size(); ++i) {
    m_ids.push_back(ops.intern(m_plan[i].name, m_plan[i].kind));
    for (int t = 0; t < t_count; ++t)
      if (m_plan[i].name == kTrainOpNames[t]) m_index[static_cast<size_t>(t)] = static_cast<int>(i);
  }

  // Weights, chunk by chunk; gradients in one buffer in the order the backward finishes them
  // (last chunk's last layer first), so that the data-parallel buckets fill front to back.
  const int64_t h = m_geo.hidden;
  const int64_t sizes[8] = {
      h, h, h, h, m_geo.qkv_cols() * h, h * m_geo.q_cols(), m_geo.fc1_cols() * h, h * m_geo.ffn};
  int64_t per_layer = 0;
  for (int64_t n : sizes)
    per_layer += aligned(n);
  for (size_t c = 0; c < spec.chunks.size(); ++c) {
    m_chunk_first.push_back(m_weights.size());
    for (int64_t l = 0; l < spec.chunks[c].second; ++l) {
      m_global.push_back(spec.chunks[c].first + l);
      m_weights.push_back(make_layer_weights(backend, spec.model, m_geo, m_global.back(),
                                             spec.tp_rank, spec.seed, m_allocated));
    }
  }
  const size_t layers = m_weights.size();
  const int64_t total = per_layer * static_cast<int64_t>(layers);
  m_grad_buf = alloc(total / kAlign, kAlign);
  const DType dt = backend.dtype();
  const size_t e = dtype_size(dt);
  m_grads.resize(layers);
  m_grad_range.resize(layers);
  int64_t off = 0;
  for (size_t i = layers; i-- > 0;) {
    m_grad_range[i].first = static_cast<size_t>(off) * e;
    LayerGrads& g = m_grads[i];
    Tensor* parts[8] = {&g.ln1_gamma, &g.ln1_beta, &g.ln2_gamma, &g.ln2_beta,
                        &g.wqkv,      &g.wo,       &g.w1,        &g.w2};
    const int64_t rows[8] = {1, 1, 1, 1, m_geo.qkv_cols(), h, m_geo.fc1_cols(), h};
    for (int p = 0; p < 8; ++p) {
      const int64_t cols = sizes[p] / rows[p];
      *parts[p] = Tensor{static_cast<char*>(m_grad_buf.data()) + static_cast<size_t>(off) * e,
                         rows[p], cols, cols, dt};
      off += aligned(sizes[p]);
    }
    m_grad_range[i].second = static_cast<size_t>(off) * e;
  }
  m_free.resize(spec.chunks.size());

  // Shared buffers.
  const int64_t t = m_geo.tokens, ts = m_geo.stream_tokens;
  m_scratch = std::make_unique<Scratch>();
  Scratch& sc = *m_scratch;
  sc.proj = alloc(t, h);
  sc.fc2 = alloc(t, h);
  sc.dtmp = alloc(ts, h);
  sc.dact = alloc(t, m_geo.ffn);
  sc.dattn = alloc(t, m_geo.q_cols());
  sc.dln = alloc(t, h);
  sc.ping = alloc(ts, h);
  sc.pong = alloc(ts, h);
  if (m_geo.sequence_parallel) {
    sc.ln_rows = alloc(ts, h);
    sc.rs_rows = alloc(ts, h);
    sc.dy_full = alloc(t, h);
  }
  sc.acts.dy1_buf = alloc(t, h);
  sc.acts.dfc1_buf = alloc(t, m_geo.fc1_cols());
  sc.acts.dqkv_buf = alloc(t, m_geo.qkv_cols());
  sc.acts.dy1 = sc.acts.dy1_buf.view(t, h, dt);
  sc.acts.dfc1 = sc.acts.dfc1_buf.view(t, m_geo.fc1_cols(), dt);
  sc.acts.dqkv = sc.acts.dqkv_buf.view(t, m_geo.qkv_cols(), dt);
}

TrainStage::~TrainStage() = default;

void TrainStage::set_variant(AttentionImpl attention, bool async_comm) {
  m_spec.attention = attention;
  m_spec.async_comm = async_comm;
  // The same ops in the same order (their ids stay); the naive attention's costs differ (it
  // writes its score matrices).
  m_plan = train_layer_plan(m_spec.model, m_spec.shape, attention);
}

Buffer TrainStage::alloc(int64_t rows, int64_t cols) {
  Buffer b = m_backend.allocate(rows, cols);
  m_allocated += b.bytes();
  return b;
}

TrainStage::Slot& TrainStage::slot(int microbatch, int chunk) {
  auto& live = m_live[{microbatch, chunk}];
  if (live) return *live;
  auto& pool = m_free[static_cast<size_t>(chunk)];
  if (!pool.empty()) {
    live = std::move(pool.back());
    pool.pop_back();
  } else {
    live = new_slot(chunk);
  }
  m_live_bytes += live->bytes;
  m_peak_bytes = std::max(m_peak_bytes, m_live_bytes);
  return *live;
}

// A new activation set: the layers' saved tensors (only each layer's input under recompute) and
// the chunk's boundary tensors.
std::unique_ptr<TrainStage::Slot> TrainStage::new_slot(int chunk) {
  const size_t before = m_allocated;
  auto s = std::make_unique<Slot>();
  const DType dt = m_backend.dtype();
  const int64_t ts = m_geo.stream_tokens, h = m_geo.hidden;
  const int64_t count = m_spec.chunks[static_cast<size_t>(chunk)].second;
  s->layers.resize(static_cast<size_t>(count));
  for (LayerActs& a : s->layers) {
    a.x_buf = alloc(ts, h);
    a.x = a.x_buf.view(ts, h, dt);
    if (!m_spec.recompute) allocate_saved(a);
  }
  s->out_buf = alloc(ts, h);
  s->grad_in_buf = alloc(ts, h);
  s->grad_out_buf = alloc(ts, h);
  s->out = s->out_buf.view(ts, h, dt);
  s->grad_in = s->grad_in_buf.view(ts, h, dt);
  s->grad_out = s->grad_out_buf.view(ts, h, dt);
  s->bytes = m_allocated - before;
  return s;
}

void TrainStage::reserve(int chunk, int sets) {
  auto& pool = m_free[static_cast<size_t>(chunk)];
  int held = static_cast<int>(pool.size());
  for (const auto& kv : m_live)
    held += kv.first.second == chunk ? 1 : 0;
  for (; held < sets; ++held)
    pool.push_back(new_slot(chunk));
}

void TrainStage::release(int microbatch, int chunk) {
  auto it = m_live.find({microbatch, chunk});
  RIDGELINE_REQUIRE(it != m_live.end(), "release of a microbatch that holds no activations");
  m_live_bytes -= it->second->bytes;
  m_free[static_cast<size_t>(chunk)].push_back(std::move(it->second));
  m_live.erase(it);
}

Tensor TrainStage::activation_in(int microbatch, int chunk) {
  return slot(microbatch, chunk).layers.front().x;
}
Tensor TrainStage::activation_out(int microbatch, int chunk) {
  return slot(microbatch, chunk).out;
}
Tensor TrainStage::gradient_in(int microbatch, int chunk) {
  return slot(microbatch, chunk).grad_in;
}
Tensor TrainStage::gradient_out(int microbatch, int chunk) {
  return slot(microbatch, chunk).grad_out;
}

int64_t TrainStage::first_row(int64_t global_mb) const {
  return global_mb * m_geo.tokens +
         (m_geo.sequence_parallel ? m_spec.tp_rank * m_geo.stream_tokens : 0);
}

void TrainStage::fill_input(int microbatch, int chunk, int64_t global_mb) {
  const GenKey key{m_spec.seed, tensor_id(-1, role_input), m_geo.hidden, 1.0f};
  m_backend.fill_random(activation_in(microbatch, chunk), key, first_row(global_mb), 0);
}

void TrainStage::fill_grad_output(int microbatch, int chunk, int64_t global_mb) {
  const GenKey key{m_spec.seed, tensor_id(-1, role_grad_output), m_geo.hidden, 1.0f};
  m_backend.fill_random(gradient_in(microbatch, chunk), key, first_row(global_mb), 0);
}

ScopedOp TrainStage::op_scope(Recorder& rec, int op, int64_t layer) const {
  const int i = m_index[static_cast<size_t>(op)];
  RIDGELINE_REQUIRE(i >= 0, std::string("the layer plan has no op ") + kTrainOpNames[op]);
  const OpSpec& o = m_plan[static_cast<size_t>(i)];
  return ScopedOp(rec, m_ids[static_cast<size_t>(i)], static_cast<int32_t>(layer), o.lane, o.cost,
                  Lane::compute);
}

void TrainStage::tp_collective(Recorder& rec, int op, int64_t layer,
                               const std::function<void(Stream)>& issue) {
  if (m_spec.shape.tp == 1) return;
  const Lane queue = m_spec.async_comm ? Lane::comm : Lane::compute;
  if (queue == Lane::comm) m_backend.wait_fence(Lane::comm, m_backend.fence(Lane::compute));
  const int i = m_index[static_cast<size_t>(op)];
  RIDGELINE_REQUIRE(i >= 0, std::string("the layer plan has no op ") + kTrainOpNames[op]);
  const OpSpec& o = m_plan[static_cast<size_t>(i)];
  const ranges::Scope range(o.name);
  const size_t handle = rec.begin(m_ids[static_cast<size_t>(i)], static_cast<int32_t>(layer),
                                  Lane::comm, o.cost, queue);
  const Stream stream = m_backend.stream(queue);
  issue(stream);
  if (m_comm->stream_ordered() || stream == nullptr)
    rec.end(handle);
  else
    m_open_comm.push_back(handle);
}

void TrainStage::tp_all_reduce(Recorder& rec, int op, int64_t layer, Tensor t) {
  tp_collective(rec, op, layer, [&](Stream stream) {
    m_comm->all_reduce(t.data, t.data, static_cast<size_t>(t.elements()), t.dtype, ReduceOp::sum,
                       stream);
  });
}

void TrainStage::tp_all_gather(Recorder& rec, int op, int64_t layer, const Tensor& rows,
                               Tensor full) {
  tp_collective(rec, op, layer, [&](Stream stream) {
    m_comm->all_gather(rows.data, full.data, static_cast<size_t>(rows.elements()), rows.dtype,
                       stream);
  });
}

void TrainStage::tp_reduce_scatter(Recorder& rec, int op, int64_t layer, const Tensor& full,
                                   Tensor rows) {
  tp_collective(rec, op, layer, [&](Stream stream) {
    m_comm->reduce_scatter(full.data, rows.data, static_cast<size_t>(rows.elements()), rows.dtype,
                           ReduceOp::sum, stream);
  });
}

void TrainStage::wait_tp(Recorder& rec) {
  if (m_spec.shape.tp == 1 || !m_spec.async_comm) return;
  m_comm->complete(m_backend.stream(Lane::comm));
  for (size_t handle : m_open_comm)
    rec.end(handle);
  m_open_comm.clear();
  m_backend.wait_fence(Lane::compute, m_backend.fence(Lane::comm));
}

void TrainStage::forward_layer(Recorder& rec, size_t local, LayerActs& a, Tensor y) {
  const ModelSpec& m = m_spec.model;
  const LayerShape& s = m_spec.shape;
  const LayerWeights& w = m_weights[local];
  const int64_t layer = m_global[local];
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden, t = m_geo.tokens, d = m_geo.head_dim;
  const float eps = static_cast<float>(m.norm_eps);
  auto norm = [&](int op, const Tensor& in, const Buffer& gamma, const Buffer& beta, Tensor out) {
    const ScopedOp scope = op_scope(rec, op, layer);
    if (m.norm == NormKind::layernorm)
      m_backend.layer_norm(in, gamma.view(1, h, dt), beta.view(1, h, dt), out, eps);
    else
      m_backend.rms_norm(in, gamma.view(1, h, dt), out, eps);
  };
  // Under sequence parallelism a norm runs on this rank's rows and its output is gathered for
  // the column-parallel GEMM; the row-parallel GEMM's partial sums are reduce-scattered back
  // onto this rank's rows instead of all-reduced.
  const bool sp = m_geo.sequence_parallel;
  const int64_t ts = m_geo.stream_tokens;
  const Tensor ln_rows = sp ? m_scratch->ln_rows.view(ts, h, dt) : Tensor{};
  const Tensor rs_rows = sp ? m_scratch->rs_rows.view(ts, h, dt) : Tensor{};
  norm(t_norm1, a.x, w.ln1_gamma, w.ln1_beta, sp ? ln_rows : a.ln1);
  if (sp) {
    tp_all_gather(rec, t_ag_attn, layer, ln_rows, a.ln1);
    wait_tp(rec);
  }
  {
    const ScopedOp scope = op_scope(rec, t_qkv, layer);
    m_backend.gemm(a.ln1, w.wqkv.view(m_geo.qkv_cols(), h, dt), a.qkv);
  }
  if (m.rotary) {
    const ScopedOp scope = op_scope(rec, t_rotary, layer);
    m_backend.rotary(a.qkv.cols_slice(0, m_geo.q_cols() + m_geo.kv_cols()),
                     m_geo.heads + m_geo.kv_heads, d, s.seq, 0, static_cast<float>(m.rope_theta));
  }
  {
    AttentionShape shape;
    shape.batch = s.batch;
    shape.seq = shape.context = shape.capacity = s.seq;
    shape.heads = m_geo.heads;
    shape.kv_heads = m_geo.kv_heads;
    shape.head_dim = d;
    const ScopedOp scope = op_scope(rec, t_attention, layer);
    m_backend.attention_train(shape, a.qkv.cols_slice(0, m_geo.q_cols()),
                              a.qkv.cols_slice(m_geo.q_cols(), m_geo.kv_cols()),
                              a.qkv.cols_slice(m_geo.q_cols() + m_geo.kv_cols(), m_geo.kv_cols()),
                              a.attn, a.lse, m_spec.attention);
  }
  const Tensor proj = m_scratch->proj.view(t, h, dt);
  {
    const ScopedOp scope = op_scope(rec, t_proj, layer);
    m_backend.gemm(a.attn, w.wo.view(h, m_geo.q_cols(), dt), proj);
  }
  if (sp)
    tp_reduce_scatter(rec, t_rs_attn, layer, proj, rs_rows);
  else
    tp_all_reduce(rec, t_ar_attn, layer, proj);
  wait_tp(rec);
  {
    // y1 = x + the attention branch, and its norm, in one kernel.
    const ScopedOp scope = op_scope(rec, t_res1_norm2, layer);
    const Tensor beta = m.norm == NormKind::layernorm ? w.ln2_beta.view(1, h, dt) : Tensor{};
    m_backend.add_norm(a.x, sp ? rs_rows : proj, a.y1, w.ln2_gamma.view(1, h, dt), beta,
                       sp ? ln_rows : a.ln2, eps);
  }
  if (sp) {
    tp_all_gather(rec, t_ag_mlp, layer, ln_rows, a.ln2);
    wait_tp(rec);
  }
  {
    const ScopedOp scope = op_scope(rec, t_fc1, layer);
    m_backend.gemm(a.ln2, w.w1.view(m_geo.fc1_cols(), h, dt), a.fc1);
  }
  {
    const ScopedOp scope = op_scope(rec, t_act, layer);
    if (m_geo.swiglu)
      m_backend.swiglu(a.fc1, a.act);
    else
      m_backend.gelu(a.fc1, a.act);
  }
  const Tensor fc2 = m_scratch->fc2.view(t, h, dt);
  {
    const ScopedOp scope = op_scope(rec, t_fc2, layer);
    m_backend.gemm(a.act, w.w2.view(h, m_geo.ffn, dt), fc2);
  }
  if (sp)
    tp_reduce_scatter(rec, t_rs_mlp, layer, fc2, rs_rows);
  else
    tp_all_reduce(rec, t_ar_mlp, layer, fc2);
  wait_tp(rec);
  const ScopedOp scope = op_scope(rec, t_res2, layer);
  m_backend.add(a.y1, sp ? rs_rows : fc2, y);
}

// The input-gradient half of one layer's backward; with `saved` null the weight gradients run
// here too, each right after the input gradient it shares its operand with (and beside the
// TP all-reduce under async), else the gradients they need stay in `saved`.
void TrainStage::backward_layer_input(Recorder& rec, size_t local, LayerActs& a, LayerActs* saved,
                                      const Tensor& dy, Tensor dx) {
  const ModelSpec& m = m_spec.model;
  const LayerShape& s = m_spec.shape;
  const LayerWeights& w = m_weights[local];
  const LayerGrads& g = m_grads[local];
  const int64_t layer = m_global[local];
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden, t = m_geo.tokens, d = m_geo.head_dim;
  const float eps = static_cast<float>(m.norm_eps);
  const bool now = saved == nullptr;
  LayerActs& grads = now ? m_scratch->acts : *saved;
  // Under sequence parallelism dy, dx and the norms' gradients are this rank's rows; the
  // output gradients are gathered for the row-parallel GEMMs (the forward reduce-scattered
  // their outputs) and the column-parallel GEMMs' input gradients reduce-scattered.
  const bool sp = m_geo.sequence_parallel;
  const int64_t ts = m_geo.stream_tokens;
  const Tensor dy_full =
      !sp ? dy : (now ? m_scratch->dy_full.view(t, h, dt) : grads.dyg_buf.view(t, h, dt));
  if (sp) {
    tp_all_gather(rec, t_ag_mlp_bwd, layer, dy, dy_full);
    wait_tp(rec);
  }
  if (!now) grads.dy = dy_full;
  const Tensor dact = m_scratch->dact.view(t, m_geo.ffn, dt);
  const Tensor dln_full = m_scratch->dln.view(t, h, dt);
  const Tensor dln = sp ? m_scratch->rs_rows.view(ts, h, dt) : dln_full;
  const Tensor dy1 = sp ? m_scratch->ln_rows.view(ts, h, dt) : grads.dy1;
  const Tensor dtmp = m_scratch->dtmp.view(ts, h, dt);
  const Tensor dattn = m_scratch->dattn.view(t, m_geo.q_cols(), dt);
  // The input gradient of a column-parallel GEMM, summed over the TP ranks.
  auto sum_tp = [&](int all_reduce, int reduce_scatter) {
    if (sp)
      tp_reduce_scatter(rec, reduce_scatter, layer, dln_full, dln);
    else
      tp_all_reduce(rec, all_reduce, layer, dln_full);
  };
  auto wgrad = [&](int op, const Tensor& dout, const Tensor& in, Tensor dw) {
    const ScopedOp scope = op_scope(rec, op, layer);
    m_backend.gemm(dout, Trans::yes, in, Trans::no, dw, true, Lane::compute);
  };
  auto norm_bwd = [&](int op, const Tensor& x, const Buffer& gamma, Tensor dgamma, Tensor dbeta) {
    const ScopedOp scope = op_scope(rec, op, layer);
    if (m.norm == NormKind::layernorm)
      m_backend.layer_norm_backward(x, gamma.view(1, h, dt), dln, dtmp, dgamma, dbeta, eps, true);
    else
      m_backend.rms_norm_backward(x, gamma.view(1, h, dt), dln, dtmp, dgamma, eps, true);
  };

  // MLP: dact = dy W2; dfc1 through the activation; dln2 = dfc1 W1, summed over TP.
  {
    const ScopedOp scope = op_scope(rec, t_fc2_dgrad, layer);
    m_backend.gemm(dy_full, Trans::no, w.w2.view(h, m_geo.ffn, dt), Trans::no, dact, false,
                   Lane::compute);
  }
  if (now) wgrad(t_fc2_wgrad, dy_full, a.act, g.w2);
  {
    const ScopedOp scope = op_scope(rec, t_act_bwd, layer);
    if (m_geo.swiglu)
      m_backend.swiglu_backward(a.fc1, dact, grads.dfc1);
    else
      m_backend.gelu_backward(a.fc1, dact, grads.dfc1);
  }
  {
    const ScopedOp scope = op_scope(rec, t_fc1_dgrad, layer);
    m_backend.gemm(grads.dfc1, Trans::no, w.w1.view(m_geo.fc1_cols(), h, dt), Trans::no, dln_full,
                   false, Lane::compute);
  }
  sum_tp(t_ar_mlp_bwd, t_rs_mlp_bwd);
  if (now) wgrad(t_fc1_wgrad, grads.dfc1, a.ln2, g.w1);
  wait_tp(rec);
  norm_bwd(t_norm2_bwd, a.y1, w.ln2_gamma, g.ln2_gamma, g.ln2_beta);
  {
    const ScopedOp scope = op_scope(rec, t_res2_bwd, layer);
    m_backend.add(dy, dtmp, dy1);
  }
  if (sp) {
    tp_all_gather(rec, t_ag_attn_bwd, layer, dy1, grads.dy1);
    wait_tp(rec);
  }

  // Attention: dattn = dy1 Wo; attention backward into dqkv; rotary's inverse; dln1 = dqkv
  // Wqkv, summed over TP.
  {
    const ScopedOp scope = op_scope(rec, t_proj_dgrad, layer);
    m_backend.gemm(grads.dy1, Trans::no, w.wo.view(h, m_geo.q_cols(), dt), Trans::no, dattn, false,
                   Lane::compute);
  }
  if (now) wgrad(t_proj_wgrad, grads.dy1, a.attn, g.wo);
  {
    AttentionShape shape;
    shape.batch = s.batch;
    shape.seq = shape.context = shape.capacity = s.seq;
    shape.heads = m_geo.heads;
    shape.kv_heads = m_geo.kv_heads;
    shape.head_dim = d;
    const int64_t q = m_geo.q_cols(), kv = m_geo.kv_cols();
    const ScopedOp scope = op_scope(rec, t_attention_bwd, layer);
    m_backend.attention_backward(shape, a.qkv.cols_slice(0, q), a.qkv.cols_slice(q, kv),
                                 a.qkv.cols_slice(q + kv, kv), a.attn, dattn, a.lse,
                                 grads.dqkv.cols_slice(0, q), grads.dqkv.cols_slice(q, kv),
                                 grads.dqkv.cols_slice(q + kv, kv), m_spec.attention);
  }
  if (m.rotary) {
    const ScopedOp scope = op_scope(rec, t_rotary_bwd, layer);
    m_backend.rotary_backward(grads.dqkv.cols_slice(0, m_geo.q_cols() + m_geo.kv_cols()),
                              m_geo.heads + m_geo.kv_heads, d, s.seq, 0,
                              static_cast<float>(m.rope_theta));
  }
  {
    const ScopedOp scope = op_scope(rec, t_qkv_dgrad, layer);
    m_backend.gemm(grads.dqkv, Trans::no, w.wqkv.view(m_geo.qkv_cols(), h, dt), Trans::no, dln_full,
                   false, Lane::compute);
  }
  sum_tp(t_ar_attn_bwd, t_rs_attn_bwd);
  if (now) wgrad(t_qkv_wgrad, grads.dqkv, a.ln1, g.wqkv);
  wait_tp(rec);
  norm_bwd(t_norm1_bwd, a.x, w.ln1_gamma, g.ln1_gamma, g.ln1_beta);
  const ScopedOp scope = op_scope(rec, t_res1_bwd, layer);
  m_backend.add(dy1, dtmp, dx);
}

void TrainStage::backward_layer_weight(Recorder& rec, size_t local, const LayerActs& a) {
  const LayerGrads& g = m_grads[local];
  const int64_t layer = m_global[local];
  auto wgrad = [&](int op, const Tensor& dout, const Tensor& in, Tensor dw) {
    const ScopedOp scope = op_scope(rec, op, layer);
    m_backend.gemm(dout, Trans::yes, in, Trans::no, dw, true, Lane::compute);
  };
  wgrad(t_fc2_wgrad, a.dy, a.act, g.w2);
  wgrad(t_fc1_wgrad, a.dfc1, a.ln2, g.w1);
  wgrad(t_proj_wgrad, a.dy1, a.attn, g.wo);
  wgrad(t_qkv_wgrad, a.dqkv, a.ln1, g.wqkv);
}

void TrainStage::allocate_saved(LayerActs& a) {
  const DType dt = m_backend.dtype();
  const int64_t t = m_geo.tokens, h = m_geo.hidden;
  a.ln1_buf = alloc(t, h);
  a.qkv_buf = alloc(t, m_geo.qkv_cols());
  a.attn_buf = alloc(t, m_geo.q_cols());
  a.lse_buf = m_backend.allocate_bytes(
      static_cast<size_t>(m_spec.shape.batch * m_geo.heads * m_spec.shape.seq) * 4);
  m_allocated += a.lse_buf.bytes();
  a.y1_buf = alloc(m_geo.stream_tokens, h);
  a.ln2_buf = alloc(t, h);
  a.fc1_buf = alloc(t, m_geo.fc1_cols());
  a.act_buf = alloc(t, m_geo.ffn);
  a.ln1 = a.ln1_buf.view(t, h, dt);
  a.qkv = a.qkv_buf.view(t, m_geo.qkv_cols(), dt);
  a.attn = a.attn_buf.view(t, m_geo.q_cols(), dt);
  a.lse = a.lse_buf.data();
  a.y1 = a.y1_buf.view(m_geo.stream_tokens, h, dt);
  a.ln2 = a.ln2_buf.view(t, h, dt);
  a.fc1 = a.fc1_buf.view(t, m_geo.fc1_cols(), dt);
  a.act = a.act_buf.view(t, m_geo.ffn, dt);
}

TrainStage::LayerActs& TrainStage::recompute_acts() {
  LayerActs& r = m_scratch->acts;
  if (r.ln1_buf.data()) return r;
  allocate_saved(r);
  r.x_buf = alloc(m_geo.stream_tokens, m_geo.hidden); // the recomputed layer's output, unread
  return r;
}

void TrainStage::forward(Recorder& rec, int microbatch, int chunk) {
  Slot& sl = slot(microbatch, chunk);
  const size_t first = m_chunk_first[static_cast<size_t>(chunk)];
  const size_t n = sl.layers.size();
  rec.set_microbatch(microbatch);
  for (size_t l = 0; l < n; ++l) {
    const Tensor y = l + 1 < n ? sl.layers[l + 1].x : sl.out;
    if (!m_spec.recompute) {
      forward_layer(rec, first + l, sl.layers[l], y);
      continue;
    }
    // Only each layer's input is kept; the rest goes to shared buffers.
    LayerActs& r = recompute_acts();
    r.x = sl.layers[l].x;
    forward_layer(rec, first + l, r, y);
  }
}

void TrainStage::backward_input(Recorder& rec, int microbatch, int chunk) {
  Slot& sl = slot(microbatch, chunk);
  const size_t first = m_chunk_first[static_cast<size_t>(chunk)];
  const size_t n = sl.layers.size();
  rec.set_microbatch(microbatch);
  const DType dt = m_backend.dtype();
  const int64_t t = m_geo.tokens, ts = m_geo.stream_tokens, h = m_geo.hidden;
  // Deferred weight gradients keep each layer's output gradient: layer l's dx is written
  // straight into layer l - 1's dy buffer (and, under sequence parallelism, gathered into its
  // dyg buffer, which the weight gradient reads).
  for (size_t l = 0; l < n; ++l) {
    LayerActs& a = sl.layers[l];
    if (!a.dy1_buf.data()) {
      const size_t before = m_allocated;
      if (l + 1 < n) a.dy_buf = alloc(ts, h);
      if (m_geo.sequence_parallel) a.dyg_buf = alloc(t, h);
      a.dy1_buf = alloc(t, h);
      a.dfc1_buf = alloc(t, m_geo.fc1_cols());
      a.dqkv_buf = alloc(t, m_geo.qkv_cols());
      // The set grows by what the deferred weight gradients keep, from now on.
      const size_t kept = m_allocated - before;
      sl.bytes += kept;
      m_live_bytes += kept;
      m_peak_bytes = std::max(m_peak_bytes, m_live_bytes);
      a.dy1 = a.dy1_buf.view(t, h, dt);
      a.dfc1 = a.dfc1_buf.view(t, m_geo.fc1_cols(), dt);
      a.dqkv = a.dqkv_buf.view(t, m_geo.qkv_cols(), dt);
    }
  }
  for (size_t l = n; l-- > 0;) {
    LayerActs& a = sl.layers[l];
    const Tensor dy = l + 1 == n ? sl.grad_in : a.dy_buf.view(ts, h, dt);
    const Tensor dx = l == 0 ? sl.grad_out : sl.layers[l - 1].dy_buf.view(ts, h, dt);
    backward_layer_input(rec, first + l, a, &a, dy, dx);
  }
}

void TrainStage::backward_weight(Recorder& rec, int microbatch, int chunk) {
  Slot& sl = slot(microbatch, chunk);
  const size_t first = m_chunk_first[static_cast<size_t>(chunk)];
  rec.set_microbatch(microbatch);
  for (size_t l = sl.layers.size(); l-- > 0;) {
    backward_layer_weight(rec, first + l, sl.layers[l]);
    layer_done(rec, first + l);
  }
}

void TrainStage::backward(Recorder& rec, int microbatch, int chunk) {
  Slot& sl = slot(microbatch, chunk);
  const size_t first = m_chunk_first[static_cast<size_t>(chunk)];
  const size_t n = sl.layers.size();
  rec.set_microbatch(microbatch);
  const DType dt = m_backend.dtype();
  const int64_t ts = m_geo.stream_tokens, h = m_geo.hidden;
  Tensor dy = sl.grad_in;
  for (size_t l = n; l-- > 0;) {
    // Gradients pass between layers through two alternating buffers.
    const Tensor dx =
        l == 0 ? sl.grad_out
               : ((n - 1 - l) % 2 == 0 ? m_scratch->ping : m_scratch->pong).view(ts, h, dt);
    LayerActs* a = &sl.layers[l];
    if (m_spec.recompute) {
      // The layer's forward again from its kept input, into the shared activations.
      LayerActs& r = recompute_acts();
      r.x = a->x;
      forward_layer(rec, first + l, r, r.x_buf.view(ts, h, dt));
      a = &r;
    }
    backward_layer_input(rec, first + l, *a, nullptr, dy, dx);
    layer_done(rec, first + l);
    dy = dx;
  }
}

void TrainStage::begin_iteration(Recorder& rec, int microbatches) {
  m_microbatches = microbatches;
  m_weight_passes.assign(m_weights.size(), 0);
  m_buckets_issued = 0;
  // Buckets: the gradient buffer cut into pieces of at most bucket_bytes (a multiple of the
  // replicas' count of alignment units, so that a reduce-scatter splits each evenly).
  m_buckets.clear();
  const size_t e = dtype_size(m_backend.dtype());
  const size_t total = m_grad_buf.bytes();
  const int dp = m_dp.comm ? m_dp.comm->size() : 1;
  const size_t unit = static_cast<size_t>(kAlign) * e * static_cast<size_t>(dp);
  const size_t step = std::max(unit, m_dp.bucket_bytes / unit * unit);
  for (size_t b = 0; b < total; b += step)
    m_buckets.emplace_back(b, std::min(total, b + step));
  const int32_t id = rec.ops().intern(op::grad_zero, OpKind::elementwise);
  const Tensor all =
      m_grad_buf.view(static_cast<int64_t>(total / e) / kAlign, kAlign, m_backend.dtype());
  const ScopedOp scope(rec, id, -1, Lane::compute, OpCost{0, static_cast<double>(total), 0},
                       Lane::compute);
  m_backend.fill_value(all, 0.0f);
}

void TrainStage::layer_done(Recorder& rec, size_t local) {
  ++m_weight_passes[local];
  if (m_geo.sequence_parallel && m_weight_passes[local] == m_microbatches) {
    // Each rank's norm gradients cover its own rows: summed over the TP group once final, before
    // a data-parallel bucket takes them. ln1_gamma .. ln2_beta are contiguous in the buffer.
    const LayerGrads& g = m_grads[local];
    const size_t count = static_cast<size_t>(
        (static_cast<char*>(g.wqkv.data) - static_cast<char*>(g.ln1_gamma.data)) /
        static_cast<std::ptrdiff_t>(dtype_size(g.wqkv.dtype)));
    const int32_t id = rec.ops().intern(op::allreduce_norm_grads, OpKind::collective);
    const double bytes = static_cast<double>(count * dtype_size(g.wqkv.dtype));
    const ScopedOp scope(rec, id, static_cast<int32_t>(m_global[local]), Lane::comm,
                         OpCost{bytes, 2.0 * bytes, bytes}, Lane::compute);
    const Stream stream = m_backend.stream(Lane::compute);
    m_comm->all_reduce(g.ln1_gamma.data, g.ln1_gamma.data, count, g.wqkv.dtype, ReduceOp::sum,
                       stream);
    m_comm->complete(stream);
  }
  if (m_dp.overlap) issue_buckets(rec, false);
}

// Issues, in order, every bucket whose layers' gradients are final (all of them with `all`).
// Every replica runs the same schedule, so every replica issues the same sequence.
void TrainStage::issue_buckets(Recorder& rec, bool all) {
  if (!m_dp.comm || m_dp.comm->size() == 1) return;
  const size_t e = dtype_size(m_backend.dtype());
  const DType dt = m_backend.dtype();
  const int dp = m_dp.comm->size();
  const int32_t id =
      rec.ops().intern(m_dp.shard ? op::dp_reducescatter : op::dp_allreduce, OpKind::collective);
  while (m_buckets_issued < m_buckets.size()) {
    const auto [begin, end] = m_buckets[m_buckets_issued];
    bool ready = all;
    if (!ready) {
      ready = true;
      for (size_t i = 0; i < m_grad_range.size(); ++i)
        if (m_grad_range[i].first < end && m_grad_range[i].second > begin &&
            m_weight_passes[i] < m_microbatches)
          ready = false;
    }
    if (!ready) return;
    ++m_buckets_issued;
    const size_t count = (end - begin) / e;
    char* data = static_cast<char*>(m_grad_buf.data()) + begin;
    // On the comm lane, after the gradients the compute lane has produced so far.
    m_backend.wait_fence(Lane::comm, m_backend.fence(Lane::compute));
    const double bytes = static_cast<double>(end - begin);
    const ranges::Scope range(rec.ops().name(id));
    const size_t handle =
        rec.begin(id, -1, Lane::comm, OpCost{bytes, 2.0 * bytes, bytes}, Lane::comm);
    const Stream stream = m_backend.stream(Lane::comm);
    if (m_dp.shard) {
      // Each replica's share of the summed bucket lands in place, at its block.
      const size_t share = count / static_cast<size_t>(dp);
      m_dp.comm->reduce_scatter(data, data + static_cast<size_t>(m_dp.comm->rank()) * share * e,
                                share, dt, ReduceOp::sum, stream);
    } else {
      m_dp.comm->all_reduce(data, data, count, dt, ReduceOp::sum, stream);
    }
    if (m_dp.comm->stream_ordered())
      rec.end(handle);
    else
      m_dp_open.push_back(handle);
  }
}

void TrainStage::end_iteration(Recorder& rec, float sgd_lr, bool gather_shards) {
  issue_buckets(rec, true);
  if (m_dp.comm && m_dp.comm->size() > 1) {
    const Stream stream = m_backend.stream(Lane::comm);
    m_dp.comm->complete(stream);
    for (size_t handle : m_dp_open)
      rec.end(handle);
    m_dp_open.clear();
    if (m_dp.shard && gather_shards) {
      // Every replica's share back into place, so that whole gradients can be checked.
      const size_t e = dtype_size(m_backend.dtype());
      const auto dp = static_cast<size_t>(m_dp.comm->size());
      for (const auto& [begin, end] : m_buckets) {
        const size_t share = (end - begin) / e / dp;
        char* data = static_cast<char*>(m_grad_buf.data()) + begin;
        m_dp.comm->all_gather(data + static_cast<size_t>(m_dp.comm->rank()) * share * e, data,
                              share, m_backend.dtype(), stream);
      }
      m_dp.comm->complete(stream);
    }
    m_backend.wait_fence(Lane::compute, m_backend.fence(Lane::comm));
  }
  if (sgd_lr == 0.0f) return;
  const DType dt = m_backend.dtype();
  const int32_t id = rec.ops().intern(op::sgd_update, OpKind::elementwise);
  const double bytes = 3.0 * static_cast<double>(m_grad_buf.bytes());
  const ScopedOp scope(rec, id, -1, Lane::compute,
                       OpCost{bytes / 3.0 * 2.0 / static_cast<double>(dtype_size(dt)), bytes, 0},
                       Lane::compute);
  for (size_t i = 0; i < m_weights.size(); ++i) {
    const LayerWeights& w = m_weights[i];
    const LayerGrads& g = m_grads[i];
    const std::pair<const Tensor*, const Buffer*> pairs[] = {{&g.ln1_gamma, &w.ln1_gamma},
                                                             {&g.ln1_beta, &w.ln1_beta},
                                                             {&g.ln2_gamma, &w.ln2_gamma},
                                                             {&g.ln2_beta, &w.ln2_beta},
                                                             {&g.wqkv, &w.wqkv},
                                                             {&g.wo, &w.wo},
                                                             {&g.w1, &w.w1},
                                                             {&g.w2, &w.w2}};
    for (const auto& [grad, weight] : pairs)
      m_backend.axpy(-sgd_lr, *grad, weight->view(grad->rows, grad->cols, dt));
  }
}

} // namespace ridgeline
