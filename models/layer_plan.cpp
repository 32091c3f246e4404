// Layer geometry and the backward plan (see layer_plan.hpp).
#include "models/layer_plan.hpp"

#include <algorithm>
#include <utility>

namespace ridgeline {

LayerGeometry layer_geometry(const ModelSpec& m, const LayerShape& s, int tp_rank) {
  LayerGeometry g;
  g.hidden = m.hidden;
  g.head_dim = m.head_dim();
  g.heads = local_heads(m, s.tp);
  g.kv_heads = local_kv_heads(m, s.tp);
  g.kv_head0 = first_kv_head(m, s.tp, tp_rank);
  g.ffn = m.ffn_hidden / s.tp;
  g.tokens = s.tokens();
  g.sequence_parallel = s.sequence_parallel && s.tp > 1;
  g.stream_tokens = g.sequence_parallel ? g.tokens / s.tp : g.tokens;
  g.swiglu = m.mlp == MlpKind::swiglu;
  g.kv_replicated = m.kv_heads < s.tp;
  return g;
}

std::vector<OpSpec> backward_layer_ops(const ModelSpec& m, const LayerShape& s,
                                       AttentionImpl attn) {
  // The forward's ops give each backward op its shape; their costs follow from them.
  const std::vector<OpSpec> fwd = layer_ops(m, s, attn);
  const double e = static_cast<double>(dtype_size(s.dtype));
  // A backward op in the registry's row, with the shape and cost of its forward op, scaled.
  auto like = [&](const char* name, const char* forward, double flops_scale, double bytes_scale) {
    const OpSpec& f = find_op(fwd, forward);
    OpSpec o = registered_op(name, f.cost);
    o.m = f.m, o.n = f.n, o.k = f.k;
    o.cost.flops *= flops_scale;
    o.cost.hbm_bytes *= bytes_scale;
    return o;
  };
  // A GEMM's input gradient: dX[m, k] = dY[m, n] W[n, k]; its weight gradient:
  // dW[n, k] += dY^T X, which reads dW too. Same FLOPs as the forward.
  auto dgrad = [&](const char* name, const char* forward) {
    OpSpec o = like(name, forward, 1.0, 1.0);
    std::swap(o.n, o.k);
    return o;
  };
  auto wgrad = [&](const char* name, const char* forward) {
    OpSpec o = like(name, forward, 1.0, 1.0);
    const double n = static_cast<double>(o.n), k = static_cast<double>(o.k),
                 t = static_cast<double>(o.m);
    o.m = static_cast<int64_t>(n);
    o.n = static_cast<int64_t>(k);
    o.k = static_cast<int64_t>(t);
    o.cost.hbm_bytes = (t * n + t * k + 2.0 * n * k) * e;
    return o;
  };
  const double t = static_cast<double>(s.tokens());
  const double h = static_cast<double>(m.hidden);

  const bool sp = s.sequence_parallel && s.tp > 1;
  std::vector<OpSpec> ops;
  // Under sequence parallelism each collective of the backward moves what its mirror in the
  // forward moved: the output gradient's all-gather what the forward's reduce-scatter did.
  if (sp) ops.push_back(like(op::allgather_mlp_bwd, op::allgather_mlp, 1.0, 1.0));
  ops.push_back(dgrad(op::fc2_dgrad, op::fc2));
  ops.push_back(wgrad(op::fc2_wgrad, op::fc2));
  // Reads the forward's input and the gradient, writes the input gradient.
  OpSpec act = like(op::act_bwd, op::act, 2.0, 1.0);
  act.cost.hbm_bytes +=
      static_cast<double>(m.ffn_hidden / s.tp) * t * e + find_op(fwd, op::fc1).n * t * e;
  ops.push_back(act);
  ops.push_back(dgrad(op::fc1_dgrad, op::fc1));
  // The all-reduce of the column-parallel GEMM's input gradient moves what the forward's
  // all-reduce after the row-parallel one moved.
  if (sp)
    ops.push_back(like(op::reducescatter_mlp_bwd, op::reducescatter_mlp, 1.0, 1.0));
  else if (s.tp > 1)
    ops.push_back(like(op::allreduce_mlp_bwd, op::allreduce_mlp, 1.0, 1.0));
  ops.push_back(wgrad(op::fc1_wgrad, op::fc1));
  // Norm backward reads x and dy, writes dx; about twice the forward's FLOPs. The second norm
  // runs fused with the residual add in the forward; the first norm has its shape and cost.
  ops.push_back(like(op::norm2_bwd, op::norm1, 2.0, 1.5));
  ops.push_back(like(op::residual2_bwd, op::residual2, 1.0, 1.0));
  if (sp) ops.push_back(like(op::allgather_attn_bwd, op::allgather_attn, 1.0, 1.0));
  ops.push_back(dgrad(op::proj_dgrad, op::proj));
  ops.push_back(wgrad(op::proj_wgrad, op::proj));
  // Attention backward: five products (S, dP, dV, dQ, dK) for the forward's two; reads q, k, v,
  // out, dout, writes dq, dk, dv (fused); naive also writes and reads its score matrices.
  OpSpec ab = like(op::attention_bwd, op::attention, 2.5, 2.0);
  ab.cost.hbm_bytes += t * h * e / std::max(1, s.tp);
  ops.push_back(ab);
  if (m.rotary) ops.push_back(like(op::rotary_bwd, op::rotary, 1.0, 1.0));
  ops.push_back(dgrad(op::qkv_dgrad, op::qkv));
  if (sp)
    ops.push_back(like(op::reducescatter_attn_bwd, op::reducescatter_attn, 1.0, 1.0));
  else if (s.tp > 1)
    ops.push_back(like(op::allreduce_attn_bwd, op::allreduce_attn, 1.0, 1.0));
  ops.push_back(wgrad(op::qkv_wgrad, op::qkv));
  ops.push_back(like(op::norm1_bwd, op::norm1, 2.0, 1.5));
  // The first residual's add (fused into residual1_norm2 forward) costs what the second's does.
  ops.push_back(like(op::residual1_bwd, op::residual2, 1.0, 1.0));
  return ops;
}

std::vector<OpSpec> train_layer_plan(const ModelSpec& m, const LayerShape& s, AttentionImpl attn) {
  std::vector<OpSpec> plan = layer_ops(m, s, attn);
  for (OpSpec& o : backward_layer_ops(m, s, attn))
    plan.push_back(std::move(o));
  return plan;
}

} // namespace ridgeline
