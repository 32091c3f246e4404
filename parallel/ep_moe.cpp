// The expert-parallel MoE MLP (see ep_moe.hpp).
#include "parallel/ep_moe.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace ridgeline {
namespace {

// Rows to elements of `hidden` each.
std::vector<size_t> elements(const std::vector<int64_t>& rows, int64_t hidden) {
  std::vector<size_t> out;
  for (int64_t r : rows)
    out.push_back(static_cast<size_t>(r * hidden));
  return out;
}

} // namespace

EpMoe::EpMoe(Backend& backend, Communicator* ep_comm, MPI_Comm counts, const EpMoeSpec& spec)
    : m_backend(backend), m_comm(ep_comm), m_counts(counts), m_spec(spec) {
  const ModelSpec& m = spec.model;
  RIDGELINE_REQUIRE(m.moe() && spec.ep >= 1 && m.experts % spec.ep == 0 && spec.ep_rank >= 0 &&
                        spec.ep_rank < spec.ep,
                    "EpMoe: the experts must split evenly over the expert-parallel group");
  RIDGELINE_REQUIRE(spec.ep == 1 || (ep_comm != nullptr && ep_comm->size() == spec.ep &&
                                     ep_comm->rank() == spec.ep_rank),
                    "EpMoe: expert parallelism needs a communicator over the group");
  const int64_t local = m.experts / spec.ep;
  for (int64_t l = 0; l < spec.num_layers; ++l)
    m_weights.push_back(
        make_moe_weights(backend, m, spec.first_layer + l, spec.seed, spec.ep_rank * local, local));
  RIDGELINE_REQUIRE(spec.block_seeds.empty() || spec.ep == 1,
                    "EpMoe: only a one-rank layer routes its tokens in blocks");
  m_routings.resize(static_cast<size_t>(spec.num_layers));
  if (spec.ep > 1) {
    const int64_t rows = spec.tokens * m.top_k;
    m_send = backend.allocate(rows, m.hidden);
    m_recv = backend.allocate(spec.ep * rows, m.hidden);
  }
}

void EpMoe::forward(Recorder& rec, int64_t layer, const Tensor& x, Tensor y) {
  const ModelSpec& m = m_spec.model;
  const size_t l = static_cast<size_t>(layer - m_spec.first_layer);
  const int32_t at = static_cast<int32_t>(layer);
  const MoeWeights& w = m_weights[l];
  OpTable& table = rec.ops();
  const int32_t router = intern_op(table, layer_op::op_moe_router),
                experts = intern_op(table, layer_op::op_moe_experts);
  if (!m_spec.block_seeds.empty()) {
    forward_blocks(rec, experts, l, w, x, y);
    return;
  }
  MoeStep step;
  {
    const ScopedOp op(rec, router, at, Lane::compute, m_work.router, Lane::compute);
    step = moe_route(m_backend, m, w, x, m_spec.routing, &m_scratch);
  }
  m_routings[l] = step.routing;
  if (m.shared_experts > 0) {
    const ScopedOp op(rec, intern_op(table, layer_op::op_moe_shared), at, Lane::compute,
                      m_work.shared, Lane::compute);
    moe_shared(m_backend, m, w, x, y, &m_scratch);
  } else {
    m_backend.fill_value(y, 0.0f); // the routed rows are added to it
  }
  if (m_spec.ep == 1) {
    const ScopedOp op(rec, experts, at, Lane::compute, m_work.experts, Lane::compute);
    moe_routed(m_backend, m, w, x, y, step, &m_scratch);
    m_rows.push_back(x.rows * m.top_k);
    return;
  }
  const DType dt = m_backend.dtype();
  const int64_t h = m.hidden, le = m.experts / m_spec.ep;
  const Stream stream = m_backend.stream(Lane::compute);
  const Tensor sent = m_send.view(x.rows * m.top_k, h, dt);
  EpExchange plan;
  {
    // The dispatch: the counts (host), the rows packed in permuted order, the all-to-all-v.
    const ScopedOp op(rec, intern_op(table, layer_op::op_moe_dispatch), at, Lane::comm,
                      m_work.dispatch, Lane::compute);
    const std::vector<int64_t> counts = dispatch_counts(step.permutation, m_spec.ep);
    std::vector<int64_t> received(counts.size());
    RIDGELINE_CHECK(MPI_Alltoall(counts.data(), static_cast<int>(le), MPI_INT64_T, received.data(),
                                 static_cast<int>(le), MPI_INT64_T, m_counts));
    plan = plan_exchange(step.permutation, m_spec.ep, m_spec.ep_rank, received);
    moe_gather(m_backend, m, x, step, 0, sent);
    m_comm->all_to_all_v(sent.data, elements(plan.send_counts, h), elements(plan.send_offsets, h),
                         m_recv.data(), elements(plan.recv_counts, h),
                         elements(plan.recv_offsets, h), dt, stream);
    m_comm->complete(stream);
  }
  const Tensor rows = m_recv.view(plan.received(), h, dt);
  {
    // The rows regrouped by expert, through the experts, and back in the order they came.
    const ScopedOp op(rec, experts, at, Lane::compute, m_work.experts, Lane::compute);
    const ExpertGroups g = group_by_expert(plan);
    const Tensor grouped = m_scratch.get(m_backend, MoeScratch::regrouped, rows.rows, h);
    m_backend.gather_rows(rows, g.order, grouped);
    moe_experts(m_backend, m, w, grouped, g.offsets, g.expert, &m_scratch);
    m_backend.gather_rows(grouped, g.inverse, rows);
  }
  {
    // The combine: every row back where it came from, then added to its token.
    const ScopedOp op(rec, intern_op(table, layer_op::op_moe_combine), at, Lane::comm,
                      m_work.combine, Lane::compute);
    m_comm->all_to_all_v(rows.data, elements(plan.recv_counts, h), elements(plan.recv_offsets, h),
                         sent.data, elements(plan.send_counts, h), elements(plan.send_offsets, h),
                         dt, stream);
    m_comm->complete(stream);
    moe_combine(m_backend, m, sent, step, 0, y);
  }
  m_rows.push_back(plan.received());
}

