// The mixture-of-experts MLP computed on one rank against the Backend: router GEMM, gating,
// permutation, the experts' SwiGLU as grouped GEMMs, the weighted combine and the shared
// experts. It is the reference an expert-parallel layout is checked against: the weights come
// from the counter-based generator, so any rank can generate any expert's numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/backend.hpp"
#include "models/model_spec.hpp"
#include "models/moe_routing.hpp"

namespace ridgeline {

/// The generator's roles (tensor_id(layer, role)) of an MoE MLP's logical tensors, apart from
/// the dense layer's. Experts are stacked: expert e's rows of a gate or up tensor
/// [experts x f, hidden] are [e x f, (e + 1) x f), of the down tensor [experts x hidden, f]
/// [e x hidden, (e + 1) x hidden). The shared experts are one SwiGLU of shared x f.
enum MoeRole : int64_t {
  role_router = 32,      ///< [experts, hidden]
  role_expert_gate = 33, ///< [experts x f, hidden]
  role_expert_up = 34,   ///< [experts x f, hidden]
  role_expert_down = 35, ///< [experts x hidden, f]
  role_shared_gate = 36, ///< [shared x f, hidden]
  role_shared_up = 37,   ///< [shared x f, hidden]
  role_shared_down = 38, ///< [hidden, shared x f]
};

/// How the experts are chosen: by the router, or controlled (the router GEMM runs either way).
struct RoutingControl {
  RoutingMode mode = RoutingMode::router;
  double zipf_s = 1.0; ///< zipf: the exponent
  uint64_t seed = 0;   ///< zipf: the draw's seed
};

/// "router", "uniform" or "zipf:S" (S >= 0) with the zipf draw's seed; nothing where `text` is
/// none of them.
std::optional<RoutingControl> parse_routing(const std::string& text, uint64_t seed);

/// The routing of the tokens of `logits` ([tokens, experts] on `backend`) under `control`: the
/// router mode chooses from them (Backend::route_top_k, which waits for the device); a
/// controlled mode reads only their row count and does not wait.
Routing route(Backend& backend, const RoutingControl& control, const ModelSpec& m,
              const Tensor& logits);

/// One layer's MoE weights for experts [first_expert, first_expert + expert_count), the
/// router and the shared experts (whole on every rank).
struct MoeWeights {
  int64_t first_expert = 0;
  Buffer router;               ///< [experts, hidden]
  std::vector<Buffer> gate_up; ///< per local expert [2f, hidden]: gate rows, then up rows
  std::vector<Buffer> down;    ///< per local expert [hidden, f]
  Buffer shared_gate_up;       ///< [2 x shared x f, hidden]; empty without shared experts
  Buffer shared_down;          ///< [hidden, shared x f]
};

/// Generates the MoE weights of `layer` (uniform in +-1/sqrt(fan-in)) for the given experts.
MoeWeights make_moe_weights(Backend& backend, const ModelSpec& m, int64_t layer, uint64_t seed,
                            int64_t first_expert, int64_t expert_count);

/// Device memory the MoE functions reuse from one call to the next, one buffer per use, grown
/// and never shrunk. Without it each call allocates and frees its intermediates, and on a GPU
/// the free waits for the whole device. A function given none allocates its own.
class MoeScratch {
public:
  enum Slot { logits, gathered, regrouped, gate_up, act, shared_gate_up, shared_act, kSlots };
  /// A [rows, cols] tensor of the backend's type in `slot`'s buffer, valid until the next
  /// get() of that slot.
  Tensor get(Backend& backend, Slot slot, int64_t rows, int64_t cols);

private:
  Buffer m_buffers[kSlots];
};

/// What the forward chose, for the checks and the load.
struct MoeStep {
  Routing routing;
  Permutation permutation;
};

/// The router GEMM and the routing of x's tokens under `control`, with its permutation (on
/// the host). Under RoutingMode::router the choice is Backend::route_top_k's (on the device
/// with the CUDA backend) and waits for the device; a controlled routing ignores the logits and
/// does not wait.
MoeStep moe_route(Backend& backend, const ModelSpec& m, const MoeWeights& w, const Tensor& x,
                  const RoutingControl& control, MoeScratch* scratch = nullptr);

/// y = the shared experts of x (0 without shared experts).
void moe_shared(Backend& backend, const ModelSpec& m, const MoeWeights& w, const Tensor& x,
                Tensor y, MoeScratch* scratch = nullptr);

/// y += the routed experts' part for the experts `w` holds: the rows `step` assigns to them
/// gathered from x, the grouped gate and up GEMM, SwiGLU, the grouped down GEMM, and each row
/// added back to its token times its weight. What one expert-parallel rank computes of the
/// layer after the dispatch (here x's rows are gathered on the rank itself).
void moe_routed(Backend& backend, const ModelSpec& m, const MoeWeights& w, const Tensor& x,
                Tensor y, const MoeStep& step, MoeScratch* scratch = nullptr);

/// The parts of moe_routed(), for an expert-parallel rank that moves the rows between them.
/// moe_gather: rows[r] = the token of permuted row row0 + r of `step` (rows: [n, hidden]).
void moe_gather(Backend& backend, const ModelSpec& m, const Tensor& x, const MoeStep& step,
                int64_t row0, Tensor rows);
/// rows [n, hidden] in place through the experts `w` holds: group g, rows [offsets[g],
/// offsets[g + 1]), through w's local expert group_expert[g] (the grouped gate and up GEMM,
/// SwiGLU, the grouped down GEMM; empty groups skipped).
void moe_experts(Backend& backend, const ModelSpec& m, const MoeWeights& w, Tensor rows,
                 const std::vector<int64_t>& offsets, const std::vector<int64_t>& group_expert,
                 MoeScratch* scratch = nullptr);
/// The combine: y[token] += weight x rows[r] for permuted row row0 + r of `step`, in permuted
/// order (a token's rows in the order of its experts' indices).
void moe_combine(Backend& backend, const ModelSpec& m, const Tensor& rows, const MoeStep& step,
                 int64_t row0, Tensor y);

/// y[tokens, hidden] = sum over token t's k experts of weight x expert(x_t), plus the shared
/// experts of x_t: moe_route(), moe_shared() then moe_routed(). `w` holds every expert.
MoeStep moe_forward(Backend& backend, const ModelSpec& m, const MoeWeights& w, const Tensor& x,
                    Tensor y, const RoutingControl& control);

} // namespace ridgeline
