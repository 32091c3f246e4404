// The registry of ops: every op a run records, one row each, with what it is (its kind), the
// lane the work model places it on, the pass it belongs to and, for a collective, the
// collective registry's name of what it runs. The names it gives (op::), the index a stage
// executor binds a plan's entries by (layer_op::LayerOp), the plan's kinds, lanes and passes
// (registered_op), and what the timeline, attribution and `model --validate` read from an OpSpec
// all come from this one table: a new op is one row here.
#pragma once

#include <cstdint>
#include <string>

#include "core/timeline.hpp"

namespace ridgeline {

/// Which pass of the train phase an op belongs to (prefill and decode: forward only; the
/// stage's own ops, outside the layers, are listed as forward).
enum class Pass : uint8_t { forward, backward_input, backward_weight };

// One row per op: identifier, name (in /ops), kind, lane, pass, collective ("" for compute).
// In a layer's execution order: the forward, a mixed step's attention, an MoE layer's MLP, the
// backward, sequence parallelism's backward collectives, then the stage's ops.
#define RIDGELINE_OPS(X)                                                                           \
  X(norm1, "norm1", norm, compute, forward, "")                                                    \
  X(qkv, "qkv_gemm", gemm, compute, forward, "")                                                   \
  X(rotary, "rotary", elementwise, compute, forward, "")                                           \
  X(kv_append, "kv_append", elementwise, compute, forward, "")                                     \
  X(attention, "attention", attention, compute, forward, "")                                       \
  X(attention_prefill, "attention_prefill", attention, compute, forward, "")                       \
  X(attention_decode, "attention_decode", attention, compute, forward, "")                         \
  X(proj, "proj_gemm", gemm, compute, forward, "")                                                 \
  X(allgather_attn, "allgather_attn", collective, comm, forward, "all_gather")                     \
  X(reducescatter_attn, "reducescatter_attn", collective, comm, forward, "reduce_scatter")         \
  X(allreduce_attn, "allreduce_attn", collective, comm, forward, "all_reduce")                     \
  X(residual1_norm2, "residual1_norm2", norm, compute, forward, "")                                \
  X(allgather_mlp, "allgather_mlp", collective, comm, forward, "all_gather")                       \
  X(fc1, "fc1_gemm", gemm, compute, forward, "")                                                   \
  X(act, "activation", elementwise, compute, forward, "")                                          \
  X(fc2, "fc2_gemm", gemm, compute, forward, "")                                                   \
  X(reducescatter_mlp, "reducescatter_mlp", collective, comm, forward, "reduce_scatter")           \
  X(allreduce_mlp, "allreduce_mlp", collective, comm, forward, "all_reduce")                       \
  X(moe_router, "moe_router_gemm", gemm, compute, forward, "")                                     \
  X(moe_dispatch, "moe_dispatch", collective, comm, forward, "all_to_all")                         \
  X(moe_experts, "moe_experts_gemm", gemm, compute, forward, "")                                   \
  X(moe_combine, "moe_combine", collective, comm, forward, "all_to_all")                           \
  X(moe_shared, "moe_shared_gemm", gemm, compute, forward, "")                                     \
  X(moe_allgather, "moe_allgather", collective, comm, forward, "all_gather")                       \
  X(residual2, "residual2", elementwise, compute, forward, "")                                     \
  X(fc2_dgrad, "fc2_dgrad", gemm, compute, backward_input, "")                                     \
  X(fc2_wgrad, "fc2_wgrad", gemm, compute, backward_weight, "")                                    \
  X(act_bwd, "activation_bwd", elementwise, compute, backward_input, "")                           \
  X(fc1_dgrad, "fc1_dgrad", gemm, compute, backward_input, "")                                     \
  X(allreduce_mlp_bwd, "allreduce_mlp_bwd", collective, comm, backward_input, "all_reduce")        \
  X(fc1_wgrad, "fc1_wgrad", gemm, compute, backward_weight, "")                                    \
  X(norm2_bwd, "norm2_bwd", norm, compute, backward_input, "")                                     \
  X(residual2_bwd, "residual2_bwd", elementwise, compute, backward_input, "")                      \
  X(proj_dgrad, "proj_dgrad", gemm, compute, backward_input, "")                                   \
  X(proj_wgrad, "proj_wgrad", gemm, compute, backward_weight, "")                                  \
  X(attention_bwd, "attention_bwd", attention, compute, backward_input, "")                        \
  X(rotary_bwd, "rotary_bwd", elementwise, compute, backward_input, "")                            \
  X(qkv_dgrad, "qkv_dgrad", gemm, compute, backward_input, "")                                     \
  X(allreduce_attn_bwd, "allreduce_attn_bwd", collective, comm, backward_input, "all_reduce")      \
  X(qkv_wgrad, "qkv_wgrad", gemm, compute, backward_weight, "")                                    \
  X(norm1_bwd, "norm1_bwd", norm, compute, backward_input, "")                                     \
  X(residual1_bwd, "residual1_bwd", elementwise, compute, backward_input, "")                      \
  X(allgather_mlp_bwd, "allgather_mlp_bwd", collective, comm, backward_input, "all_gather")        \
  X(reducescatter_mlp_bwd, "reducescatter_mlp_bwd", collective, comm, backward_input,              \
    "reduce_scatter")                                                                              \
  X(allgather_attn_bwd, "allgather_attn_bwd", collective, comm, backward_input, "all_gather")      \
  X(reducescatter_attn_bwd, "reducescatter_attn_bwd", collective, comm, backward_input,            \
    "reduce_scatter")                                                                              \
  X(send_act, "pp_send", p2p, p2p, forward, "")                                                    \
  X(recv_act, "pp_recv", p2p, p2p, forward, "")                                                    \
  X(stage_graph, "stage_graph", other, compute, forward, "")                                       \
  X(grad_zero, "grad_zero", elementwise, compute, forward, "")                                     \
  X(allreduce_norm_grads, "allreduce_norm_grads", collective, comm, forward, "all_reduce")         \
  X(dp_allreduce, "dp_allreduce", collective, comm, forward, "all_reduce")                         \
  X(dp_reducescatter, "dp_reducescatter", collective, comm, forward, "reduce_scatter")             \
  X(sgd_update, "sgd_update", elementwise, compute, forward, "")                                   \
  X(pp_exchange, "pp_exchange", p2p, p2p, forward, "sendrecv")                                     \
  X(pp_flush, "pp_flush", collective, comm, forward, "all_reduce")                                 \
  X(pp_wait, "pp_wait", p2p, p2p, forward, "")

/// Op names (fixed strings, /ops' names), from the registry.
namespace op {
#define RIDGELINE_OP_NAME(id, name, ...) inline constexpr const char* id = name;
RIDGELINE_OPS(RIDGELINE_OP_NAME)
#undef RIDGELINE_OP_NAME
} // namespace op

namespace layer_op {
/// Every op by its registry index, in the registry's order (op_count: how many).
enum LayerOp : int {
#define RIDGELINE_OP_INDEX(id, ...) op_##id,
  RIDGELINE_OPS(RIDGELINE_OP_INDEX)
#undef RIDGELINE_OP_INDEX
      op_count
};
} // namespace layer_op

/// One row of the registry.
struct OpRow {
  const char* name;
  OpKind kind;
  Lane lane;
  Pass pass;
  const char* collective; ///< "" for an op that is not a collective or a transfer
};

/// The registry's rows, by layer_op::LayerOp.
inline constexpr OpRow kOpRows[layer_op::op_count] = {
#define RIDGELINE_OP_ROW(id, name, kind, lane, pass, collective)                                   \
  {name, OpKind::kind, Lane::lane, Pass::pass, collective},
    RIDGELINE_OPS(RIDGELINE_OP_ROW)
#undef RIDGELINE_OP_ROW
};

/// The id of registry op `o` in `table`, interned with its name and kind.
inline int32_t intern_op(OpTable& table, layer_op::LayerOp o) {
  return table.intern(kOpRows[o].name, kOpRows[o].kind);
}
/// The row of the op named `name` (throws if the registry has none: an op must be registered
/// before a plan, an executor or a file can name it).
const OpRow& op_row(const std::string& name);
/// The row's index of the op named `name`, or -1 if the registry has none.
int op_index(const std::string& name);

} // namespace ridgeline
