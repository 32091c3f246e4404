// The mixture-of-experts MLP on one rank (see moe_layer.hpp).
#include "models/moe_layer.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace ridgeline {
namespace {

float uniform_scale(int64_t fan_in) {
  return 1.0f / std::sqrt(static_cast<float>(fan_in));
}

void require_tokens(const ModelSpec& m, const Tensor& x, const Tensor& y, const char* what) {
  RIDGELINE_REQUIRE(m.moe() && x.cols == m.hidden && y.rows == x.rows && y.cols == m.hidden,
                    std::string(what) + ": x and y must be [tokens, hidden] of an MoE model");
}

} // namespace

std::optional<RoutingControl> parse_routing(const std::string& text, uint64_t seed) {
  RoutingControl c;
  c.seed = seed;
  if (text == "router" || text == "uniform") {
    c.mode = text == "router" ? RoutingMode::router : RoutingMode::uniform;
    return c;
  }
  if (text.rfind("zipf:", 0) != 0) return std::nullopt;
  try {
    size_t used = 0;
    c.zipf_s = std::stod(text.substr(5), &used);
    c.mode = RoutingMode::zipf;
    if (used == text.size() - 5 && c.zipf_s >= 0) return c;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

Routing route(Backend& backend, const RoutingControl& control, const ModelSpec& m,
              const Tensor& logits) {
  const int64_t tokens = logits.rows;
  switch (control.mode) {
  case RoutingMode::uniform:
    return route_uniform(tokens, m.experts, m.top_k);
  case RoutingMode::zipf:
    return route_zipf(tokens, m.experts, m.top_k, control.zipf_s, control.seed);
  case RoutingMode::router:
    break;
  }
  Routing r;
  r.tokens = tokens;
  r.experts = m.experts;
  r.top_k = m.top_k;
  backend.route_top_k(logits, m.top_k, m.gating == GatingKind::sigmoid, r.expert, r.weight);
  return r;
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

Tensor MoeScratch::get(Backend& backend, Slot slot, int64_t rows, int64_t cols) {
  Buffer& b = m_buffers[slot];
  const size_t bytes = static_cast<size_t>(rows * cols) * dtype_size(backend.dtype());
  if (b.bytes() < bytes) {
    b = Buffer(); // freed before the larger one is taken
    b = backend.allocate(rows, cols);
  }
  return b.view(rows, cols, backend.dtype());
}

MoeStep moe_route(Backend& backend, const ModelSpec& m, const MoeWeights& w, const Tensor& x,
                  const RoutingControl& control, MoeScratch* scratch) {
  RIDGELINE_REQUIRE(m.moe() && x.cols == m.hidden, "moe_route: x must be [tokens, hidden]");
  const DType dt = backend.dtype();
  const int64_t tokens = x.rows;
  MoeStep step;
  if (tokens == 0) return step;
  // The router runs in every mode: a controlled routing replaces its choice, not its GEMM.
  MoeScratch local;
  const Tensor lt =
      (scratch ? *scratch : local).get(backend, MoeScratch::logits, tokens, m.experts);
  backend.gemm(x, w.router.view(m.experts, m.hidden, dt), lt);
  step.routing = route(backend, control, m, lt);
  step.permutation = permute(step.routing);
  return step;
}

void moe_shared(Backend& backend, const ModelSpec& m, const MoeWeights& w, const Tensor& x,
                Tensor y, MoeScratch* scratch) {
  require_tokens(m, x, y, "moe_shared");
  const DType dt = backend.dtype();
  const int64_t tokens = x.rows, h = m.hidden, fs = m.shared_experts * m.expert_ffn_hidden;
  if (tokens == 0) return;
  if (fs == 0) {
    backend.fill_value(y, 0.0f);
    return;
  }
  MoeScratch local;
  MoeScratch& s = scratch ? *scratch : local;
  const Tensor gu = s.get(backend, MoeScratch::shared_gate_up, tokens, 2 * fs);
  backend.gemm(x, w.shared_gate_up.view(2 * fs, h, dt), gu);
  const Tensor at = s.get(backend, MoeScratch::shared_act, tokens, fs);
  backend.swiglu(gu, at);
  backend.gemm(at, w.shared_down.view(h, fs, dt), y);
}

void moe_gather(Backend& backend, const ModelSpec& m, const Tensor& x, const MoeStep& step,
                int64_t row0, Tensor rows) {
  std::vector<int64_t> index(static_cast<size_t>(rows.rows));
  for (int64_t r = 0; r < rows.rows; ++r)
    index[static_cast<size_t>(r)] = step.permutation.assignment[row0 + r] / m.top_k;
  backend.gather_rows(x, index, rows);
}

void moe_experts(Backend& backend, const ModelSpec& m, const MoeWeights& w, Tensor rows,
                 const std::vector<int64_t>& offsets, const std::vector<int64_t>& group_expert,
                 MoeScratch* scratch) {
  RIDGELINE_REQUIRE(offsets.size() == group_expert.size() + 1 && offsets.back() == rows.rows,
                    "moe_experts: the groups must cover the rows");
  const DType dt = backend.dtype();
  const int64_t h = m.hidden, f = m.expert_ffn_hidden, n = rows.rows;
  if (n == 0) return;
  std::vector<Tensor> gate_up, down;
  for (int64_t e : group_expert) {
    gate_up.push_back(w.gate_up[static_cast<size_t>(e)].view(2 * f, h, dt));
    down.push_back(w.down[static_cast<size_t>(e)].view(h, f, dt));
  }
  MoeScratch local;
  MoeScratch& s = scratch ? *scratch : local;
  const Tensor gu = s.get(backend, MoeScratch::gate_up, n, 2 * f);
  backend.grouped_gemm(rows, gate_up, offsets, gu);
  const Tensor at = s.get(backend, MoeScratch::act, n, f);
  backend.swiglu(gu, at);
  // The experts' outputs overwrite their inputs, which nothing reads any more.
  backend.grouped_gemm(at, down, offsets, rows);
}

void moe_combine(Backend& backend, const ModelSpec& m, const Tensor& rows, const MoeStep& step,
                 int64_t row0, Tensor y) {
  std::vector<int64_t> index(static_cast<size_t>(rows.rows));
  std::vector<float> weight(index.size());
  for (int64_t r = 0; r < rows.rows; ++r) {
    const int64_t i = step.permutation.assignment[row0 + r];
    index[static_cast<size_t>(r)] = i / m.top_k;
    weight[static_cast<size_t>(r)] = step.routing.weight[i];
  }
  backend.scatter_add_rows(rows, index, weight, y);
}

void moe_routed(Backend& backend, const ModelSpec& m, const MoeWeights& w, const Tensor& x,
                Tensor y, const MoeStep& step, MoeScratch* scratch) {
  require_tokens(m, x, y, "moe_routed");
  const int64_t first = w.first_expert, count = static_cast<int64_t>(w.gate_up.size());
  const Permutation& p = step.permutation;
  RIDGELINE_REQUIRE(step.routing.tokens == x.rows &&
                        static_cast<int64_t>(p.offsets.size()) == m.experts + 1,
                    "moe_routed: the step routes other tokens or experts");
  // The held experts' rows are one contiguous block of the permutation.
  const int64_t row0 = p.offsets[first], rows = p.offsets[first + count] - row0;
  if (rows == 0) return;
  MoeScratch local;
  MoeScratch& s = scratch ? *scratch : local;
  const Tensor xp = s.get(backend, MoeScratch::gathered, rows, m.hidden);
  moe_gather(backend, m, x, step, row0, xp);
  std::vector<int64_t> offsets, group_expert;
  for (int64_t e = 0; e < count; ++e) {
    offsets.push_back(p.offsets[first + e] - row0);
    group_expert.push_back(e);
  }
  offsets.push_back(rows);
  moe_experts(backend, m, w, xp, offsets, group_expert, &s);
  moe_combine(backend, m, xp, step, row0, y);
}

MoeStep moe_forward(Backend& backend, const ModelSpec& m, const MoeWeights& w, const Tensor& x,
                    Tensor y, const RoutingControl& control) {
  require_tokens(m, x, y, "moe_forward");
  RIDGELINE_REQUIRE(w.first_expert == 0 && static_cast<int64_t>(w.gate_up.size()) == m.experts,
                    "moe_forward: the weights must hold every expert");
  MoeStep step = moe_route(backend, m, w, x, control);
  moe_shared(backend, m, w, x, y);
  moe_routed(backend, m, w, x, y, step);
  return step;
}

} // namespace ridgeline
