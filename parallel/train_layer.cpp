// One layer of the train stage, forward and backward, under the stage's overlap policy: each
// collective + GEMM site run by row_site or column_site (overlap_policy.hpp), the parts of
// split:N interleaved phase by phase, and the TP collectives on the policy's lane.
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/ranges.hpp"
#include "parallel/layer_op_index.hpp"
#include "parallel/train_stage_detail.hpp"

namespace ridgeline {
using namespace layer_op;

// What one layer's forward or backward works on: the layer, its saved activations and, in the
// backward, the gradients it reads and writes (views of the whole microbatch or, under
// sequence parallelism, of this rank's rows where named so).
struct TrainStage::LayerPass {
  size_t local = 0;
  int64_t layer = 0;
  const LayerWeights* w = nullptr;
  LayerActs* a = nullptr;
  Tensor y; ///< forward: the layer's output (this rank's rows)
  // Backward: `grads` holds dfc1, dqkv (and, deferred, dy, dy1 for the weight gradients).
  LayerActs* grads = nullptr;
  bool now = true; ///< weight gradients in this pass (not deferred)
  Tensor dy, dx;   ///< the output's and the input's gradients (this rank's rows)
  Tensor dy_full;  ///< dy gathered (sequence parallelism), else dy
  Tensor dy1;      ///< the gradient of y1 (this rank's rows)
  Tensor dy1_full; ///< dy1 gathered (sequence parallelism), else dy1
  Tensor dact, dattn, dtmp;
  Tensor dln_full; ///< a column-parallel GEMM's input gradient, partial over TP
  Tensor dln;      ///< the same summed over TP (this rank's rows under sequence parallelism)
};

void TrainStage::tp_collective(Recorder& rec, int op, int64_t layer,
                               const std::function<void(Stream)>& issue) {
  if (m_spec.shape.tp == 1) return;
  const OpSpec& o = m_op_index.spec(op);
  // Every collective of a layer covers one unit of its site.
  m_lanes.collective(rec, m_op_index.id(op), layer, scaled(o.cost, 1.0 / m_policy.units()), o.name,
                     issue);
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

template <class Gemm>
void TrainStage::column_gemm(Recorder& rec, int gather_op, int gemm_op, int64_t layer,
                             const Tensor& rows, const Tensor& full, const Tensor& out, int p,
                             Gemm&& gemm) {
  if (!m_geo.sequence_parallel) {
    const ScopedOp scope = m_op_index.scope(rec, gemm_op, layer, 1.0 / m_policy.parts);
    gemm(m_policy.part(full, p), m_policy.part(out, p));
    return;
  }
  if (ring()) {
    ring_column_gemm(rec, gather_op, gemm_op, layer, rows, full, out, gemm);
    return;
  }
  // Each unit's GEMM waits for that unit's gather only (the next one's is issued after the
  // fence) and computes while the next unit's gather runs.
  column_site(
      m_policy, p,
      [&](int u) {
        tp_all_gather(rec, gather_op, layer, m_policy.unit(rows, u), m_policy.unit(full, u));
      },
      [&] { wait_tp(rec, tp_fence()); },
      [&](int u, bool) {
        const ScopedOp scope = m_op_index.scope(rec, gemm_op, layer, 1.0 / m_policy.units());
        gemm(m_policy.unit(full, u), m_policy.unit(out, u));
      });
}

template <class Gemm>
size_t TrainStage::row_gemm(Recorder& rec, int gemm_op, int all_reduce_op, int reduce_scatter_op,
                            int64_t layer, const Tensor& full, const Tensor& rows, int p,
                            Gemm&& gemm) {
  if (ring()) {
    ring_row_gemm(rec, gemm_op, m_geo.sequence_parallel ? reduce_scatter_op : all_reduce_op, layer,
                  full, rows, gemm);
    return tp_fence();
  }
  const int64_t n = full.rows / m_policy.units();
  row_site(
      m_policy, p,
      [&](int u, bool) {
        const ScopedOp scope = m_op_index.scope(rec, gemm_op, layer, 1.0 / m_policy.units());
        gemm(u * n, n);
      },
      [&](int u) {
        if (m_geo.sequence_parallel)
          tp_reduce_scatter(rec, reduce_scatter_op, layer, m_policy.unit(full, u),
                            m_policy.unit(rows, u));
        else
          tp_all_reduce(rec, all_reduce_op, layer, m_policy.unit(full, u));
      });
  return tp_fence();
}

void TrainStage::norm(Recorder& rec, int op, int64_t layer, const Tensor& in, const Buffer& gamma,
                      const Buffer& beta, Tensor out) {
  const ScopedOp scope = m_op_index.scope(rec, op, layer, 1.0 / m_policy.parts);
  model_norm(m_backend, m_spec.model, in, gamma, beta, out);
}

void TrainStage::norm_backward(Recorder& rec, int op, int64_t layer, const Tensor& x,
                               const Buffer& gamma, const Tensor& dy, Tensor dx, Tensor dgamma,
                               Tensor dbeta) {
  const ModelSpec& m = m_spec.model;
  const DType dt = m_backend.dtype();
  const float eps = static_cast<float>(m.norm_eps);
  const ScopedOp scope = m_op_index.scope(rec, op, layer, 1.0 / m_policy.parts);
  if (m.norm == NormKind::layernorm)
    m_backend.layer_norm_backward(x, gamma.view(1, m.hidden, dt), dy, dx, dgamma, dbeta, eps, true);
  else
    m_backend.rms_norm_backward(x, gamma.view(1, m.hidden, dt), dy, dx, dgamma, eps, true);
}

void TrainStage::weight_gradient(Recorder& rec, int op, int64_t layer, double share,
                                 const Tensor& dout, const Tensor& in, Tensor dw) {
  const ScopedOp scope = m_op_index.scope(rec, op, layer, share);
  m_backend.gemm(dout, Trans::yes, in, Trans::no, dw, true, Lane::compute);
}

void TrainStage::forward_layer(Recorder& rec, size_t local, LayerActs& a, Tensor y) {
  LayerPass pass;
  pass.local = local;
  pass.layer = m_global[local];
  pass.w = &m_weights[local];
  pass.a = &a;
  pass.y = y;
  // Parts interleave phase by phase: part p's collective runs under part p + 1's compute.
  const int parts = m_policy.parts;
  std::vector<size_t> fences(static_cast<size_t>(parts));
  for (int p = 0; p < parts; ++p)
    fences[static_cast<size_t>(p)] = forward_attention(rec, pass, p);
  for (int p = 0; p < parts; ++p)
    fences[static_cast<size_t>(p)] = forward_mlp(rec, pass, p, fences[static_cast<size_t>(p)]);
  for (int p = 0; p < parts; ++p)
    forward_residual(rec, pass, p, fences[static_cast<size_t>(p)]);
}

namespace {
// The attention of part `p` of `parts` (whole sequences): its sequences, and its rows of the
// log-sum-exp ([batch, heads, seq] fp32).
AttentionShape part_attention(const LayerShape& s, const LayerGeometry& g, int parts) {
  AttentionShape shape;
  shape.batch = s.batch / parts;
  shape.seq = shape.context = shape.capacity = s.seq;
  shape.heads = g.heads;
  shape.kv_heads = g.kv_heads;
  shape.head_dim = g.head_dim;
  return shape;
}
void* part_lse(void* lse, const AttentionShape& shape, int p) {
  return static_cast<char*>(lse) +
         sizeof(float) * static_cast<size_t>(p * shape.batch * shape.heads * shape.seq);
}
} // namespace

// Norm1, QKV (after the all-gather of the norm's rows under sequence parallelism), rotary,
// attention and the projection, whose partial sums are reduced over TP.
size_t TrainStage::forward_attention(Recorder& rec, LayerPass& pass, int p) {
  const ModelSpec& m = m_spec.model;
  const LayerWeights& w = *pass.w;
  LayerActs& a = *pass.a;
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden, layer = pass.layer;
  const double share = 1.0 / m_policy.parts;
  const bool sp = m_geo.sequence_parallel;
  // Under sequence parallelism a norm runs on this rank's rows and its output is gathered for
  // the column-parallel GEMM; the row-parallel GEMM's partial sums are reduce-scattered back
  // onto this rank's rows instead of all-reduced.
  const Tensor ln_rows = sp ? stream_view(bufs().ln_rows) : Tensor{};
  norm(rec, op_norm1, layer, m_policy.part(a.x, p), w.ln1_gamma, w.ln1_beta,
       m_policy.part(sp ? ln_rows : a.ln1, p));
  column_gemm(rec, op_allgather_attn, op_qkv, layer, ln_rows, a.ln1, a.qkv, p,
              [&](const Tensor& in, Tensor out) {
                m_backend.gemm(in, w.wqkv.view(m_geo.qkv_cols(), h, dt), out);
              });
  const Tensor qkv = m_policy.part(a.qkv, p);
  const int64_t q = m_geo.q_cols(), kv = m_geo.kv_cols();
  if (m.rotary) {
    const ScopedOp scope = m_op_index.scope(rec, op_rotary, layer, share);
    m_backend.rotary(qkv.cols_slice(0, q + kv), m_geo.heads + m_geo.kv_heads, m_geo.head_dim,
                     m_spec.shape.seq, 0, static_cast<float>(m.rope_theta));
  }
  {
    const AttentionShape shape = part_attention(m_spec.shape, m_geo, m_policy.parts);
    const ScopedOp scope = m_op_index.scope(rec, op_attention, layer, share);
    m_backend.attention_train(shape, qkv.cols_slice(0, q), qkv.cols_slice(q, kv),
                              qkv.cols_slice(q + kv, kv), m_policy.part(a.attn, p),
                              part_lse(a.lse, shape, p), m_spec.attention);
  }
  const Tensor proj = full_view(bufs().proj);
  return row_gemm(rec, op_proj, op_allreduce_attn, op_reducescatter_attn, layer, proj,
                  sp ? stream_view(bufs().rs_rows) : Tensor{}, p, [&](int64_t f, int64_t n) {
                    m_backend.gemm(a.attn.rows_slice(f, n), w.wo.view(h, q, dt),
                                   proj.rows_slice(f, n));
                  });
}

// y1 = x + the attention branch and its norm, FC1 (after the norm's all-gather under sequence
// parallelism), the activation and FC2, whose partial sums are reduced over TP.
size_t TrainStage::forward_mlp(Recorder& rec, LayerPass& pass, int p, size_t fence) {
  const ModelSpec& m = m_spec.model;
  const LayerWeights& w = *pass.w;
  LayerActs& a = *pass.a;
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden, layer = pass.layer;
  const double share = 1.0 / m_policy.parts;
  const bool sp = m_geo.sequence_parallel;
  const Tensor ln_rows = sp ? stream_view(bufs().ln_rows) : Tensor{};
  const Tensor rs_rows = sp ? stream_view(bufs().rs_rows) : Tensor{};
  wait_tp(rec, fence);
  {
    // y1 = x + the attention branch, and its norm, in one kernel.
    const ScopedOp scope = m_op_index.scope(rec, op_residual1_norm2, layer, share);
    const Tensor beta = m.norm == NormKind::layernorm ? w.ln2_beta.view(1, h, dt) : Tensor{};
    m_backend.add_norm(m_policy.part(a.x, p),
                       m_policy.part(sp ? rs_rows : full_view(bufs().proj), p),
                       m_policy.part(a.y1, p), w.ln2_gamma.view(1, h, dt), beta,
                       m_policy.part(sp ? ln_rows : a.ln2, p), static_cast<float>(m.norm_eps));
  }
  column_gemm(rec, op_allgather_mlp, op_fc1, layer, ln_rows, a.ln2, a.fc1, p,
              [&](const Tensor& in, Tensor out) {
                m_backend.gemm(in, w.w1.view(m_geo.fc1_cols(), h, dt), out);
              });
  {
    const ScopedOp scope = m_op_index.scope(rec, op_act, layer, share);
    if (m_geo.swiglu)
      m_backend.swiglu(m_policy.part(a.fc1, p), m_policy.part(a.act, p));
    else
      m_backend.gelu(m_policy.part(a.fc1, p), m_policy.part(a.act, p));
  }
  const Tensor fc2 = full_view(bufs().fc2);
  return row_gemm(rec, op_fc2, op_allreduce_mlp, op_reducescatter_mlp, layer, fc2, rs_rows, p,
                  [&](int64_t f, int64_t n) {
                    m_backend.gemm(a.act.rows_slice(f, n), w.w2.view(h, m_geo.ffn, dt),
                                   fc2.rows_slice(f, n));
                  });
}

void TrainStage::forward_residual(Recorder& rec, LayerPass& pass, int p, size_t fence) {
  wait_tp(rec, fence);
  const Tensor reduced =
      m_geo.sequence_parallel ? stream_view(bufs().rs_rows) : full_view(bufs().fc2);
  const ScopedOp scope = m_op_index.scope(rec, op_residual2, pass.layer, 1.0 / m_policy.parts);
  m_backend.add(m_policy.part(pass.a->y1, p), m_policy.part(reduced, p), m_policy.part(pass.y, p));
}

// The input-gradient half of one layer's backward; with `saved` null the weight gradients run
// here too, each right after the input gradient it shares its operand with (and beside the
// TP reduction on the comm lane), else the gradients they need stay in `saved`.
void TrainStage::backward_layer_input(Recorder& rec, size_t local, LayerActs& a, LayerActs* saved,
                                      const Tensor& dy, Tensor dx) {
  const DType dt = m_backend.dtype();
  const int64_t t = m_geo.tokens, ts = m_geo.stream_tokens, h = m_geo.hidden;
  // Under sequence parallelism dy, dx and the norms' gradients are this rank's rows; the
  // output gradients are gathered for the row-parallel GEMMs (the forward reduce-scattered
  // their outputs) and the column-parallel GEMMs' input gradients reduce-scattered.
  const bool sp = m_geo.sequence_parallel;
  LayerPass pass;
  pass.local = local;
  pass.layer = m_global[local];
  pass.w = &m_weights[local];
  pass.a = &a;
  pass.now = saved == nullptr;
  pass.grads = pass.now ? &m_scratch->acts : saved;
  pass.dy = dy;
  pass.dx = dx;
  pass.dy_full = !sp        ? dy
                 : pass.now ? full_view(bufs().dy_full)
                            : pass.grads->dyg_buf.view(t, h, dt);
  if (!pass.now) pass.grads->dy = pass.dy_full;
  pass.dy1_full = pass.now ? full_view(bufs().dy1_full) : pass.grads->dy1;
  pass.dy1 = sp ? stream_view(bufs().ln_rows) : pass.dy1_full;
  pass.dact = m_scratch->dact.view(t, m_geo.ffn, dt);
  pass.dattn = m_scratch->dattn.view(t, m_geo.q_cols(), dt);
  pass.dtmp = m_scratch->dtmp.view(ts, h, dt);
  pass.dln_full = full_view(bufs().dln);
  pass.dln = sp ? stream_view(bufs().rs_rows) : pass.dln_full;
  const int parts = m_policy.parts;
  std::vector<size_t> fences(static_cast<size_t>(parts));
  for (int p = 0; p < parts; ++p)
    fences[static_cast<size_t>(p)] = backward_mlp(rec, pass, p);
  for (int p = 0; p < parts; ++p)
    fences[static_cast<size_t>(p)] =
        backward_attention(rec, pass, p, fences[static_cast<size_t>(p)]);
  for (int p = 0; p < parts; ++p)
    backward_residual(rec, pass, p, fences[static_cast<size_t>(p)]);
}

// MLP: dact = dy W2 (after dy's all-gather under sequence parallelism); dfc1 through the
// activation; dln2 = dfc1 W1, reduced over TP.
size_t TrainStage::backward_mlp(Recorder& rec, LayerPass& pass, int p) {
  const LayerWeights& w = *pass.w;
  const LayerActs& a = *pass.a;
  LayerActs& grads = *pass.grads;
  const LayerGrads& g = m_grads[pass.local];
  const DType dt = m_backend.dtype();
  const int64_t h = m_geo.hidden, layer = pass.layer;
  const double share = 1.0 / m_policy.parts;
  column_gemm(rec, op_allgather_mlp_bwd, op_fc2_dgrad, layer, pass.dy, pass.dy_full, pass.dact, p,
              [&](const Tensor& in, Tensor out) {
                m_backend.gemm(in, Trans::no, w.w2.view(h, m_geo.ffn, dt), Trans::no, out, false,
                               Lane::compute);
              });
  if (pass.now)
    weight_gradient(rec, op_fc2_wgrad, layer, share, m_policy.part(pass.dy_full, p),
                    m_policy.part(a.act, p), g.w2);
  {
    const ScopedOp scope = m_op_index.scope(rec, op_act_bwd, layer, share);
    if (m_geo.swiglu)
      m_backend.swiglu_backward(m_policy.part(a.fc1, p), m_policy.part(pass.dact, p),
                                m_policy.part(grads.dfc1, p));
    else
      m_backend.gelu_backward(m_policy.part(a.fc1, p), m_policy.part(pass.dact, p),
                              m_policy.part(grads.dfc1, p));
  }
  const size_t fence = row_gemm(
      rec, op_fc1_dgrad, op_allreduce_mlp_bwd, op_reducescatter_mlp_bwd, layer, pass.dln_full,
      pass.dln, p, [&](int64_t f, int64_t n) {
        m_backend.gemm(grads.dfc1.rows_slice(f, n), Trans::no, w.w1.view(m_geo.fc1_cols(), h, dt),
                       Trans::no, pass.dln_full.rows_slice(f, n), false, Lane::compute);
      });
  if (pass.now)
    weight_gradient(rec, op_fc1_wgrad, layer, share, m_policy.part(grads.dfc1, p),
                    m_policy.part(a.ln2, p), g.w1);
  return fence;
}

// Norm2's backward and the residual into dy1; attention: dattn = dy1 Wo (after dy1's
// all-gather under sequence parallelism), attention's backward into dqkv (recomputing the
// probabilities from the saved log-sum-exp), rotary's inverse, dln1 = dqkv Wqkv reduced over TP.
size_t TrainStage::backward_attention(Recorder& rec, LayerPass& pass, int p, size_t fence) {
  const ModelSpec& m = m_spec.model;
  const LayerWeights& w = *pass.w;
  const LayerActs& a = *pass.a;
  LayerActs& grads = *pass.grads;
  const LayerGrads& g = m_grads[pass.local];
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden, layer = pass.layer;
  const double share = 1.0 / m_policy.parts;
  wait_tp(rec, fence);
  norm_backward(rec, op_norm2_bwd, layer, m_policy.part(a.y1, p), w.ln2_gamma,
                m_policy.part(pass.dln, p), m_policy.part(pass.dtmp, p), g.ln2_gamma, g.ln2_beta);
  {
    const ScopedOp scope = m_op_index.scope(rec, op_residual2_bwd, layer, share);
    m_backend.add(m_policy.part(pass.dy, p), m_policy.part(pass.dtmp, p),
                  m_policy.part(pass.dy1, p));
  }
  const int64_t q = m_geo.q_cols(), kv = m_geo.kv_cols();
  column_gemm(rec, op_allgather_attn_bwd, op_proj_dgrad, layer, pass.dy1, pass.dy1_full, pass.dattn,
              p, [&](const Tensor& in, Tensor out) {
                m_backend.gemm(in, Trans::no, w.wo.view(h, q, dt), Trans::no, out, false,
                               Lane::compute);
              });
  if (pass.now)
    weight_gradient(rec, op_proj_wgrad, layer, share, m_policy.part(pass.dy1_full, p),
                    m_policy.part(a.attn, p), g.wo);
  const Tensor qkv = m_policy.part(a.qkv, p), dqkv = m_policy.part(grads.dqkv, p);
  {
    const AttentionShape shape = part_attention(m_spec.shape, m_geo, m_policy.parts);
    const ScopedOp scope = m_op_index.scope(rec, op_attention_bwd, layer, share);
    m_backend.attention_backward(shape, qkv.cols_slice(0, q), qkv.cols_slice(q, kv),
                                 qkv.cols_slice(q + kv, kv), m_policy.part(a.attn, p),
                                 m_policy.part(pass.dattn, p), part_lse(a.lse, shape, p),
                                 dqkv.cols_slice(0, q), dqkv.cols_slice(q, kv),
                                 dqkv.cols_slice(q + kv, kv), m_spec.attention);
  }
  if (m.rotary) {
    const ScopedOp scope = m_op_index.scope(rec, op_rotary_bwd, layer, share);
    m_backend.rotary_backward(dqkv.cols_slice(0, q + kv), m_geo.heads + m_geo.kv_heads,
                              m_geo.head_dim, m_spec.shape.seq, 0,
                              static_cast<float>(m.rope_theta));
  }
  const size_t out = row_gemm(
      rec, op_qkv_dgrad, op_allreduce_attn_bwd, op_reducescatter_attn_bwd, layer, pass.dln_full,
      pass.dln, p, [&](int64_t f, int64_t n) {
        m_backend.gemm(grads.dqkv.rows_slice(f, n), Trans::no, w.wqkv.view(m_geo.qkv_cols(), h, dt),
                       Trans::no, pass.dln_full.rows_slice(f, n), false, Lane::compute);
      });
  if (pass.now)
    weight_gradient(rec, op_qkv_wgrad, layer, share, dqkv, m_policy.part(a.ln1, p), g.wqkv);
  return out;
}

// Norm1's backward and the residual into dx.
void TrainStage::backward_residual(Recorder& rec, LayerPass& pass, int p, size_t fence) {
  const LayerGrads& g = m_grads[pass.local];
  wait_tp(rec, fence);
  norm_backward(rec, op_norm1_bwd, pass.layer, m_policy.part(pass.a->x, p), pass.w->ln1_gamma,
                m_policy.part(pass.dln, p), m_policy.part(pass.dtmp, p), g.ln1_gamma, g.ln1_beta);
  const ScopedOp scope = m_op_index.scope(rec, op_residual1_bwd, pass.layer, 1.0 / m_policy.parts);
  m_backend.add(m_policy.part(pass.dy1, p), m_policy.part(pass.dtmp, p), m_policy.part(pass.dx, p));
}

void TrainStage::backward_layer_weight(Recorder& rec, size_t local, const LayerActs& a) {
  const LayerGrads& g = m_grads[local];
  const int64_t layer = m_global[local];
  weight_gradient(rec, op_fc2_wgrad, layer, 1.0, a.dy, a.act, g.w2);
  weight_gradient(rec, op_fc1_wgrad, layer, 1.0, a.dfc1, a.ln2, g.w1);
  weight_gradient(rec, op_proj_wgrad, layer, 1.0, a.dy1, a.attn, g.wo);
  weight_gradient(rec, op_qkv_wgrad, layer, 1.0, a.dqkv, a.ln1, g.wqkv);
}

} // namespace ridgeline
