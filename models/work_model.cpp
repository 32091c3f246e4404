// FLOPs and bytes per op. Bytes count each operand read once and each result written once
// (the minimum traffic); FLOPs count 2 per multiply-add.
#include "models/work_model.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace ridgeline {
namespace {
OpSpec make(const char* name, double flops, double bytes, double comm) {
  return registered_op(name, OpCost{flops, bytes, comm});
}

OpSpec gemm_op(const char* name, double m, double n, double k, double e) {
  OpSpec o = registered_op(name, gemm_cost(m, n, k, e));
  o.m = static_cast<int64_t>(m);
  o.n = static_cast<int64_t>(n);
  o.k = static_cast<int64_t>(k);
  return o;
}
} // namespace

OpSpec registered_op(const std::string& name, const OpCost& cost) {
  const OpRow& row = op_row(name);
  OpSpec o;
  o.name = row.name;
  o.kind = row.kind;
  o.lane = row.lane;
  o.pass = row.pass;
  o.collective = row.collective;
  o.cost = cost;
  return o;
}

OpCost gemm_cost(double m, double n, double k, double elem_bytes) {
  return OpCost{2.0 * m * n * k, (m * k + n * k + m * n) * elem_bytes, 0};
}

double attention_flops(const ModelSpec& m, const LayerShape& s) {
  const double hl = static_cast<double>(local_heads(m, s.tp));
  const double d = static_cast<double>(m.head_dim());
  const double b = static_cast<double>(s.batch);
  // Visible keys summed over queries: causal prefill sees 1..seq, decode sees context + i + 1
  // at step i (the mean over the steps).
  const double pairs = s.phase == Phase::prefill
                           ? static_cast<double>(s.seq) * static_cast<double>(s.seq + 1) / 2.0
                           : s.mean_kv_len();
  return 4.0 * b * hl * d * pairs;
}

double layer_weight_bytes(const ModelSpec& m, int tp, DType dtype) {
  const double e = static_cast<double>(dtype_size(dtype));
  const double h = static_cast<double>(m.hidden);
  const double d = static_cast<double>(m.head_dim());
  const double qkv = static_cast<double>(local_heads(m, tp) + 2 * local_kv_heads(m, tp)) * d;
  const double f = static_cast<double>(m.ffn_hidden / tp);
  const double fc1 = m.mlp == MlpKind::swiglu ? 2.0 * f : f;
  const double attn_out = static_cast<double>(local_heads(m, tp)) * d;
  return (qkv * h + attn_out * h + fc1 * h + f * h + 4.0 * h) * e;
}