void EpMoe::forward_blocks(Recorder& rec, int32_t experts_op, size_t l, const MoeWeights& w,
                           const Tensor& x, Tensor y) {
  const ModelSpec& m = m_spec.model;
  const int32_t at = static_cast<int32_t>(m_spec.first_layer + static_cast<int64_t>(l));
  const int64_t blocks = static_cast<int64_t>(m_spec.block_seeds.size());
  RIDGELINE_REQUIRE(x.rows % blocks == 0, "EpMoe: the tokens do not split into the blocks");
  const int64_t rows = x.rows / blocks;
  if (m.shared_experts > 0)
    moe_shared(m_backend, m, w, x, y, &m_scratch);
  else
    m_backend.fill_value(y, 0.0f);
  // Each block routed with its own seed and through every expert: the rows of a token do not
  // depend on the rows beside it, so this is what the EP x TP layout computes block by block.
  const ScopedOp op(rec, experts_op, at, Lane::compute, m_work.experts, Lane::compute);
  Routing all;
  for (int64_t b = 0; b < blocks; ++b) {
    RoutingControl control = m_spec.routing;
    control.seed = m_spec.block_seeds[static_cast<size_t>(b)];
    const Tensor xb = x.rows_slice(b * rows, rows);
    const MoeStep step = moe_route(m_backend, m, w, xb, control, &m_scratch);
    moe_routed(m_backend, m, w, xb, y.rows_slice(b * rows, rows), step, &m_scratch);
    all.tokens += step.routing.tokens;
    all.experts = step.routing.experts;
    all.top_k = step.routing.top_k;
    all.expert.insert(all.expert.end(), step.routing.expert.begin(), step.routing.expert.end());
    all.weight.insert(all.weight.end(), step.routing.weight.begin(), step.routing.weight.end());
  }
  m_routings[l] = std::move(all);
  m_rows.push_back(x.rows * m.top_k);
}

MoeLoad EpMoe::group_load(size_t local_layer) const {
  const Routing& mine = m_routings[local_layer];
  const int ep = m_spec.ep;
  std::vector<int32_t> all(mine.expert.size() * static_cast<size_t>(ep));
  if (ep > 1)
    RIDGELINE_CHECK(MPI_Allgather(mine.expert.data(), static_cast<int>(mine.expert.size()),
                                  MPI_INT32_T, all.data(), static_cast<int>(mine.expert.size()),
                                  MPI_INT32_T, m_counts));
  else
    all = mine.expert;
  std::vector<Routing> routings(static_cast<size_t>(ep), mine);
  for (int i = 0; i < ep; ++i) {
    routings[static_cast<size_t>(i)].weight.clear();
    routings[static_cast<size_t>(i)].expert.assign(
        all.begin() + static_cast<std::ptrdiff_t>(i * mine.expert.size()),
        all.begin() + static_cast<std::ptrdiff_t>((i + 1) * mine.expert.size()));
  }
  return ep_load(routings);
}

std::vector<double> EpMoe::imbalance_history() const {
  const int ep = m_spec.ep;
  const size_t n = m_rows.size();
  std::vector<int64_t> all(n * static_cast<size_t>(ep));
  if (ep > 1)
    RIDGELINE_CHECK(MPI_Allgather(m_rows.data(), static_cast<int>(n), MPI_INT64_T, all.data(),
                                  static_cast<int>(n), MPI_INT64_T, m_counts));
  else
    all = m_rows;
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int64_t> ranks;
    for (int r = 0; r < ep; ++r)
      ranks.push_back(all[static_cast<size_t>(r) * n + i]);
    out.push_back(imbalance(ranks));
  }
  return out;
}

} // namespace ridgeline
