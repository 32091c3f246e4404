// Tensor-parallel transformer stage: weight sharding by global index, the overlap strategies,
// and the forward schedule.
#include "parallel/tp_layer.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/stamped_loop.hpp"
#include "parallel/layer_op_index.hpp"
#include "parallel/tp_layer_windows.hpp"

namespace ridgeline {

using namespace tp_ring;
using namespace layer_op;

std::vector<size_t> TpStage::exchange_windows(const StageSpec& spec, DType dtype) {
  const LayerGeometry g = layer_geometry(spec.model, spec.shape, spec.tp_rank);
  const size_t bytes = static_cast<size_t>(g.tokens * spec.model.hidden) * dtype_size(dtype);
  return std::vector<size_t>(w_count, bytes);
}

std::vector<size_t> TpStage::collective_buffers(const StageSpec& spec, DType dtype) {
  if (spec.shape.tp == 1) return {};
  const LayerGeometry g = layer_geometry(spec.model, spec.shape, spec.tp_rank);
  const size_t row = static_cast<size_t>(spec.model.hidden) * dtype_size(dtype);
  const size_t stream = static_cast<size_t>(g.stream_tokens) * row;
  const size_t full = static_cast<size_t>(g.tokens) * row;
  // ln, proj_full, fc2_full; under sequence parallelism also ln_full, proj_shard, fc2_shard.
  if (!g.sequence_parallel) return {stream, full, full};
  return {stream, full, full, full, stream, stream};
}

double TpStage::overlap_memory_bytes(const StageSpec& spec, DType dtype, bool exchange) {
  double bytes = 0;
  const std::vector<size_t> buffers = collective_buffers(spec, dtype);
  if (exchange && spec.shape.tp > 1) {
    for (size_t w : exchange_windows(spec, dtype))
      bytes += static_cast<double>(w);
    // The windows hold proj_full, fc2_full and (under sequence parallelism) ln_full: the
    // full-sized buffers after the first.
    for (size_t i = 1; i < buffers.size() && i < 4; ++i)
      bytes -= static_cast<double>(buffers[i]);
  }
  if (spec.symmetric_buffers)
    for (size_t b : buffers)
      bytes += static_cast<double>(symmetric_aligned(b));
  return bytes;
}

TpStage::TpStage(Backend& backend, Communicator* tp_comm, const StageSpec& spec, OpTable& ops,
                 PeerExchange* exchange)
    : StageCore(backend, tp_comm, exchange, spec.shape.tp, spec.overlap), m_spec(spec),
      m_op_table(&ops) {
  const ModelSpec& m = spec.model;
  const LayerShape& s = spec.shape;
  RIDGELINE_REQUIRE(spec.mlp == nullptr || s.tp == 1 || s.tokens() % s.tp == 0,
                    "a stage's own MLP at tp > 1 takes a block of tokens / tp rows a rank");
  require_mlp_overlap(m_policy);
  const std::vector<std::string> problems = stage_split_problems(s, spec.overlap);
  if (!problems.empty()) throw UsageError(problems.front());
  if (exchange) require_exchange_windows(exchange_windows(spec, backend.dtype()), spec.tp_rank);
  m_sp = s.sequence_parallel && s.tp > 1;
  if (spec.mixed()) {
    RIDGELINE_REQUIRE(s.phase == Phase::prefill && s.batch == 1 && s.seq == spec.mix.tokens(),
                      "a mixed step runs as a prefill of one sequence of its tokens");
    const std::string problem = mixed_overlap_problem(spec.overlap, s.sequence_parallel);
    if (!problem.empty()) throw UsageError(problem);
  }
  m_ops = stage_ops(spec, spec.attention);
  bind_ops();
  m_geo = layer_geometry(m, s, spec.tp_rank);
  m_capacity = spec.mix;
  require_exchange(spec.overlap);

  const int64_t h = m.hidden;
  m_in_buf = alloc(m_geo.stream_tokens, h);
  m_out_buf = alloc(m_geo.stream_tokens, h);
  m_tmp_buf = alloc(m_geo.stream_tokens, h);
  m_ln_buf = alloc(m_geo.stream_tokens, h);
  m_plain.ln = m_ln_buf.data();
  m_qkv_buf = alloc(m_geo.tokens, m_geo.qkv_cols());
  m_attn_buf = alloc(m_geo.tokens, m_geo.q_cols());
  m_fc1_buf = alloc(m_geo.tokens, m_geo.fc1_cols());
  m_act_buf = alloc(m_geo.tokens, m_geo.ffn);
  if (exchange) {
    m_plain.ln_full = exchange->window(w_gather);
    m_plain.proj_full = exchange->window(w_proj_out);
    m_plain.fc2_full = exchange->window(w_fc2_out);
  } else {
    m_proj_buf = alloc(m_geo.tokens, h);
    m_fc2_buf = alloc(m_geo.tokens, h);
    m_plain.proj_full = m_proj_buf.data();
    m_plain.fc2_full = m_fc2_buf.data();
    if (m_sp) {
      m_ln_full_buf = alloc(m_geo.tokens, h);
      m_plain.ln_full = m_ln_full_buf.data();
    }
  }
  if (spec.mlp != nullptr && s.tp > 1 && !m_sp) m_mlp_block_buf = alloc(m_geo.tokens / s.tp, h);
  if (m_sp) {
    m_proj_shard_buf = alloc(m_geo.stream_tokens, h);
    m_fc2_shard_buf = alloc(m_geo.stream_tokens, h);
    m_plain.proj_shard = m_proj_shard_buf.data();
    m_plain.fc2_shard = m_fc2_shard_buf.data();
  }
  m_symm = m_plain;
  // In collective_buffers()' order.
  if (spec.symmetric_buffers)
    m_allocated +=
        m_lanes.place_symmetric(collective_buffers(m_spec, backend.dtype()),
                                {&m_symm.ln, &m_symm.proj_full, &m_symm.fc2_full, &m_symm.ln_full,
                                 &m_symm.proj_shard, &m_symm.fc2_shard});
  const DType dt = backend.dtype();
  m_input = m_in_buf.view(m_geo.stream_tokens, h, dt);
  m_output = m_out_buf.view(m_geo.stream_tokens, h, dt);

  m_layers.resize(static_cast<size_t>(spec.num_layers));
  for (int64_t l = 0; l < spec.num_layers; ++l)
    init_layer(spec.first_layer + l, m_layers[static_cast<size_t>(l)]);
}

void TpStage::bind_ops() {
  m_op_index.bind(m_ops, *m_op_table);
}

void TpStage::set_mix(const StepMix& mix) {
  if (!m_spec.mixed()) throw UsageError("set_mix: the stage was not built for a mixed step");
  StepMix counted;
  for (const StepEntry& e : mix.entries) {
    const bool decode = e.kind == EntryKind::decode;
    if (e.tokens < 1 || e.context < 0 || (decode && e.tokens != 1))
      throw UsageError("set_mix: an entry of " + std::to_string(e.tokens) + " tokens after " +
                       std::to_string(e.context) + " cached ones");
    (decode ? counted.decode_tokens : counted.prefill_tokens) += e.tokens;
    ++(decode ? counted.decode_sequences : counted.prefill_sequences);
  }
  if (mix.entries.empty() || counted.decode_tokens != mix.decode_tokens ||
      counted.prefill_tokens != mix.prefill_tokens ||
      counted.decode_sequences != mix.decode_sequences ||
      counted.prefill_sequences != mix.prefill_sequences)
    throw UsageError("set_mix: a mix needs entries, and its token and sequence counts must be "
                     "those of its entries");
  auto beyond = [](const char* what, int64_t got, int64_t most) {
    return "set_mix: the mix's " + std::string(what) + " (" + std::to_string(got) +
           ") exceed the stage's capacity (" + std::to_string(most) + ")";
  };
  if (mix.tokens() > m_capacity.tokens())
    throw UsageError(beyond("tokens", mix.tokens(), m_capacity.tokens()));
  const auto entries = static_cast<int64_t>(mix.entries.size());
  if (entries > static_cast<int64_t>(m_capacity.entries.size()))
    throw UsageError(beyond("sequences", entries, static_cast<int64_t>(m_capacity.entries.size())));
  if (mix_cache_rows(mix) > mix_cache_rows(m_capacity))
    throw UsageError(
        beyond("KV cache rows per sequence", mix_cache_rows(mix), mix_cache_rows(m_capacity)));
  StageSpec next = m_spec;
  next.mix = mix;
  next.shape.seq = mix.tokens();
  const std::vector<std::string> problems = stage_split_problems(next.shape, next.overlap);
  if (!problems.empty()) throw UsageError("set_mix: " + problems.front());

  m_ops = stage_ops(next, next.attention);
  m_spec = std::move(next);
  bind_ops();
  m_geo = layer_geometry(m_spec.model, m_spec.shape, m_spec.tp_rank);
  const int64_t h = m_spec.model.hidden;
  m_input = m_in_buf.view(m_geo.stream_tokens, h, m_backend.dtype());
  m_output = m_out_buf.view(m_geo.stream_tokens, h, m_backend.dtype());
}

void TpStage::set_decode_step(int64_t step) {
  RIDGELINE_REQUIRE(m_spec.shape.phase == Phase::decode && step >= 0 &&
                        step < std::max<int64_t>(m_spec.shape.decode_steps, 1),
                    "decode step out of range");
  m_decode_step = step;
}

void TpStage::require_mlp_overlap(const OverlapPolicy& policy) const {
  if (m_spec.mlp != nullptr &&
      (policy.parts > 1 || policy.chunks > 1 || policy.ring || policy.symmetric))
    throw UsageError("a stage with its own MLP (an MoE layer's) runs --overlap none or async");
}

void TpStage::set_overlap(const Overlap& overlap) {
  const std::vector<std::string> problems = stage_split_problems(m_spec.shape, overlap);
  if (!problems.empty()) throw UsageError(problems.front());
  require_mlp_overlap(overlap_policy(overlap));
  if (m_spec.mixed())
    if (const std::string problem = mixed_overlap_problem(overlap, m_spec.shape.sequence_parallel);
        !problem.empty())
      throw UsageError(problem);
  use_overlap(overlap);
  m_spec.overlap = overlap;
}

void TpStage::set_attention(AttentionImpl impl) {
  m_spec.attention = impl;
  // In place: the slots point into m_ops.
  for (const OpSpec& o : stage_ops(m_spec, impl))
    for (OpSpec& mine : m_ops)
      if (mine.name == o.name) mine.cost = o.cost;
}

void TpStage::init_layer(int64_t layer, LayerWeights& w) {
  const ModelSpec& m = m_spec.model;
  static_cast<ridgeline::LayerWeights&>(w) =
      make_layer_weights(m_backend, m, m_geo, layer, m_spec.tp_rank, m_spec.seed, m_allocated);

  if (m_spec.shape.phase == Phase::decode || m_spec.mixed()) {
    // The cache as a previous prefill would have left it: context tokens per sequence, plus
    // the slots the decode steps (or a mixed step's tokens) append to. One buffer holds a row's
    // keys then its values, in the order the QKV projection writes them, so that one copy
    // appends both.
    const LayerShape& s = m_spec.shape;
    const int64_t rows = m_spec.mixed() ? static_cast<int64_t>(m_capacity.entries.size()) *
                                              mix_cache_rows(m_capacity)
                                        : s.batch * s.cache_rows();
    w.kv_cache = alloc(rows, 2 * m_geo.kv_cols());
    w.kv_rows = rows;
    fill_cache(layer, w);
  }
}

// Shards are columns of the global [rows, kv_heads * d] keys and values.
void TpStage::fill_cache(int64_t layer, LayerWeights& w) {
  const int64_t kv_cols = m_spec.model.kv_heads * m_geo.head_dim;
  const Tensor cache = w.kv_cache.view(w.kv_rows, 2 * m_geo.kv_cols(), m_backend.dtype());
  auto key = [&](int64_t role) {
    return GenKey{m_spec.seed, tensor_id(layer, role), kv_cols, 1.0f};
  };
  m_backend.fill_random(cache.cols_slice(0, m_geo.kv_cols()), key(role_k_cache), 0,
                        m_geo.kv_head0 * m_geo.head_dim);
  m_backend.fill_random(cache.cols_slice(m_geo.kv_cols(), m_geo.kv_cols()), key(role_v_cache), 0,
                        m_geo.kv_head0 * m_geo.head_dim);
}

void TpStage::reset_cache() {
  if (m_spec.shape.phase != Phase::decode && !m_spec.mixed())
    throw UsageError("reset_cache: the stage has no KV cache (prefill)");
  for (int64_t l = 0; l < m_spec.num_layers; ++l)
    fill_cache(m_spec.first_layer + l, m_layers[static_cast<size_t>(l)]);
}

// Under sequence parallelism rank r holds, for every unit u, the rows
// [u * Tu + r * Tu / tp, + Tu / tp) of the unit: an all-gather of one unit's pieces then lands
// the unit's rows contiguous and in token order, and a reduce-scatter of a unit's rows hands
// each rank its piece. Without it, ranks hold every row.
void TpStage::fill_input(int64_t microbatch) {
  const GenKey key{m_spec.seed, tensor_id(-1, role_input), m_spec.model.hidden, 1.0f};
  const int64_t base = microbatch * m_geo.tokens;
  if (!m_sp) {
    m_backend.fill_random(m_input, key, base, 0);
    return;
  }
  const int64_t unit = m_geo.tokens / m_policy.units(), piece = unit / m_spec.shape.tp;
  for (int u = 0; u < m_policy.units(); ++u)
    m_backend.fill_random(m_policy.unit(m_input, u), key, base + u * unit + m_spec.tp_rank * piece,
                          0);
}

std::vector<float> TpStage::gather_output() {
  if (!m_sp) return m_backend.to_host(m_output);
  Buffer full_buf = m_backend.allocate(m_geo.tokens, m_spec.model.hidden);
  const Tensor full = full_buf.view(m_geo.tokens, m_spec.model.hidden, m_backend.dtype());
  const Stream stream = m_backend.stream(Lane::compute);
  for (int u = 0; u < m_policy.units(); ++u) {
    const Tensor piece = m_policy.unit(m_output, u);
    m_comm->all_gather(piece.data, m_policy.unit(full, u).data,
                       static_cast<size_t>(piece.elements()), piece.dtype, stream);
  }
  m_comm->complete(stream);
  return m_backend.to_host(full);
}

bool TpStage::fused(GemmEpilogue::Kind kind) const {
  return m_spec.shape.phase == Phase::decode && computing() && !m_sp && !ring() && !split() &&
         m_policy.parts == 1 && m_policy.chunks == 1 &&
         (kind != GemmEpilogue::Kind::residual ||
          (m_spec.shape.tp == 1 && m_spec.mlp == nullptr)) &&
         m_backend.fuses_epilogue(m_geo.tokens, kind);
}

template <class Issue>
void TpStage::collective(Recorder& rec, int slot, int64_t layer, double share, Issue&& issue) {
  if (!communicating()) return;
  const OpSpec& o = m_op_index.spec(slot);
  m_lanes.collective(rec, m_op_index.id(slot), layer, scaled(o.cost, share), o.name,
                     std::forward<Issue>(issue));
}

void TpStage::wait_comm(Recorder& rec, size_t fence) {
  // ce-ring leaves nothing in flight past its GEMMs.
  if (!communicating() || ring()) return;
  m_lanes.join(rec, fence);
}

void TpStage::gemm(const Tensor& a, const Tensor& w, Tensor c, bool beside_comm) {
  m_backend.set_gemm_sm_limit(beside_comm && communicating() ? m_spec.overlap_gemm_sms : 0);
  m_backend.gemm(a, w, c);
}

void TpStage::norm(Recorder& rec, int slot, int64_t layer, const Tensor& in, const Buffer& gamma,
                   const Buffer& beta, Tensor out) {
  if (!computing()) return;
  const ScopedOp op = m_op_index.scope(rec, slot, layer, 1.0 / m_policy.parts);
  model_norm(m_backend, m_spec.model, in, gamma, beta, out);
}

void TpStage::gather_unit(Recorder& rec, int slot, int64_t layer, const Tensor& shard, Tensor full,
                          int unit) {
  const Tensor piece = m_policy.unit(shard, unit);
  void* dst = m_policy.unit(full, unit).data;
  collective(rec, slot, layer, 1.0 / m_policy.units(), [&](Stream st) {
    m_comm->all_gather(piece.data, dst, static_cast<size_t>(piece.elements()), piece.dtype, st);
  });
}

void TpStage::column_gemm(Recorder& rec, int gemm_slot, int gather_slot, int64_t layer,
                          const Tensor& w, Tensor out, int part) {
  const Tensor ln = stream_view(bufs().ln);
  if (!m_sp) {
    if (!computing()) return;
    const ScopedOp op = m_op_index.scope(rec, gemm_slot, layer, 1.0 / m_policy.parts);
    gemm(m_policy.part(ln, part), w, m_policy.part(out, part), split());
    return;
  }
  if (ring()) {
    ring_column_gemm(rec, gemm_slot, gather_slot, layer, w, out);
    return;
  }
  // Each unit's GEMM waits for that unit's gather only (the next one's is issued after the
  // fence) and computes while the next unit's gather runs.
  const Tensor full = full_view(bufs().ln_full);
  column_site(
      m_policy, part, [&](int u) { gather_unit(rec, gather_slot, layer, ln, full, u); },
      [&] { wait_comm(rec, m_backend.fence(Lane::comm)); },
      [&](int u, bool beside_comm) {
        if (!computing()) return;
        const ScopedOp op = m_op_index.scope(rec, gemm_slot, layer, 1.0 / m_policy.units());
        gemm(m_policy.unit(full, u), w, m_policy.unit(out, u), beside_comm);
      });
}

size_t TpStage::row_gemm(Recorder& rec, int gemm_slot, int reduce_slot, int64_t layer,
                         const Tensor& in, const Tensor& w, Tensor out_full, Tensor out_shard,
                         int part) {
  row_site(
      m_policy, part,
      [&](int u, bool beside_comm) {
        if (!computing()) return;
        const ScopedOp op = m_op_index.scope(rec, gemm_slot, layer, 1.0 / m_policy.units());
        gemm(m_policy.unit(in, u), w, m_policy.unit(out_full, u), beside_comm);
      },
      [&](int u) {
        const Tensor rows = m_policy.unit(out_full, u);
        collective(rec, reduce_slot, layer, 1.0 / m_policy.units(), [&](Stream st) {
          if (m_sp)
            m_comm->reduce_scatter(rows.data, m_policy.unit(out_shard, u).data,
                                   static_cast<size_t>(rows.elements() / m_spec.shape.tp),
                                   rows.dtype, ReduceOp::sum, st);
          else
            m_comm->all_reduce(rows.data, rows.data, static_cast<size_t>(rows.elements()),
                               rows.dtype, ReduceOp::sum, st);
        });
      });
  return m_lanes.fence();
}

size_t TpStage::attention_phase(Recorder& rec, int64_t layer, const LayerWeights& w,
                                const Tensor& x, int part) {
  const ModelSpec& m = m_spec.model;
  const LayerShape& s = m_spec.shape;
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden;
  const int parts = m_policy.parts;
  const double share = 1.0 / parts;
  const Tensor ln = stream_view(bufs().ln);
  const Tensor qkv = m_qkv_buf.view(m_geo.tokens, m_geo.qkv_cols(), dt);
  const Tensor attn = m_attn_buf.view(m_geo.tokens, m_geo.q_cols(), dt);

  const bool decode = s.phase == Phase::decode;
  const bool fold_rotary = fused(GemmEpilogue::Kind::rotary_append);
  // The RMS norm folds in front of that kernel too (where the backend takes it).
  const bool fold_norm =
      fold_rotary && m.norm == NormKind::rmsnorm && m_backend.fuses_rms_norm(m_geo.tokens);
  if (!fold_norm)
    norm(rec, op_norm1, layer, m_policy.part(x, part), w.ln1_gamma, w.ln1_beta,
         m_policy.part(ln, part));
  // Decode: step i appends at position context + i of each sequence's slots in the cache.
  const int64_t cap = decode ? s.cache_rows() : 0;
  const int64_t pos = s.context + m_decode_step;
  if (fold_rotary) {
    // One kernel: (the norm,) QKV, rotary on the query and key heads, and the step's keys and
    // values into the cache.
    const ScopedOp op =
        fold_norm ? m_op_index.fused_scope(rec, op_qkv, {op_norm1, op_rotary, op_kv_append}, layer)
                  : m_op_index.fused_scope(rec, op_qkv, {op_rotary, op_kv_append}, layer);
    GemmEpilogue e;
    e.kind = GemmEpilogue::Kind::rotary_append;
    e.head_dim = m_geo.head_dim;
    e.rotated_heads = m.rotary ? m_geo.heads + m_geo.kv_heads : 0;
    e.pos = pos;
    e.theta = static_cast<float>(m.rope_theta);
    e.cache = w.kv_cache.view(s.batch * cap, 2 * m_geo.kv_cols(), dt);
    e.cache_seq_rows = cap;
    e.cache_col0 = m_geo.q_cols();
    if (fold_norm) {
      e.norm_gamma = w.ln1_gamma.view(1, h, dt);
      e.norm_out = ln;
      e.norm_eps = static_cast<float>(m.norm_eps);
    }
    m_backend.set_gemm_sm_limit(0);
    m_backend.gemm_epilogue(fold_norm ? x : ln, w.wqkv.view(qkv.cols, h, dt), qkv, e);
  } else {
    column_gemm(rec, op_qkv, op_allgather_attn, layer, w.wqkv.view(qkv.cols, h, dt), qkv, part);
  }

  // A single prefill sequence split into parts: part p holds the queries of tokens
  // [p * n, (p + 1) * n) and attends causally to every earlier token's keys.
  const bool by_tokens = splits_tokens(s, m_spec.overlap);
  const int64_t n = s.seq / parts;
  const int64_t nb = by_tokens ? 1 : s.batch / parts, b0 = by_tokens ? 0 : part * nb;
  const Tensor pq = m_policy.part(qkv, part);
  if (computing() && m_spec.mixed()) {
    mixed_attention(rec, layer, w, qkv, attn);
  } else if (computing()) {
    if (m.rotary && !fold_rotary) {
      const ScopedOp op = m_op_index.scope(rec, op_rotary, layer, share);
      const int64_t seq_len = decode ? 1 : (by_tokens ? n : s.seq);
      const int64_t pos0 = decode ? s.context + m_decode_step : (by_tokens ? part * n : 0);
      m_backend.rotary(pq.cols_slice(0, m_geo.q_cols() + m_geo.kv_cols()),
                       m_geo.heads + m_geo.kv_heads, m_geo.head_dim, seq_len, pos0,
                       static_cast<float>(m.rope_theta));
    }
    const Tensor q = pq.cols_slice(0, m_geo.q_cols());
    const Tensor kv_new = pq.cols_slice(m_geo.q_cols(), 2 * m_geo.kv_cols());
    const Tensor k_new = kv_new.cols_slice(0, m_geo.kv_cols());
    const Tensor v_new = kv_new.cols_slice(m_geo.kv_cols(), m_geo.kv_cols());
    AttentionShape shape;
    shape.batch = nb;
    shape.heads = m_geo.heads;
    shape.kv_heads = m_geo.kv_heads;
    shape.head_dim = m_geo.head_dim;
    if (decode) {
      // The step appends at `pos` and attends to the pos + 1 keys.
      const Tensor cache =
          w.kv_cache.view(s.batch * cap, 2 * m_geo.kv_cols(), dt).rows_slice(b0 * cap, nb * cap);
      const Tensor k_cache = cache.cols_slice(0, m_geo.kv_cols());
      const Tensor v_cache = cache.cols_slice(m_geo.kv_cols(), m_geo.kv_cols());
      if (!fold_rotary) {
        const ScopedOp op = m_op_index.scope(rec, op_kv_append, layer, share);
        m_backend.copy(kv_new, cache.strided_rows(pos, nb, cap));
      }
      shape.seq = 1;
      shape.context = pos + 1;
      shape.capacity = cap;
      const ScopedOp op = m_op_index.scope(rec, op_attention, layer, share);
      m_backend.attention(shape, q, k_cache, v_cache, m_policy.part(attn, part), m_spec.attention);
    } else if (by_tokens) {
      // Keys and values of tokens [0, (part + 1) * n): this part's and every earlier part's.
      // Causal work grows with the part: (2p + 1) / parts^2 of the whole attention.
      shape.seq = n;
      shape.context = (part + 1) * n;
      shape.capacity = shape.context;
      const Tensor kv_rows = qkv.rows_slice(0, shape.context);
      const ScopedOp op = m_op_index.scope(rec, op_attention, layer,
                                           static_cast<double>(2 * part + 1) / (parts * parts));
      m_backend.attention(shape, q, kv_rows.cols_slice(m_geo.q_cols(), m_geo.kv_cols()),
                          kv_rows.cols_slice(m_geo.q_cols() + m_geo.kv_cols(), m_geo.kv_cols()),
                          m_policy.part(attn, part), m_spec.attention);
    } else {
      shape.seq = s.seq;
      shape.context = s.seq;
      shape.capacity = s.seq;
      const ScopedOp op = m_op_index.scope(rec, op_attention, layer, share);
      m_backend.attention(shape, q, k_new, v_new, m_policy.part(attn, part), m_spec.attention);
    }
  }
  const Tensor proj = full_view(bufs().proj_full);
  const Tensor proj_shard = m_sp ? stream_view(bufs().proj_shard) : Tensor{};
  if (ring()) {
    ring_row_gemm(rec, op_proj, m_sp ? op_reducescatter_attn : op_allreduce_attn, layer, attn,
                  w.wo.view(h, m_geo.q_cols(), dt), proj, proj_shard, w_proj_reduce, w_proj_out,
                  m_pending_proj);
    return 0;
  }
  return row_gemm(rec, op_proj, m_sp ? op_reducescatter_attn : op_allreduce_attn, layer, attn,
                  w.wo.view(h, m_geo.q_cols(), dt), proj, proj_shard, part);
}

size_t TpStage::mlp_phase(Recorder& rec, int64_t layer, const LayerWeights& w, const Tensor& x,
                          Tensor y, int part, size_t fence) {
  const ModelSpec& m = m_spec.model;
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden;
  const double share = 1.0 / m_policy.parts;
  wait_comm(rec, fence);
  const Tensor reduced = m_sp ? m_policy.part(stream_view(bufs().proj_shard), part)
                              : m_policy.part(full_view(bufs().proj_full), part);
  const Tensor ln = stream_view(bufs().ln);
  const Tensor beta = m.norm == NormKind::layernorm ? w.ln2_beta.view(1, h, dt) : Tensor{};
  const bool swiglu = m.mlp == MlpKind::swiglu;
  const Tensor fc1 = m_fc1_buf.view(m_geo.tokens, m_geo.fc1_cols(), dt);
  const Tensor act = m_act_buf.view(m_geo.tokens, m_geo.ffn, dt);
  auto activation = [&](const Tensor& in, const Tensor& out) {
    if (swiglu)
      m_backend.swiglu(in, out);
    else
      m_backend.gelu(in, out);
  };
  if (m_pending_proj.gathering) {
    // ce-ring without sequence parallelism: the residual add and norm, FC1 and the activation
    // piece by piece, on this rank's summed rows while the peers' land.
    const double piece = 1.0 / m_spec.shape.tp;
    gathered_pieces(rec, m_pending_proj, [&](int64_t row0, int64_t rows) {
      auto at = [&](const Tensor& t) { return t.rows_slice(row0, rows); };
      {
        const ScopedOp op = m_op_index.scope(rec, op_residual1_norm2, layer, piece);
        m_backend.add_norm(at(x), at(reduced), at(y), w.ln2_gamma.view(1, h, dt), beta, at(ln),
                           static_cast<float>(m.norm_eps));
      }
      {
        const ScopedOp op = m_op_index.scope(rec, op_fc1, layer, piece);
        gemm(at(ln), w.w1.view(fc1.cols, h, dt), at(fc1), true);
      }
      const ScopedOp op = m_op_index.scope(rec, op_act, layer, piece);
      activation(at(fc1), at(act));
    });
  } else {
    if (computing()) {
      // y = x + the attention branch, and its norm, in one kernel.
      const ScopedOp op = m_op_index.scope(rec, op_residual1_norm2, layer, share);
      if (m_pending_proj.peer >= 0)
        m_backend.add_partials_norm(m_policy.part(x, part), reduced, m_pending_proj.piece,
                                    m_policy.part(y, part), w.ln2_gamma.view(1, h, dt), beta,
                                    m_policy.part(ln, part), static_cast<float>(m.norm_eps));
      else
        m_backend.add_norm(m_policy.part(x, part), reduced, m_policy.part(y, part),
                           w.ln2_gamma.view(1, h, dt), beta, m_policy.part(ln, part),
                           static_cast<float>(m.norm_eps));
    }
    release_pending(m_pending_proj);
    if (m_spec.mlp != nullptr) return stage_mlp(rec, layer, ln);
    const GemmEpilogue::Kind act_kind =
        swiglu ? GemmEpilogue::Kind::swiglu : GemmEpilogue::Kind::gelu;
    if (fused(act_kind)) {
      // One kernel: FC1 and the activation (FC1's own output is never written).
      const ScopedOp op = m_op_index.fused_scope(rec, op_fc1, {op_act}, layer);
      GemmEpilogue e;
      e.kind = act_kind;
      e.out = act;
      m_backend.set_gemm_sm_limit(0);
      m_backend.gemm_epilogue(ln, w.w1.view(fc1.cols, h, dt), fc1, e);
    } else {
      column_gemm(rec, op_fc1, op_allgather_mlp, layer, w.w1.view(fc1.cols, h, dt), fc1, part);
      if (computing()) {
        const ScopedOp op = m_op_index.scope(rec, op_act, layer, share);
        activation(m_policy.part(fc1, part), m_policy.part(act, part));
      }
    }
  }
  const Tensor fc2 = full_view(bufs().fc2_full);
  if (fused(GemmEpilogue::Kind::residual)) {
    // One kernel: FC2 added to the residual stream (no all-reduce between them at TP1).
    const ScopedOp op = m_op_index.fused_scope(rec, op_fc2, {op_residual2}, layer);
    GemmEpilogue e;
    e.kind = GemmEpilogue::Kind::residual;
    e.out = y;
    m_backend.gemm_epilogue(act, w.w2.view(h, m_geo.ffn, dt), fc2, e);
    return 0;
  }
  const Tensor fc2_shard = m_sp ? stream_view(bufs().fc2_shard) : Tensor{};
  if (ring()) {
    ring_row_gemm(rec, op_fc2, m_sp ? op_reducescatter_mlp : op_allreduce_mlp, layer, act,
                  w.w2.view(h, m_geo.ffn, dt), fc2, fc2_shard, w_fc2_reduce, w_fc2_out,
                  m_pending_fc2);
    return 0;
  }
  return row_gemm(rec, op_fc2, m_sp ? op_reducescatter_mlp : op_allreduce_mlp, layer, act,
                  w.w2.view(h, m_geo.ffn, dt), fc2, fc2_shard, part);
}

size_t TpStage::stage_mlp(Recorder& rec, int64_t layer, const Tensor& ln) {
  const int tp = m_spec.shape.tp;
  if (tp == 1 || m_sp) {
    // Every token, or under sequence parallelism this rank's rows, into what the residual add
    // reads.
    if (computing())
      m_spec.mlp->forward(rec, layer, ln,
                          m_sp ? stream_view(bufs().fc2_shard) : full_view(bufs().fc2_full));
    return 0;
  }
  // Each rank of the TP group its block of the (replicated) tokens, then the blocks gathered.
  const int64_t rows = m_geo.tokens / tp;
  const Tensor block = m_mlp_block_buf.view(rows, m_spec.model.hidden, m_backend.dtype());
  if (computing())
    m_spec.mlp->forward(rec, layer, ln.rows_slice(m_spec.tp_rank * rows, rows), block);
  void* full = bufs().fc2_full;
  collective(rec, op_moe_allgather, layer, 1.0, [&](Stream st) {
    m_comm->all_gather(block.data, full, static_cast<size_t>(block.elements()), block.dtype, st);
  });
  return m_lanes.fence();
}

void TpStage::final_phase(Recorder& rec, int64_t layer, Tensor y, int part, size_t fence) {
  wait_comm(rec, fence);
  if (!computing() || fused(GemmEpilogue::Kind::residual)) return; // fused: FC2 added it
  const Tensor reduced = m_sp ? m_policy.part(stream_view(bufs().fc2_shard), part)
                              : m_policy.part(full_view(bufs().fc2_full), part);
  if (m_pending_fc2.gathering) {
    // ce-ring without sequence parallelism: the residual add on this rank's summed rows while
    // the peers' land.
    gathered_pieces(rec, m_pending_fc2, [&](int64_t row0, int64_t rows) {
      const ScopedOp op = m_op_index.scope(rec, op_residual2, layer, 1.0 / m_spec.shape.tp);
      const Tensor out = y.rows_slice(row0, rows);
      m_backend.add(out, reduced.rows_slice(row0, rows), out);
    });
    return;
  }
  {
    const ScopedOp op = m_op_index.scope(rec, op_residual2, layer, 1.0 / m_policy.parts);
    if (m_pending_fc2.peer >= 0)
      m_backend.add_partials(m_policy.part(y, part), reduced, m_pending_fc2.piece,
                             m_policy.part(y, part));
    else
      m_backend.add(m_policy.part(y, part), reduced, m_policy.part(y, part));
  }
  release_pending(m_pending_fc2);
}

void TpStage::forward(Recorder& rec) {
  // A forward stage writes no weights: its kernels may start while the one before them ends.
  struct Chain {
    Backend& backend;
    explicit Chain(Backend& b) : backend(b) { backend.set_launch_chain(true); }
    ~Chain() { backend.set_launch_chain(false); }
  } chain(m_backend);
  const int64_t n = m_spec.num_layers;
  const int parts = m_policy.parts;
  const Tensor tmp = m_tmp_buf.view(m_geo.stream_tokens, m_spec.model.hidden, m_backend.dtype());
  Tensor x = m_input;
  std::vector<size_t> fences(static_cast<size_t>(parts));
  for (int64_t l = 0; l < n; ++l) {
    // Alternate output buffers so that the last layer writes output().
    const Tensor y = (n - 1 - l) % 2 == 0 ? m_output : tmp;
    const int64_t layer = m_spec.first_layer + l;
    const LayerWeights& w = m_layers[static_cast<size_t>(l)];
    // Parts interleave phase by phase: part p's collective runs under part p + 1's compute.
    for (int p = 0; p < parts; ++p)
      fences[static_cast<size_t>(p)] = attention_phase(rec, layer, w, x, p);
    for (int p = 0; p < parts; ++p)
      fences[static_cast<size_t>(p)] =
          mlp_phase(rec, layer, w, x, y, p, fences[static_cast<size_t>(p)]);
    for (int p = 0; p < parts; ++p)
      final_phase(rec, layer, y, p, fences[static_cast<size_t>(p)]);
    x = y;
  }
}

std::vector<TpStage::GemmProbe> TpStage::probe_gemms(Recorder& rec, int warmup, int reps) {
  const ModelSpec& m = m_spec.model;
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden;
  struct Shape {
    const char* op;
    int64_t n, k;
  };
  const Shape shapes[] = {{op::qkv, m_geo.qkv_cols(), h},
                          {op::proj, h, m_geo.q_cols()},
                          {op::fc1, m_geo.fc1_cols(), h},
                          {op::fc2, h, m_geo.ffn}};
  std::vector<GemmProbe> probes;
  m_backend.set_gemm_sm_limit(0);
  for (const Shape& sh : shapes) {
    Buffer a = m_backend.allocate(m_geo.tokens, sh.k);
    Buffer w = m_backend.allocate(sh.n, sh.k);
    Buffer c = m_backend.allocate(m_geo.tokens, sh.n);
    const Tensor ta = a.view(m_geo.tokens, sh.k, dt), tw = w.view(sh.n, sh.k, dt),
                 tc = c.view(m_geo.tokens, sh.n, dt);
    m_backend.fill_random(ta, GenKey{m_spec.seed, tensor_id(-2, 1), sh.k, 1.0f}, 0, 0);
    m_backend.fill_random(tw, GenKey{m_spec.seed, tensor_id(-2, 2), sh.k, 0.05f}, 0, 0);
    for (int i = 0; i < warmup; ++i)
      m_backend.gemm(ta, tw, tc);
    GemmProbe p;
    p.op = sh.op;
    p.flops = 2.0 * static_cast<double>(m_geo.tokens) * static_cast<double>(sh.n) *
              static_cast<double>(sh.k);
    p.reps = reps;
    std::vector<StampedSample> sample;
    stamped_loop(
        rec, Lane::compute, reps, 1, [&](int) { m_backend.gemm(ta, tw, tc); }, sample);
    p.start_mark = sample.front().begin;
    p.end_mark = sample.front().end;
    probes.push_back(p);
    // Operands are freed only after the device finished with them.
    m_backend.synchronize();
  }
  return probes;
}

} // namespace ridgeline
