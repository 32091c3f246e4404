// Generation of one layer's weight shard (see layer_weights.hpp).
#include "parallel/layer_weights.hpp"

#include <cmath>

namespace ridgeline {
namespace {
float uniform_scale(int64_t fan_in) {
  return 1.0f / std::sqrt(static_cast<float>(fan_in));
}
} // namespace

LayerWeights make_layer_weights(Backend& backend, const ModelSpec& m, const LayerGeometry& g,
                                int64_t layer, int tp_rank, uint64_t seed, size_t& allocated) {
  const DType dt = backend.dtype();
  const int64_t h = m.hidden, d = g.head_dim;
  auto alloc = [&](int64_t rows, int64_t cols) {
    Buffer b = backend.allocate(rows, cols);
    allocated += b.bytes();
    return b;
  };
  auto key = [&](int64_t role, int64_t global_cols, float scale) {
    return GenKey{seed, tensor_id(layer, role), global_cols, scale};
  };
  const int r = tp_rank;
  LayerWeights w;
  w.ln1_gamma = alloc(1, h);
  w.ln1_beta = alloc(1, h);
  w.ln2_gamma = alloc(1, h);
  w.ln2_beta = alloc(1, h);
  for (Buffer* b : {&w.ln1_gamma, &w.ln2_gamma})
    backend.fill_value(b->view(1, h, dt), 1.0f);
  for (Buffer* b : {&w.ln1_beta, &w.ln2_beta})
    backend.fill_value(b->view(1, h, dt), 0.0f);

  // Column-parallel QKV: this rank's rows of the global Wq, Wk and Wv, stacked.
  w.wqkv = alloc(g.qkv_cols(), h);
  const Tensor wqkv = w.wqkv.view(g.qkv_cols(), h, dt);
  const float s_in = uniform_scale(h);
  backend.fill_random(wqkv.rows_slice(0, g.q_cols()), key(role_wq, h, s_in), r * g.q_cols(), 0);
  backend.fill_random(wqkv.rows_slice(g.q_cols(), g.kv_cols()), key(role_wk, h, s_in),
                      g.kv_head0 * d, 0);
  backend.fill_random(wqkv.rows_slice(g.q_cols() + g.kv_cols(), g.kv_cols()), key(role_wv, h, s_in),
                      g.kv_head0 * d, 0);

  // Row-parallel projection: this rank's columns of the global Wo [h, heads * d].
  const int64_t attn_cols = m.heads * d;
  w.wo = alloc(h, g.q_cols());
  backend.fill_random(w.wo.view(h, g.q_cols(), dt),
                      key(role_wo, attn_cols, uniform_scale(attn_cols)), 0, r * g.q_cols());

  // Column-parallel FC1 (gate and up stacked for SwiGLU), row-parallel FC2.
  w.w1 = alloc(g.fc1_cols(), h);
  const Tensor w1 = w.w1.view(g.fc1_cols(), h, dt);
  backend.fill_random(w1.rows_slice(0, g.ffn), key(role_w1, h, s_in), r * g.ffn, 0);
  if (g.swiglu)
    backend.fill_random(w1.rows_slice(g.ffn, g.ffn), key(role_w1_up, h, s_in), r * g.ffn, 0);
  w.w2 = alloc(h, g.ffn);
  backend.fill_random(w.w2.view(h, g.ffn, dt),
                      key(role_w2, m.ffn_hidden, uniform_scale(m.ffn_hidden)), 0, r * g.ffn);
  return w;
}

void model_norm(Backend& backend, const ModelSpec& m, const Tensor& in, const Buffer& gamma,
                const Buffer& beta, Tensor out) {
  const int64_t h = m.hidden;
  const DType dt = backend.dtype();
  const float eps = static_cast<float>(m.norm_eps);
  if (m.norm == NormKind::layernorm)
    backend.layer_norm(in, gamma.view(1, h, dt), beta.view(1, h, dt), out, eps);
  else
    backend.rms_norm(in, gamma.view(1, h, dt), out, eps);
}

} // namespace ridgeline
