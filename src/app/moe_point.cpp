// The mixture-of-experts part of a point (see moe_point.hpp).
#include "app/moe_point.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "collectives/ipc_allreduce.hpp"
#include "core/error.hpp"
#include "parallel/grid.hpp"

namespace ridgeline {

double moe_memory_bytes(const PointSpec& point, bool check) {
  const ModelSpec& m = point.model;
  if (!m.moe()) return 0;
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.expert_ffn_hidden);
  const double e = static_cast<double>(dtype_size(point.dtype));
  auto layer_bytes = [&](double experts) {
    return (static_cast<double>(m.experts) * h + experts * 3 * f * h +
            static_cast<double>(m.shared_experts) * 3 * f * h) *
           e;
  };
  // A rank's rows: its block of its TP group's tokens, each to top_k experts.
  const double block = static_cast<double>(point.shape.tokens() / point.tp);
  const double rows = block * static_cast<double>(m.top_k);
  double bytes = static_cast<double>(point.stage_layers()) *
                     layer_bytes(static_cast<double>(m.experts / point.ep)) +
                 (1 + point.ep) * rows * h * e;
  // At tp > 1 the stage keeps the block's output for the all-gather.
  if (point.tp > 1) bytes += block * h * e;
  // --a2a ipc: two pairs of a slot per rank of the group, each of a rank's every row.
  if (point.ipc_a2a) bytes += 2.0 * point.ep * rows * h * e;
  if (check) bytes += static_cast<double>(m.layers) * layer_bytes(static_cast<double>(m.experts));
  return bytes;
}

MoePoint::MoePoint(JobContext& job, const PointSpec& point, const GridComms& comms,
                   Backend& backend, OpTable& ops, bool check)
    : m_point(point) {
  const GridCoords& gc = comms.grid->coords();
  const int ep = point.ep, tp = point.tp;
  // An EP group is ep consecutive places of the stage (pp 1: the world's ranks).
  const int index = stage_place(gc, tp);
  RIDGELINE_CHECK(MPI_Comm_split(comms.grid->world(), index / ep, index, &m_group));
  const int64_t tokens = point.shape.tokens() / tp; // this rank's block of its TP group's
  if (ep > 1) m_comm = job.make_communicator(m_group, point_nccl(point));
  if (ep > 1 && point.ipc_a2a) {
    // A slot per peer holds the most rows one rank can send one peer: all of its own.
    const size_t block = static_cast<size_t>(tokens * point.model.top_k * point.model.hidden) *
                         dtype_size(point.dtype);
    m_comm =
        make_ipc_communicator(std::move(m_comm), nullptr, {}, make_ipc_all_to_all(m_group, block));
  }
  m_input = gc.dp_rank; // the TP group's tokens
  EpMoeSpec spec;
  spec.model = point.model;
  spec.routing = point.routing;
  // Each rank draws its own tokens' experts: EP rank r with the seed + r.
  const uint64_t base = point.routing.seed;
  spec.routing.seed = base + static_cast<uint64_t>(index % ep);
  spec.ep = ep;
  spec.ep_rank = index % ep;
  spec.first_layer = gc.pp_rank * point.stage_layers();
  spec.num_layers = point.stage_layers();
  spec.tokens = tokens;
  spec.seed = point.seed;
  // The layer's ops in the op table in the order they run, before the stage adds its own.
  const MoeLoad uniform =
      moe_load(route_uniform(tokens * ep, point.model.experts, point.model.top_k), ep);
  for (const OpSpec& o : moe_layer_ops(point.model, point.shape, AttentionImpl::fused, uniform))
    ops.intern(o.name, o.kind);
  m_moe = std::make_unique<EpMoe>(backend, m_comm.get(), m_group, spec);
  if (!check) return;
  EpMoeSpec whole = spec;
  whole.ep = 1;
  whole.ep_rank = 0;
  whole.first_layer = 0;
  whole.num_layers = point.model.layers;
  whole.tokens = point.shape.tokens();
  // The TP group's tokens in the blocks its ranks route, each with that rank's seed.
  if (tp > 1)
    for (int t = 0; t < tp; ++t)
      whole.block_seeds.push_back(
          base +
          static_cast<uint64_t>(stage_place(GridCoords{t, gc.pp_rank, gc.dp_rank}, tp) % ep));
  m_reference = std::make_unique<EpMoe>(backend, nullptr, MPI_COMM_SELF, whole);
}

MoePoint::~MoePoint() {
  m_reference.reset();
  m_moe.reset();
  m_comm.reset();
  if (m_group != MPI_COMM_NULL) RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(&m_group));
}

void MoePoint::prime(TpStage& stage, Backend& backend, OpTable& ops) {
  Recorder silent(backend.clock(), ops);
  silent.set_enabled(false);
  stage.fill_input(m_input);
  stage.forward(silent);
  backend.synchronize();
  m_load = m_moe->group_load(0);
  m_moe->set_costs(moe_work(m_point.model, m_load, m_point.dtype));
}

std::vector<OpSpec> MoePoint::layer_ops(const LayerShape& shape, AttentionImpl attention) const {
  return moe_layer_ops(m_point.model, shape, attention, m_load);
}

Attrs MoePoint::attrs(const std::vector<double>& steps, bool print) const {
  const double mean = steps.empty() ? 1.0
                                    : std::accumulate(steps.begin(), steps.end(), 0.0) /
                                          static_cast<double>(steps.size());
  const double most = steps.empty() ? 1.0 : *std::max_element(steps.begin(), steps.end());
  const MoeWork work = moe_work(m_point.model, m_load, m_point.dtype);
  const RoutingControl& r = m_point.routing;
  std::string routing = routing_mode_name(r.mode);
  if (r.mode == RoutingMode::zipf) {
    char s[32];
    std::snprintf(s, sizeof(s), ":%g", r.zipf_s);
    routing += s;
  }
  if (print) {
    std::printf(
        "ridgeline: MoE ep %d, routing %s: rows per EP rank max / mean %.3f (mean over "
        "%zu layer steps; max %.3f), per expert %.3f; dispatch %.0f B on the busiest rank\n",
        m_point.ep, routing.c_str(), mean, steps.size(), most, m_load.expert_imbalance(),
        work.dispatch.comm_bytes);
    std::fflush(stdout);
  }
  return {{"moe_ep", static_cast<int64_t>(m_point.ep)},
          {"moe_a2a", std::string(m_point.ipc_a2a ? "ipc" : "nccl")},
          {"moe_routing", routing},
          {"moe_routing_seed", static_cast<int64_t>(r.seed)},
          {"moe_rank_imbalance", mean},
          {"moe_rank_imbalance_max", most},
          {"moe_imbalance_steps", static_cast<int64_t>(steps.size())},
          {"moe_expert_imbalance", m_load.expert_imbalance()},
          {"moe_dispatch_bytes", work.dispatch.comm_bytes},
          {"moe_dispatch_mean_bytes", work.dispatch_mean_bytes}};
}

} // namespace ridgeline
