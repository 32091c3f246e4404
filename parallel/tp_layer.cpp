// Tensor-parallel transformer stage: weight sharding by global index, and the forward schedule.
#include "parallel/tp_layer.hpp"

#include <cmath>

#include "core/error.hpp"

namespace ridgeline {
namespace {
// Indices into the op table of a layer, resolved once so the forward loop does no lookups.
enum Slot { s_norm1, s_qkv, s_rotary, s_kv_append, s_attention, s_proj, s_ar_attn, s_res1,
            s_norm2, s_fc1, s_act, s_fc2, s_ar_mlp, s_res2, s_count };
const char* const kSlotNames[s_count] = {
    op::norm1, op::qkv,       op::rotary, op::kv_append,      op::attention,
    op::proj,  op::allreduce_attn, op::residual1, op::norm2, op::fc1,
    op::act,   op::fc2,       op::allreduce_mlp, op::residual2};

float uniform_scale(int64_t fan_in) { return 1.0f / std::sqrt(static_cast<float>(fan_in)); }
}  // namespace

TpStage::TpStage(Backend& backend, Communicator* tp_comm, const StageSpec& spec, OpTable& ops)
    : m_backend(backend), m_comm(tp_comm), m_spec(spec) {
  const ModelSpec& m = spec.model;
  const LayerShape& s = spec.shape;
  RIDGELINE_REQUIRE(s.tp == 1 || (tp_comm && tp_comm->size() == s.tp),
                    "tensor parallelism needs a communicator of tp ranks");
  m_ops = layer_ops(m, s, spec.attention);
  m_op_ids.assign(s_count, -1);
  m_slot_specs.assign(s_count, nullptr);
  for (const OpSpec& o : m_ops) {
    const int32_t id = ops.intern(o.name, o.kind);
    for (size_t i = 0; i < s_count; ++i)
      if (o.name == kSlotNames[i]) {
        m_op_ids[i] = id;
        m_slot_specs[i] = &o;
      }
  }
  m_hl = local_heads(m, s.tp);
  m_kvl = local_kv_heads(m, s.tp);
  m_kv0 = first_kv_head(m, s.tp, spec.tp_rank);
  m_d = m.head_dim();
  m_fl = m.ffn_hidden / s.tp;
  m_tokens = s.tokens();

  const int64_t h = m.hidden;
  const int64_t qkv_cols = (m_hl + 2 * m_kvl) * m_d;
  const int64_t fc1_cols = m.mlp == MlpKind::swiglu ? 2 * m_fl : m_fl;
  m_in_buf = alloc(m_tokens, h);
  m_out_buf = alloc(m_tokens, h);
  m_tmp_buf = alloc(m_tokens, h);
  m_ln_buf = alloc(m_tokens, h);
  m_qkv_buf = alloc(m_tokens, qkv_cols);
  m_attn_buf = alloc(m_tokens, m_hl * m_d);
  m_proj_buf = alloc(m_tokens, h);
  m_fc1_buf = alloc(m_tokens, fc1_cols);
  m_act_buf = alloc(m_tokens, m_fl);
  m_fc2_buf = alloc(m_tokens, h);
  const DType dt = backend.dtype();
  m_input = m_in_buf.view(m_tokens, h, dt);
  m_output = m_out_buf.view(m_tokens, h, dt);

  m_layers.resize(static_cast<size_t>(spec.num_layers));
  for (int64_t l = 0; l < spec.num_layers; ++l)
    init_layer(spec.first_layer + l, m_layers[static_cast<size_t>(l)]);
}

Buffer TpStage::alloc(int64_t rows, int64_t cols) {
  Buffer b = m_backend.allocate(rows, cols);
  m_allocated += b.bytes();
  return b;
}

void TpStage::init_layer(int64_t layer, LayerWeights& w) {
  const ModelSpec& m = m_spec.model;
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden;
  const uint64_t seed = m_spec.seed;
  auto key = [&](int64_t role, int64_t global_cols, float scale) {
    return GenKey{seed, tensor_id(layer, role), global_cols, scale};
  };
  const int r = m_spec.tp_rank;

  w.ln1_gamma = alloc(1, h);
  w.ln1_beta = alloc(1, h);
  w.ln2_gamma = alloc(1, h);
  w.ln2_beta = alloc(1, h);
  for (Buffer* b : {&w.ln1_gamma, &w.ln2_gamma}) m_backend.fill_value(b->view(1, h, dt), 1.0f);
  for (Buffer* b : {&w.ln1_beta, &w.ln2_beta}) m_backend.fill_value(b->view(1, h, dt), 0.0f);

  // Column-parallel QKV: this rank's rows of the global Wq, Wk and Wv, stacked.
  const int64_t qkv_rows = (m_hl + 2 * m_kvl) * m_d;
  w.wqkv = alloc(qkv_rows, h);
  const Tensor wqkv = w.wqkv.view(qkv_rows, h, dt);
  const float s_in = uniform_scale(h);
  m_backend.fill_random(wqkv.rows_slice(0, m_hl * m_d), key(role_wq, h, s_in), r * m_hl * m_d, 0);
  m_backend.fill_random(wqkv.rows_slice(m_hl * m_d, m_kvl * m_d), key(role_wk, h, s_in),
                        m_kv0 * m_d, 0);
  m_backend.fill_random(wqkv.rows_slice((m_hl + m_kvl) * m_d, m_kvl * m_d), key(role_wv, h, s_in),
                        m_kv0 * m_d, 0);

  // Row-parallel projection: this rank's columns of the global Wo [h, heads * d].
  const int64_t attn_cols = m.heads * m_d;
  w.wo = alloc(h, m_hl * m_d);
  m_backend.fill_random(w.wo.view(h, m_hl * m_d, dt), key(role_wo, attn_cols, uniform_scale(attn_cols)),
                        0, r * m_hl * m_d);

  // Column-parallel FC1 (gate and up stacked for SwiGLU), row-parallel FC2.
  const bool swiglu = m.mlp == MlpKind::swiglu;
  w.w1 = alloc(swiglu ? 2 * m_fl : m_fl, h);
  const Tensor w1 = w.w1.view(swiglu ? 2 * m_fl : m_fl, h, dt);
  m_backend.fill_random(w1.rows_slice(0, m_fl), key(role_w1, h, s_in), r * m_fl, 0);
  if (swiglu) m_backend.fill_random(w1.rows_slice(m_fl, m_fl), key(role_w1_up, h, s_in), r * m_fl, 0);
  w.w2 = alloc(h, m_fl);
  m_backend.fill_random(w.w2.view(h, m_fl, dt), key(role_w2, m.ffn_hidden, uniform_scale(m.ffn_hidden)),
                        0, r * m_fl);

  if (m_spec.shape.phase == Phase::decode) {
    // The cache as a previous prefill would have left it: context tokens per sequence, plus
    // the slot the step appends to. Shards are columns of the global [rows, kv_heads * d].
    const LayerShape& s = m_spec.shape;
    const int64_t rows = s.batch * (s.context + 1);
    const int64_t kv_cols = m.kv_heads * m_d;
    w.k_cache = alloc(rows, m_kvl * m_d);
    w.v_cache = alloc(rows, m_kvl * m_d);
    m_backend.fill_random(w.k_cache.view(rows, m_kvl * m_d, dt), key(role_k_cache, kv_cols, 1.0f),
                          0, m_kv0 * m_d);
    m_backend.fill_random(w.v_cache.view(rows, m_kvl * m_d, dt), key(role_v_cache, kv_cols, 1.0f),
                          0, m_kv0 * m_d);
  }
}

void TpStage::fill_input(int64_t microbatch) {
  const GenKey key{m_spec.seed, tensor_id(-1, role_input), m_spec.model.hidden, 1.0f};
  m_backend.fill_random(m_input, key, microbatch * m_tokens, 0);
}

void TpStage::forward(Recorder& rec) {
  const int64_t n = m_spec.num_layers;
  const DType dt = m_backend.dtype();
  const Tensor tmp = m_tmp_buf.view(m_tokens, m_spec.model.hidden, dt);
  Tensor x = m_input;
  for (int64_t l = 0; l < n; ++l) {
    // Alternate output buffers so that the last layer writes output().
    const Tensor y = (n - 1 - l) % 2 == 0 ? m_output : tmp;
    run_layer(rec, m_spec.first_layer + l, m_layers[static_cast<size_t>(l)], x, y);
    x = y;
  }
}

void TpStage::all_reduce(Recorder& rec, int slot, int64_t layer, Tensor t) {
  const Stream stream = m_backend.stream(Lane::compute);
  const auto i = static_cast<size_t>(slot);
  ScopedOp scope(rec, m_op_ids[i], static_cast<int32_t>(layer), Lane::comm, m_slot_specs[i]->cost,
                 Lane::compute);
  m_comm->all_reduce(t.data, t.data, static_cast<size_t>(t.elements()), t.dtype, ReduceOp::sum,
                     stream);
  m_comm->complete(stream);
}

void TpStage::run_layer(Recorder& rec, int64_t layer, const LayerWeights& w, const Tensor& x,
                        Tensor y) {
  const ModelSpec& m = m_spec.model;
  const LayerShape& s = m_spec.shape;
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden;
  const int64_t t = m_tokens;
  const float eps = static_cast<float>(m.norm_eps);
  const auto lid = static_cast<int32_t>(layer);
  auto scope = [&](Slot slot) {
    const OpSpec& spec = *m_slot_specs[static_cast<size_t>(slot)];
    return rec.begin(m_op_ids[static_cast<size_t>(slot)], lid, spec.lane, spec.cost, Lane::compute);
  };
  auto norm = [&](Slot slot, const Tensor& in, const Buffer& gamma, const Buffer& beta, Tensor out) {
    const size_t hnd = scope(slot);
    if (m.norm == NormKind::layernorm)
      m_backend.layer_norm(in, gamma.view(1, h, dt), beta.view(1, h, dt), out, eps);
    else
      m_backend.rms_norm(in, gamma.view(1, h, dt), out, eps);
    rec.end(hnd);
  };

  const Tensor ln = m_ln_buf.view(t, h, dt);
  const Tensor qkv = m_qkv_buf.view(t, (m_hl + 2 * m_kvl) * m_d, dt);
  const Tensor attn = m_attn_buf.view(t, m_hl * m_d, dt);
  const Tensor proj = m_proj_buf.view(t, h, dt);
  const bool swiglu = m.mlp == MlpKind::swiglu;
  const Tensor fc1 = m_fc1_buf.view(t, swiglu ? 2 * m_fl : m_fl, dt);
  const Tensor act = m_act_buf.view(t, m_fl, dt);
  const Tensor fc2 = m_fc2_buf.view(t, h, dt);

  norm(s_norm1, x, w.ln1_gamma, w.ln1_beta, ln);
  size_t hnd = scope(s_qkv);
  m_backend.gemm(ln, w.wqkv.view(qkv.cols, h, dt), qkv);
  rec.end(hnd);

  const bool decode = s.phase == Phase::decode;
  if (m.rotary) {
    hnd = scope(s_rotary);
    m_backend.rotary(qkv.cols_slice(0, (m_hl + m_kvl) * m_d), m_hl + m_kvl, m_d,
                     decode ? 1 : s.seq, decode ? s.context : 0,
                     static_cast<float>(m.rope_theta));
    rec.end(hnd);
  }
  const Tensor q = qkv.cols_slice(0, m_hl * m_d);
  const Tensor k_new = qkv.cols_slice(m_hl * m_d, m_kvl * m_d);
  const Tensor v_new = qkv.cols_slice((m_hl + m_kvl) * m_d, m_kvl * m_d);
  AttentionShape shape;
  shape.batch = s.batch;
  shape.heads = m_hl;
  shape.kv_heads = m_kvl;
  shape.head_dim = m_d;
  if (decode) {
    const int64_t capacity = s.context + 1;
    const Tensor k_cache = w.k_cache.view(s.batch * capacity, m_kvl * m_d, dt);
    const Tensor v_cache = w.v_cache.view(s.batch * capacity, m_kvl * m_d, dt);
    hnd = scope(s_kv_append);
    m_backend.copy(k_new, k_cache.strided_rows(s.context, s.batch, capacity));
    m_backend.copy(v_new, v_cache.strided_rows(s.context, s.batch, capacity));
    rec.end(hnd);
    shape.seq = 1;
    shape.context = capacity;
    shape.capacity = capacity;
    hnd = scope(s_attention);
    m_backend.attention(shape, q, k_cache, v_cache, attn, m_spec.attention);
    rec.end(hnd);
  } else {
    shape.seq = s.seq;
    shape.context = s.seq;
    shape.capacity = s.seq;
    hnd = scope(s_attention);
    m_backend.attention(shape, q, k_new, v_new, attn, m_spec.attention);
    rec.end(hnd);
  }

  hnd = scope(s_proj);
  m_backend.gemm(attn, w.wo.view(h, m_hl * m_d, dt), proj);
  rec.end(hnd);
  if (s.tp > 1) all_reduce(rec, s_ar_attn, layer, proj);
  hnd = scope(s_res1);
  m_backend.add(x, proj, y);
  rec.end(hnd);

  norm(s_norm2, y, w.ln2_gamma, w.ln2_beta, ln);
  hnd = scope(s_fc1);
  m_backend.gemm(ln, w.w1.view(fc1.cols, h, dt), fc1);
  rec.end(hnd);
  hnd = scope(s_act);
  if (swiglu)
    m_backend.swiglu(fc1, act);
  else
    m_backend.gelu(fc1, act);
  rec.end(hnd);
  hnd = scope(s_fc2);
  m_backend.gemm(act, w.w2.view(h, m_fl, dt), fc2);
  rec.end(hnd);
  if (s.tp > 1) all_reduce(rec, s_ar_mlp, layer, fc2);
  hnd = scope(s_res2);
  m_backend.add(y, fc2, y);
  rec.end(hnd);
}

}  // namespace ridgeline