std::vector<OpSpec> layer_ops(const ModelSpec& m, const LayerShape& s, AttentionImpl attn) {
  const double e = static_cast<double>(dtype_size(s.dtype));
  const double t = static_cast<double>(s.tokens());
  const double h = static_cast<double>(m.hidden);
  const double d = static_cast<double>(m.head_dim());
  const double hl = static_cast<double>(local_heads(m, s.tp));
  const double kvl = static_cast<double>(local_kv_heads(m, s.tp));
  const double f = static_cast<double>(m.ffn_hidden / s.tp);
  const double b = static_cast<double>(s.batch);
  const double kv_len = s.mean_kv_len();
  const double q_cols = hl * d;
  const double qkv_cols = (hl + 2.0 * kvl) * d;
  // Norms and residuals see this rank's rows: all tokens, or tokens / tp under sequence
  // parallelism. Collective message sizes follow nccl-tests: the full [t, h] activation.
  const bool sp = s.sequence_parallel && s.tp > 1;
  const double ts = sp ? t / static_cast<double>(s.tp) : t;
  const double norm_flops = (m.norm == NormKind::layernorm ? 8.0 : 5.0) * ts * h;
  const double norm_bytes = 2.0 * ts * h * e + 2.0 * h * e;
  const bool tp_comm = s.tp > 1 && !sp;
  const double act_bytes = t * h * e;
  auto gather = [&](const char* name) { return make(name, 0, ts * h * e + act_bytes, act_bytes); };
  auto scatter = [&](const char* name) {
    return make(name, t * h, act_bytes + ts * h * e, act_bytes);
  };
  auto all_reduce = [&](const char* name) { return make(name, t * h, 2.0 * t * h * e, t * h * e); };

  std::vector<OpSpec> ops;
  ops.push_back(make(op::norm1, norm_flops, norm_bytes, 0));
  if (sp) ops.push_back(gather(op::allgather_attn));
  ops.push_back(gemm_op(op::qkv, t, qkv_cols, h, e));
  if (m.rotary)
    ops.push_back(make(op::rotary, 6.0 * t * (hl + kvl) * d, 2.0 * t * (hl + kvl) * d * e, 0));
  if (s.phase == Phase::decode) ops.push_back(make(op::kv_append, 0, 4.0 * b * kvl * d * e, 0));
  // Fused attention reads q, k, v once and writes the output once. The naive form also writes
  // and reads back the fp32 score matrix twice (scores, then probabilities).
  double attn_bytes = (2.0 * t * q_cols + 2.0 * b * kv_len * kvl * d) * e;
  if (attn == AttentionImpl::naive) attn_bytes += 4.0 * b * hl * (t / b) * kv_len * 4.0;
  ops.push_back(make(op::attention, attention_flops(m, s), attn_bytes, 0));
  ops.push_back(gemm_op(op::proj, t, h, q_cols, e));
  if (tp_comm) ops.push_back(all_reduce(op::allreduce_attn));
  if (sp) ops.push_back(scatter(op::reducescatter_attn));
  // The residual add fused with the second norm: reads the stream and the branch, writes the
  // new stream and the norm's output (the norm's re-reads of the new row hit L1/L2).
  ops.push_back(make(op::residual1_norm2, ts * h + norm_flops, 4.0 * ts * h * e + 2.0 * h * e, 0));
  if (sp) ops.push_back(gather(op::allgather_mlp));
  const double fc1_cols = m.mlp == MlpKind::swiglu ? 2.0 * f : f;
  ops.push_back(gemm_op(op::fc1, t, fc1_cols, h, e));
  ops.push_back(
      make(op::act, (m.mlp == MlpKind::swiglu ? 6.0 : 10.0) * t * f, (fc1_cols + f) * t * e, 0));
  ops.push_back(gemm_op(op::fc2, t, h, f, e));
  if (tp_comm) ops.push_back(all_reduce(op::allreduce_mlp));
  if (sp) ops.push_back(scatter(op::reducescatter_mlp));
  ops.push_back(make(op::residual2, ts * h, 3.0 * ts * h * e, 0));
  return ops;
}

const OpSpec& find_op(const std::vector<OpSpec>& ops, const std::string& name) {
  for (const OpSpec& o : ops)
    if (o.name == name) return o;
  throw Error("work model has no op '" + name + "'");
}

} // namespace ridgeline

namespace ridgeline {

double stage_memory_bytes(const ModelSpec& m, const LayerShape& s, int64_t layers) {
  const double e = static_cast<double>(dtype_size(s.dtype));
  const double t = static_cast<double>(s.tokens());
  const double h = static_cast<double>(m.hidden);
  const double d = static_cast<double>(m.head_dim());
  const double hl = static_cast<double>(local_heads(m, s.tp));
  const double kvl = static_cast<double>(local_kv_heads(m, s.tp));
  const double f = static_cast<double>(m.ffn_hidden / s.tp);
  const double fc1 = m.mlp == MlpKind::swiglu ? 2.0 * f : f;
  // Residual stream (3), norm output, QKV, attention, projection, FC1, activation, FC2 rows;
  // sequence parallelism adds the gathered norm output and two shard-sized scatter outputs.
  const double activations = t * (6.0 * h + (hl + 2.0 * kvl) * d + hl * d + fc1 + f) * e +
                             (s.sequence_parallel ? t * h * e * 1.5 : 0.0);
  double cache = 0;
  if (s.phase == Phase::decode)
    cache = 2.0 * static_cast<double>(s.batch) * static_cast<double>(s.cache_rows()) * kvl * d * e;
  return static_cast<double>(layers) * (layer_weight_bytes(m, s.tp, s.dtype) + cache) + activations;
}

} // namespace ridgeline

