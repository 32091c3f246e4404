// The train phase's stage executor (see train_stage.hpp).
#include "parallel/train_stage.hpp"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>

#include "core/error.hpp"
#include "parallel/layer_op_index.hpp"
#include "parallel/train_stage_detail.hpp"

namespace ridgeline {
using namespace layer_op;
namespace {
// Gradient tensors start at multiples of this many elements (aligned for vector loads).
constexpr int64_t kAlign = 64;
int64_t aligned(int64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// Throws UsageError unless the train stage runs `overlap` on `shape`.
void require_runs(const Overlap& overlap, const LayerShape& shape) {
  if (!overlap_form(overlap.kind).scheduled_ok)
    throw UsageError("the train stage does not run --overlap " + overlap.name());
  const std::vector<std::string> problems = policy_problems(overlap, shape, StageExecutor::train);
  if (!problems.empty()) throw UsageError(problems.front());
}
} // namespace

std::vector<size_t> TrainStage::collective_buffers(const TrainSpec& spec, DType dtype) {
  if (spec.shape.tp == 1) return {};
  const LayerGeometry g = layer_geometry(spec.model, spec.shape, spec.tp_rank);
  const size_t row = static_cast<size_t>(g.hidden) * dtype_size(dtype);
  const size_t full = static_cast<size_t>(g.tokens) * row;
  const size_t stream = static_cast<size_t>(g.stream_tokens) * row;
  // proj, fc2, dln; under sequence parallelism also dy_full, dy1_full, ln_rows, rs_rows.
  if (!g.sequence_parallel) return {full, full, full};
  return {full, full, full, full, full, stream, stream};
}

double TrainStage::overlap_memory_bytes(const TrainSpec& spec, DType dtype, bool exchange) {
  double bytes = spec.symmetric_buffers
                     ? static_cast<double>(symmetric_block_bytes(collective_buffers(spec, dtype)))
                     : 0.0;
  if (exchange)
    for (size_t w : exchange_windows(spec, dtype))
      bytes += static_cast<double>(w);
  return bytes;
}

TrainStage::TrainStage(Backend& backend, Communicator* tp_comm, const TrainSpec& spec, OpTable& ops,
                       PeerExchange* exchange)
    : StageCore(backend, tp_comm, exchange, spec.shape.tp, spec.overlap), m_spec(spec) {
  const LayerShape& s = spec.shape;
  RIDGELINE_REQUIRE(s.phase == Phase::prefill, "the train phase runs prefill-shaped layers");
  RIDGELINE_REQUIRE(!spec.chunks.empty(), "a stage holds at least one chunk");
  m_geo = layer_geometry(spec.model, s, spec.tp_rank);
  RIDGELINE_REQUIRE(m_geo.stream_tokens * s.tp == m_geo.tokens || !m_geo.sequence_parallel,
                    "sequence parallelism needs the tokens of a microbatch to divide by tp");
  if (exchange && s.tp > 1)
    require_exchange_windows(exchange_windows(spec, backend.dtype()), spec.tp_rank);
  require_runs(spec.overlap, s);
  require_exchange(spec.overlap);
  m_plan = train_layer_plan(spec.model, s, spec.attention);
  m_op_index.bind(m_plan, ops);

  // Weights, chunk by chunk; gradients in one buffer in the order the backward finishes them
  // (last chunk's last layer first), so that the data-parallel buckets fill front to back.
  const int64_t h = m_geo.hidden;
  const int64_t sizes[8] = {
      h, h, h, h, m_geo.qkv_cols() * h, h * m_geo.q_cols(), m_geo.fc1_cols() * h, h * m_geo.ffn};
  int64_t per_layer = 0;
  for (int64_t n : sizes)
    per_layer += aligned(n);
  for (size_t c = 0; c < spec.chunks.size(); ++c) {
    m_chunk_first.push_back(m_weights.size());
    for (int64_t l = 0; l < spec.chunks[c].second; ++l) {
      m_global.push_back(spec.chunks[c].first + l);
      m_weights.push_back(make_layer_weights(backend, spec.model, m_geo, m_global.back(),
                                             spec.tp_rank, spec.seed, m_allocated));
    }
  }
  const size_t layers = m_weights.size();
  const int64_t total = per_layer * static_cast<int64_t>(layers);
  m_grad_buf = alloc(total / kAlign, kAlign);
  const DType dt = backend.dtype();
  const size_t e = dtype_size(dt);
  m_grads.resize(layers);
  m_grad_range.resize(layers);
  int64_t off = 0;
  for (size_t i = layers; i-- > 0;) {
    m_grad_range[i].first = static_cast<size_t>(off) * e;
    LayerGrads& g = m_grads[i];
    Tensor* parts[8] = {&g.ln1_gamma, &g.ln1_beta, &g.ln2_gamma, &g.ln2_beta,
                        &g.wqkv,      &g.wo,       &g.w1,        &g.w2};
    const int64_t rows[8] = {1, 1, 1, 1, m_geo.qkv_cols(), h, m_geo.fc1_cols(), h};
    for (int p = 0; p < 8; ++p) {
      const int64_t cols = sizes[p] / rows[p];
      *parts[p] = Tensor{static_cast<char*>(m_grad_buf.data()) + static_cast<size_t>(off) * e,
                         rows[p], cols, cols, dt};
      off += aligned(sizes[p]);
    }
    m_grad_range[i].second = static_cast<size_t>(off) * e;
  }
  m_free.resize(spec.chunks.size());

  // Shared buffers.
  const int64_t t = m_geo.tokens, ts = m_geo.stream_tokens;
  m_scratch = std::make_unique<Scratch>();
  Scratch& sc = *m_scratch;
  sc.proj = alloc(t, h);
  sc.fc2 = alloc(t, h);
  sc.dtmp = alloc(ts, h);
  sc.dact = alloc(t, m_geo.ffn);
  sc.dattn = alloc(t, m_geo.q_cols());
  sc.dln = alloc(t, h);
  sc.ping = alloc(ts, h);
  sc.pong = alloc(ts, h);
  if (m_geo.sequence_parallel) {
    sc.ln_rows = alloc(ts, h);
    sc.rs_rows = alloc(ts, h);
    sc.dy_full = alloc(t, h);
  }
  sc.acts.dy1_buf = alloc(t, h);
  sc.acts.dfc1_buf = alloc(t, m_geo.fc1_cols());
  sc.acts.dqkv_buf = alloc(t, m_geo.qkv_cols());
  sc.acts.dy1 = sc.acts.dy1_buf.view(t, h, dt);
  sc.acts.dfc1 = sc.acts.dfc1_buf.view(t, m_geo.fc1_cols(), dt);
  sc.acts.dqkv = sc.acts.dqkv_buf.view(t, m_geo.qkv_cols(), dt);
  m_plain = {sc.proj.data(),   sc.fc2.data(),     sc.dln.data(),    sc.dy_full.data(),
             sc.acts.dy1.data, sc.ln_rows.data(), sc.rs_rows.data()};
  m_symm = m_plain;
  // In collective_buffers()' order.
  if (spec.symmetric_buffers)
    m_allocated += m_lanes.place_symmetric(collective_buffers(m_spec, backend.dtype()),
                                           {&m_symm.proj, &m_symm.fc2, &m_symm.dln, &m_symm.dy_full,
                                            &m_symm.dy1_full, &m_symm.ln_rows, &m_symm.rs_rows});
}

TrainStage::~TrainStage() = default;

void TrainStage::set_variant(AttentionImpl attention, const Overlap& overlap) {
  require_runs(overlap, m_spec.shape);
  use_overlap(overlap);
  m_spec.attention = attention;
  m_spec.overlap = overlap;
  // The same ops in the same order (their ids stay); the naive attention's costs differ (it
  // writes its score matrices). Assigned entry by entry, where m_op_index points.
  const std::vector<OpSpec> plan = train_layer_plan(m_spec.model, m_spec.shape, attention);
  RIDGELINE_REQUIRE(plan.size() == m_plan.size(), "the layer plan keeps its ops");
  std::copy(plan.begin(), plan.end(), m_plan.begin());
}

TrainStage::Slot& TrainStage::slot(int microbatch, int chunk) {
  auto& live = m_live[{microbatch, chunk}];
  if (live) return *live;
  auto& pool = m_free[static_cast<size_t>(chunk)];
  if (!pool.empty()) {
    live = std::move(pool.back());
    pool.pop_back();
  } else {
    live = new_slot(chunk);
  }
  m_live_bytes += live->bytes;
  m_peak_bytes = std::max(m_peak_bytes, m_live_bytes);
  return *live;
}

// A new activation set: the layers' saved tensors (only each layer's input under recompute) and
// the chunk's boundary tensors.
std::unique_ptr<TrainStage::Slot> TrainStage::new_slot(int chunk) {
  const size_t before = m_allocated;
  auto s = std::make_unique<Slot>();
  const DType dt = m_backend.dtype();
  const int64_t ts = m_geo.stream_tokens, h = m_geo.hidden;
  const int64_t count = m_spec.chunks[static_cast<size_t>(chunk)].second;
  s->layers.resize(static_cast<size_t>(count));
  for (LayerActs& a : s->layers) {
    a.x_buf = alloc(ts, h);
    a.x = a.x_buf.view(ts, h, dt);
    if (!m_spec.recompute) allocate_saved(a);
  }
  s->out_buf = alloc(ts, h);
  s->grad_in_buf = alloc(ts, h);
  s->grad_out_buf = alloc(ts, h);
  s->out = s->out_buf.view(ts, h, dt);
  s->grad_in = s->grad_in_buf.view(ts, h, dt);
  s->grad_out = s->grad_out_buf.view(ts, h, dt);
  s->bytes = m_allocated - before;
  return s;
}

void TrainStage::reserve(int chunk, int sets) {
  auto& pool = m_free[static_cast<size_t>(chunk)];
  int held = static_cast<int>(pool.size());
  for (const auto& kv : m_live)
    held += kv.first.second == chunk ? 1 : 0;
  for (; held < sets; ++held)
    pool.push_back(new_slot(chunk));
}

void TrainStage::release(int microbatch, int chunk) {
  auto it = m_live.find({microbatch, chunk});
  RIDGELINE_REQUIRE(it != m_live.end(), "release of a microbatch that holds no activations");
  m_live_bytes -= it->second->bytes;
  m_free[static_cast<size_t>(chunk)].push_back(std::move(it->second));
  m_live.erase(it);
}

Tensor TrainStage::activation_in(int microbatch, int chunk) {
  return slot(microbatch, chunk).layers.front().x;
}
Tensor TrainStage::activation_out(int microbatch, int chunk) {
  return slot(microbatch, chunk).out;
}
Tensor TrainStage::gradient_in(int microbatch, int chunk) {
  return slot(microbatch, chunk).grad_in;
}
Tensor TrainStage::gradient_out(int microbatch, int chunk) {
  return slot(microbatch, chunk).grad_out;
}

std::vector<std::pair<int64_t, int64_t>> TrainStage::row_blocks(int64_t global_mb) const {
  const int64_t first = global_mb * m_geo.tokens;
  if (!m_geo.sequence_parallel) return {{first, m_geo.tokens}};
  const int units = row_units();
  const int64_t unit = m_geo.tokens / units, piece = unit / m_spec.shape.tp;
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (int u = 0; u < units; ++u)
    blocks.emplace_back(first + u * unit + m_spec.tp_rank * piece, piece);
  return blocks;
}

void TrainStage::fill_rows(Tensor t, const GenKey& key, int64_t global_mb) {
  int64_t row = 0;
  for (const auto& [first, rows] : row_blocks(global_mb)) {
    m_backend.fill_random(t.rows_slice(row, rows), key, first, 0);
    row += rows;
  }
}

void TrainStage::fill_input(int microbatch, int chunk, int64_t global_mb) {
  const GenKey key{m_spec.seed, tensor_id(-1, role_input), m_geo.hidden, 1.0f};
  fill_rows(activation_in(microbatch, chunk), key, global_mb);
}

void TrainStage::fill_grad_output(int microbatch, int chunk, int64_t global_mb) {
  const GenKey key{m_spec.seed, tensor_id(-1, role_grad_output), m_geo.hidden, 1.0f};
  fill_rows(gradient_in(microbatch, chunk), key, global_mb);
}

void TrainStage::allocate_saved(LayerActs& a) {
  const DType dt = m_backend.dtype();
  const int64_t t = m_geo.tokens, h = m_geo.hidden;
  a.ln1_buf = alloc(t, h);
  a.qkv_buf = alloc(t, m_geo.qkv_cols());
  a.attn_buf = alloc(t, m_geo.q_cols());
  a.lse_buf = m_backend.allocate_bytes(
      static_cast<size_t>(m_spec.shape.batch * m_geo.heads * m_spec.shape.seq) * 4);
  m_allocated += a.lse_buf.bytes();
  a.y1_buf = alloc(m_geo.stream_tokens, h);
  a.ln2_buf = alloc(t, h);
  a.fc1_buf = alloc(t, m_geo.fc1_cols());
  a.act_buf = alloc(t, m_geo.ffn);
  a.ln1 = a.ln1_buf.view(t, h, dt);
  a.qkv = a.qkv_buf.view(t, m_geo.qkv_cols(), dt);
  a.attn = a.attn_buf.view(t, m_geo.q_cols(), dt);
  a.lse = a.lse_buf.data();
  a.y1 = a.y1_buf.view(m_geo.stream_tokens, h, dt);
  a.ln2 = a.ln2_buf.view(t, h, dt);
  a.fc1 = a.fc1_buf.view(t, m_geo.fc1_cols(), dt);
  a.act = a.act_buf.view(t, m_geo.ffn, dt);
}

TrainStage::LayerActs& TrainStage::recompute_acts() {
  LayerActs& r = m_scratch->acts;
  if (r.ln1_buf.data()) return r;
  allocate_saved(r);
  r.x_buf = alloc(m_geo.stream_tokens, m_geo.hidden); // the recomputed layer's output, unread
  return r;
}

void TrainStage::forward(Recorder& rec, int microbatch, int chunk) {
  Slot& sl = slot(microbatch, chunk);
  const size_t first = m_chunk_first[static_cast<size_t>(chunk)];
  const size_t n = sl.layers.size();
  rec.set_microbatch(microbatch);
  for (size_t l = 0; l < n; ++l) {
    const Tensor y = l + 1 < n ? sl.layers[l + 1].x : sl.out;
    if (!m_spec.recompute) {
      forward_layer(rec, first + l, sl.layers[l], y);
      continue;
    }
    // Only each layer's input is kept; the rest goes to shared buffers.
    LayerActs& r = recompute_acts();
    r.x = sl.layers[l].x;
    forward_layer(rec, first + l, r, y);
  }
}

void TrainStage::backward_input(Recorder& rec, int microbatch, int chunk) {
  Slot& sl = slot(microbatch, chunk);
  const size_t first = m_chunk_first[static_cast<size_t>(chunk)];
  const size_t n = sl.layers.size();
  rec.set_microbatch(microbatch);
  const DType dt = m_backend.dtype();
  const int64_t t = m_geo.tokens, ts = m_geo.stream_tokens, h = m_geo.hidden;
  // Deferred weight gradients keep each layer's output gradient: layer l's dx is written
  // straight into layer l - 1's dy buffer (and, under sequence parallelism, gathered into its
  // dyg buffer, which the weight gradient reads).
  for (size_t l = 0; l < n; ++l) {
    LayerActs& a = sl.layers[l];
    if (!a.dy1_buf.data()) {
      const size_t before = m_allocated;
      if (l + 1 < n) a.dy_buf = alloc(ts, h);
      if (m_geo.sequence_parallel) a.dyg_buf = alloc(t, h);
      a.dy1_buf = alloc(t, h);
      a.dfc1_buf = alloc(t, m_geo.fc1_cols());
      a.dqkv_buf = alloc(t, m_geo.qkv_cols());
      // The set grows by what the deferred weight gradients keep, from now on.
      const size_t kept = m_allocated - before;
      sl.bytes += kept;
      m_live_bytes += kept;
      m_peak_bytes = std::max(m_peak_bytes, m_live_bytes);
      a.dy1 = a.dy1_buf.view(t, h, dt);
      a.dfc1 = a.dfc1_buf.view(t, m_geo.fc1_cols(), dt);
      a.dqkv = a.dqkv_buf.view(t, m_geo.qkv_cols(), dt);
    }
  }
  for (size_t l = n; l-- > 0;) {
    LayerActs& a = sl.layers[l];
    const Tensor dy = l + 1 == n ? sl.grad_in : a.dy_buf.view(ts, h, dt);
    const Tensor dx = l == 0 ? sl.grad_out : sl.layers[l - 1].dy_buf.view(ts, h, dt);
    backward_layer_input(rec, first + l, a, &a, dy, dx);
  }
}

void TrainStage::backward_weight(Recorder& rec, int microbatch, int chunk) {
  Slot& sl = slot(microbatch, chunk);
  const size_t first = m_chunk_first[static_cast<size_t>(chunk)];
  rec.set_microbatch(microbatch);
  for (size_t l = sl.layers.size(); l-- > 0;) {
    backward_layer_weight(rec, first + l, sl.layers[l]);
    layer_done(rec, first + l);
  }
}

void TrainStage::backward(Recorder& rec, int microbatch, int chunk) {
  Slot& sl = slot(microbatch, chunk);
  const size_t first = m_chunk_first[static_cast<size_t>(chunk)];
  const size_t n = sl.layers.size();
  rec.set_microbatch(microbatch);
  const DType dt = m_backend.dtype();
  const int64_t ts = m_geo.stream_tokens, h = m_geo.hidden;
  Tensor dy = sl.grad_in;
  for (size_t l = n; l-- > 0;) {
    // Gradients pass between layers through two alternating buffers.
    const Tensor dx =
        l == 0 ? sl.grad_out
               : ((n - 1 - l) % 2 == 0 ? m_scratch->ping : m_scratch->pong).view(ts, h, dt);
    LayerActs* a = &sl.layers[l];
    if (m_spec.recompute) {
      // The layer's forward again from its kept input, into the shared activations.
      LayerActs& r = recompute_acts();
      r.x = a->x;
      forward_layer(rec, first + l, r, r.x_buf.view(ts, h, dt));
      a = &r;
    }
    backward_layer_input(rec, first + l, *a, nullptr, dy, dx);
    layer_done(rec, first + l);
    dy = dx;
  }
}

void TrainStage::begin_iteration(Recorder& rec, int microbatches) {
  m_microbatches = microbatches;
  m_weight_passes.assign(m_weights.size(), 0);
  m_buckets_issued = 0;
  // Buckets: the gradient buffer cut into pieces of at most bucket_bytes (a multiple of the
  // replicas' count of alignment units, so that a reduce-scatter splits each evenly).
  m_buckets.clear();
  const size_t e = dtype_size(m_backend.dtype());
  const size_t total = m_grad_buf.bytes();
  const int dp = m_dp.comm ? m_dp.comm->size() : 1;
  const size_t unit = static_cast<size_t>(kAlign) * e * static_cast<size_t>(dp);
  const size_t step = std::max(unit, m_dp.bucket_bytes / unit * unit);
  for (size_t b = 0; b < total; b += step)
    m_buckets.emplace_back(b, std::min(total, b + step));
  const int32_t id = intern_op(rec.ops(), layer_op::op_grad_zero);
  const Tensor all =
      m_grad_buf.view(static_cast<int64_t>(total / e) / kAlign, kAlign, m_backend.dtype());
  const ScopedOp scope(rec, id, -1, Lane::compute, OpCost{0, static_cast<double>(total), 0},
                       Lane::compute);
  m_backend.fill_value(all, 0.0f);
}

void TrainStage::layer_done(Recorder& rec, size_t local) {
  ++m_weight_passes[local];
  if (m_geo.sequence_parallel && m_weight_passes[local] == m_microbatches) {
    // Each rank's norm gradients cover its own rows: summed over the TP group once final, before
    // a data-parallel bucket takes them. ln1_gamma .. ln2_beta are contiguous in the buffer.
    const LayerGrads& g = m_grads[local];
    const size_t count = static_cast<size_t>(
        (static_cast<char*>(g.wqkv.data) - static_cast<char*>(g.ln1_gamma.data)) /
        static_cast<std::ptrdiff_t>(dtype_size(g.wqkv.dtype)));
    const int32_t id = intern_op(rec.ops(), layer_op::op_allreduce_norm_grads);
    const double bytes = static_cast<double>(count * dtype_size(g.wqkv.dtype));
    const ScopedOp scope(rec, id, static_cast<int32_t>(m_global[local]), Lane::comm,
                         OpCost{bytes, 2.0 * bytes, bytes}, Lane::compute);
    const Stream stream = m_backend.stream(Lane::compute);
    m_comm->all_reduce(g.ln1_gamma.data, g.ln1_gamma.data, count, g.wqkv.dtype, ReduceOp::sum,
                       stream);
    m_comm->complete(stream);
  }
  if (m_dp.overlap) issue_buckets(rec, false);
}

// Issues, in order, every bucket whose layers' gradients are final (all of them with `all`).
// Every replica runs the same schedule, so every replica issues the same sequence.
void TrainStage::issue_buckets(Recorder& rec, bool all) {
  if (!m_dp.comm || m_dp.comm->size() == 1) return;
  const size_t e = dtype_size(m_backend.dtype());
  const DType dt = m_backend.dtype();
  const int dp = m_dp.comm->size();
  const int32_t id =
      intern_op(rec.ops(), m_dp.shard ? layer_op::op_dp_reducescatter : layer_op::op_dp_allreduce);
  while (m_buckets_issued < m_buckets.size()) {
    const auto [begin, end] = m_buckets[m_buckets_issued];
    bool ready = all;
    if (!ready) {
      ready = true;
      for (size_t i = 0; i < m_grad_range.size(); ++i)
        if (m_grad_range[i].first < end && m_grad_range[i].second > begin &&
            m_weight_passes[i] < m_microbatches)
          ready = false;
    }
    if (!ready) return;
    ++m_buckets_issued;
    const size_t count = (end - begin) / e;
    char* data = static_cast<char*>(m_grad_buf.data()) + begin;
    // On the comm lane, after the gradients the compute lane has produced so far.
    m_backend.wait_fence(Lane::comm, m_backend.fence(Lane::compute));
    const double bytes = static_cast<double>(end - begin);
    const ranges::Scope range(rec.ops().name(id));
    const size_t handle =
        rec.begin(id, -1, Lane::comm, OpCost{bytes, 2.0 * bytes, bytes}, Lane::comm);
    const Stream stream = m_backend.stream(Lane::comm);
    if (m_dp.shard) {
      // Each replica's share of the summed bucket lands in place, at its block.
      const size_t share = count / static_cast<size_t>(dp);
      m_dp.comm->reduce_scatter(data, data + static_cast<size_t>(m_dp.comm->rank()) * share * e,
                                share, dt, ReduceOp::sum, stream);
    } else {
      m_dp.comm->all_reduce(data, data, count, dt, ReduceOp::sum, stream);
    }
    if (m_dp.comm->stream_ordered())
      rec.end(handle);
    else
      m_dp_open.push_back(handle);
  }
}

void TrainStage::end_iteration(Recorder& rec, float sgd_lr, bool gather_shards) {
  issue_buckets(rec, true);
  if (m_dp.comm && m_dp.comm->size() > 1) {
    const Stream stream = m_backend.stream(Lane::comm);
    m_dp.comm->complete(stream);
    for (size_t handle : m_dp_open)
      rec.end(handle);
    m_dp_open.clear();
    if (m_dp.shard && gather_shards) {
      // Every replica's share back into place, so that whole gradients can be checked.
      const size_t e = dtype_size(m_backend.dtype());
      const auto dp = static_cast<size_t>(m_dp.comm->size());
      for (const auto& [begin, end] : m_buckets) {
        const size_t share = (end - begin) / e / dp;
        char* data = static_cast<char*>(m_grad_buf.data()) + begin;
        m_dp.comm->all_gather(data + static_cast<size_t>(m_dp.comm->rank()) * share * e, data,
                              share, m_backend.dtype(), stream);
      }
      m_dp.comm->complete(stream);
    }
    m_backend.wait_fence(Lane::compute, m_backend.fence(Lane::comm));
  }
  if (sgd_lr == 0.0f) return;
  const DType dt = m_backend.dtype();
  const int32_t id = intern_op(rec.ops(), layer_op::op_sgd_update);
  const double bytes = 3.0 * static_cast<double>(m_grad_buf.bytes());
  const ScopedOp scope(rec, id, -1, Lane::compute,
                       OpCost{bytes / 3.0 * 2.0 / static_cast<double>(dtype_size(dt)), bytes, 0},
                       Lane::compute);
  for (size_t i = 0; i < m_weights.size(); ++i) {
    const LayerWeights& w = m_weights[i];
    const LayerGrads& g = m_grads[i];
    const std::pair<const Tensor*, const Buffer*> pairs[] = {{&g.ln1_gamma, &w.ln1_gamma},
                                                             {&g.ln1_beta, &w.ln1_beta},
                                                             {&g.ln2_gamma, &w.ln2_gamma},
                                                             {&g.ln2_beta, &w.ln2_beta},
                                                             {&g.wqkv, &w.wqkv},
                                                             {&g.wo, &w.wo},
                                                             {&g.w1, &w.w1},
                                                             {&g.w2, &w.w2}};
    for (const auto& [grad, weight] : pairs)
      m_backend.axpy(-sgd_lr, *grad, weight->view(grad->rows, grad->cols, dt));
  }
}

} // namespace ridgeline
