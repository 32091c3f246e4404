// The mixture-of-experts MLP on one rank (see moe_layer.hpp).
#include "models/moe_layer.hpp"

#include <cmath>
#include <utility>

#include "core/error.hpp"

namespace ridgeline {
namespace {

float uniform_scale(int64_t fan_in) {
  return 1.0f / std::sqrt(static_cast<float>(fan_in));
}

} // namespace

Routing route(const RoutingControl& control, const ModelSpec& m, int64_t tokens,
              const std::vector<float>& logits) {
  switch (control.mode) {
  case RoutingMode::uniform:
    return route_uniform(tokens, m.experts, m.top_k);
  case RoutingMode::zipf:
    return route_zipf(tokens, m.experts, m.top_k, control.zipf_s, control.seed);
  case RoutingMode::router:
    break;
  }
  return route_top_k(logits, tokens, m.experts, m.top_k, m.gating);
}

MoeWeights make_moe_weights(Backend& backend, const ModelSpec& m, int64_t layer, uint64_t seed,
                            int64_t first_expert, int64_t expert_count) {
  RIDGELINE_REQUIRE(m.moe() && first_expert >= 0 && expert_count >= 0 &&
                        first_expert + expert_count <= m.experts,
                    "make_moe_weights: experts outside the model's");
  const DType dt = backend.dtype();
  const int64_t h = m.hidden, f = m.expert_ffn_hidden, fs = m.shared_experts * f;
  auto key = [&](int64_t role, int64_t global_cols) {
    return GenKey{seed, tensor_id(layer, role), global_cols, uniform_scale(global_cols)};
  };
  MoeWeights w;
  w.first_expert = first_expert;
  w.router = backend.allocate(m.experts, h);
  backend.fill_random(w.router.view(m.experts, h, dt), key(role_router, h), 0, 0);
  for (int64_t e = first_expert; e < first_expert + expert_count; ++e) {
    Buffer gate_up = backend.allocate(2 * f, h);
    const Tensor gu = gate_up.view(2 * f, h, dt);
    backend.fill_random(gu.rows_slice(0, f), key(role_expert_gate, h), e * f, 0);
    backend.fill_random(gu.rows_slice(f, f), key(role_expert_up, h), e * f, 0);
    Buffer down = backend.allocate(h, f);
    backend.fill_random(down.view(h, f, dt), key(role_expert_down, f), e * h, 0);
    w.gate_up.push_back(std::move(gate_up));
    w.down.push_back(std::move(down));
  }
  if (fs > 0) {
    w.shared_gate_up = backend.allocate(2 * fs, h);
    const Tensor gu = w.shared_gate_up.view(2 * fs, h, dt);
    backend.fill_random(gu.rows_slice(0, fs), key(role_shared_gate, h), 0, 0);
    backend.fill_random(gu.rows_slice(fs, fs), key(role_shared_up, h), 0, 0);
    w.shared_down = backend.allocate(h, fs);
    backend.fill_random(w.shared_down.view(h, fs, dt), key(role_shared_down, fs), 0, 0);
  }
  return w;
}

MoeStep moe_forward(Backend& backend, const ModelSpec& m, const MoeWeights& w, const Tensor& x,
                    Tensor y, const RoutingControl& control) {
  const DType dt = backend.dtype();
  const int64_t tokens = x.rows, h = m.hidden, f = m.expert_ffn_hidden, k = m.top_k;
  const int64_t fs = m.shared_experts * f;
  RIDGELINE_REQUIRE(m.moe() && x.cols == h && y.rows == tokens && y.cols == h,
                    "moe_forward: x and y must be [tokens, hidden] of an MoE model");
  RIDGELINE_REQUIRE(w.first_expert == 0 && static_cast<int64_t>(w.gate_up.size()) == m.experts,
                    "moe_forward: the weights must hold every expert");
  MoeStep step;
  if (tokens == 0) return step;

  // The router runs in every mode: a controlled routing replaces its choice, not its GEMM.
  Buffer logits = backend.allocate(tokens, m.experts);
  const Tensor lt = logits.view(tokens, m.experts, dt);
  backend.gemm(x, w.router.view(m.experts, h, dt), lt);
  step.routing = route(control, m, tokens, backend.to_host(lt));
  step.permutation = permute(step.routing);
  const Permutation& p = step.permutation;

  const int64_t rows = tokens * k;
  Buffer gathered = backend.allocate(rows, h);
  const Tensor xp = gathered.view(rows, h, dt);
  for (int64_t r = 0; r < rows; ++r)
    backend.copy(x.rows_slice(p.assignment[r] / k, 1), xp.rows_slice(r, 1));

  std::vector<Tensor> gate_up, down;
  for (int64_t e = 0; e < m.experts; ++e) {
    gate_up.push_back(w.gate_up[e].view(2 * f, h, dt));
    down.push_back(w.down[e].view(h, f, dt));
  }
  Buffer gate_up_out = backend.allocate(rows, 2 * f);
  const Tensor gu = gate_up_out.view(rows, 2 * f, dt);
  backend.grouped_gemm(xp, gate_up, p.offsets, gu);
  Buffer act = backend.allocate(rows, f);
  const Tensor at = act.view(rows, f, dt);
  backend.swiglu(gu, at);
  // The experts' outputs overwrite the gathered rows, which nothing reads any more.
  backend.grouped_gemm(at, down, p.offsets, xp);

  if (fs > 0) {
    Buffer shared_gu = backend.allocate(tokens, 2 * fs);
    const Tensor sgu = shared_gu.view(tokens, 2 * fs, dt);
    backend.gemm(x, w.shared_gate_up.view(2 * fs, h, dt), sgu);
    Buffer shared_act = backend.allocate(tokens, fs);
    const Tensor sat = shared_act.view(tokens, fs, dt);
    backend.swiglu(sgu, sat);
    backend.gemm(sat, w.shared_down.view(h, fs, dt), y);
  } else {
    backend.fill_value(y, 0.0f);
  }
  // The combine: each token's k rows, in its routing order, times their weights.
  for (int64_t i = 0; i < rows; ++i)
    backend.axpy(step.routing.weight[i], xp.rows_slice(p.row[i], 1), y.rows_slice(i / k, 1));
  return step;
}

} // namespace ridgeline