namespace ridgeline {

MoeWork moe_work(const ModelSpec& m, const MoeLoad& load, DType dtype) {
  RIDGELINE_REQUIRE(m.moe() && static_cast<int64_t>(load.expert_rows.size()) == m.experts &&
                        static_cast<int>(load.rank_rows.size()) == load.ep,
                    "moe_work: the load is not of the model's experts");
  const double e = dtype_size(dtype);
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.expert_ffn_hidden);
  const double fs = static_cast<double>(m.shared_experts) * f;
  int64_t assignments = 0;
  for (int64_t rows : load.expert_rows)
    assignments += rows;
  const double tokens = static_cast<double>(assignments) / static_cast<double>(m.top_k) /
                        static_cast<double>(load.ep);
  MoeWork w;
  w.router = gemm_cost(tokens, static_cast<double>(m.experts), h, e);
  if (fs > 0) w.shared = gemm_cost(tokens, 2 * fs, h, e) + gemm_cost(tokens, h, fs, e);
  const auto busiest = std::max_element(load.rank_rows.begin(), load.rank_rows.end());
  w.busiest_rank = static_cast<int>(busiest - load.rank_rows.begin());
  const int64_t per_rank = m.experts / load.ep;
  for (int64_t x = w.busiest_rank * per_rank; x < (w.busiest_rank + 1) * per_rank; ++x) {
    const double rows = static_cast<double>(load.expert_rows[x]);
    if (rows > 0) w.experts = w.experts + (gemm_cost(rows, 2 * f, h, e) + gemm_cost(rows, h, f, e));
  }
  int64_t most = 0, off_rank = 0;
  for (int r = 0; r < load.ep; ++r) {
    most = std::max({most, load.sent_rows[r], load.received_rows[r]});
    off_rank += load.sent_rows[r];
  }
  w.dispatch.comm_bytes = static_cast<double>(most) * h * e;
  w.combine.comm_bytes = w.dispatch.comm_bytes;
  w.dispatch_mean_bytes = static_cast<double>(off_rank) / static_cast<double>(load.ep) * h * e;
  w.rank_imbalance = load.rank_imbalance();
  w.expert_imbalance = load.expert_imbalance();
  return w;
}

} // namespace ridgeline

namespace ridgeline {

OpSpec moe_allgather_op(const ModelSpec& m, const LayerShape& s) {
  const double e = static_cast<double>(dtype_size(s.dtype));
  const double t = static_cast<double>(s.tokens()), h = static_cast<double>(m.hidden);
  const double out = t * h * e;
  // As the sequence-parallel all-gathers: this rank's rows read, every row written.
  return registered_op(op::moe_allgather, OpCost{0, out / static_cast<double>(s.tp) + out, out});
}

std::vector<OpSpec> moe_layer_ops(const ModelSpec& m, const LayerShape& s, AttentionImpl attn,
                                  const MoeLoad& load) {
  const MoeWork w = moe_work(m, load, s.dtype);
  std::vector<OpSpec> ops = layer_ops(m, s, attn);
  // The dense MLP (its GEMMs, and at tp > 1 its collectives) sits between the second norm and
  // the residual add kept last.
  const OpSpec residual2 = ops.back();
  ops.erase(std::find_if(
                ops.begin(), ops.end(),
                [](const OpSpec& o) { return o.name == op::fc1 || o.name == op::allgather_mlp; }),
            ops.end());
  auto gemm = [](const char* name, const OpCost& c, int64_t rows, int64_t cols, int64_t inner) {
    OpSpec o = registered_op(name, c);
    o.m = rows, o.n = cols, o.k = inner;
    return o;
  };
  auto all_to_all = [&](const char* name, const OpCost& c) {
    OpSpec o = registered_op(name, c);
    o.group_size = load.ep;
    o.group = CommGroup::ep;
    return o;
  };
  const int64_t f = m.expert_ffn_hidden;
  // A rank's MoE rows: its block of its TP group's tokens.
  const int64_t tokens = s.tokens() / s.tp;
  ops.push_back(gemm(op::moe_router, w.router, tokens, m.experts, m.hidden));
  // On one rank every expert is local: no all-to-all runs (as no all-reduce at tp 1).
  if (load.ep > 1) ops.push_back(all_to_all(op::moe_dispatch, w.dispatch));
  // The grouped GEMMs' shape for the roofs: the busiest rank's mean rows per expert it holds.
  const int64_t rows = load.rank_rows[static_cast<size_t>(w.busiest_rank)] / (m.experts / load.ep);
  ops.push_back(gemm(op::moe_experts, w.experts, rows, 2 * f, m.hidden));
  if (load.ep > 1) ops.push_back(all_to_all(op::moe_combine, w.combine));
  if (m.shared_experts > 0)
    ops.push_back(gemm(op::moe_shared, w.shared, tokens, 2 * m.shared_experts * f, m.hidden));
  // Without sequence parallelism every rank of the TP group needs every token's output.
  if (s.tp > 1 && !s.sequence_parallel) ops.push_back(moe_allgather_op(m, s));
  ops.push_back(residual2);
  return ops;
}

} // namespace ridgeline
