// The analytic model (see predictor.hpp).
#include "models/predictor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "models/layer_plan.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

const LinkPreset* HardwareSpec::link(const std::string& wanted) const {
  for (const LinkPreset& l : links)
    if (l.name == wanted) return &l;
  return nullptr;
}

Roofs roofs_from_hardware(const HardwareSpec& hw) {
  Roofs r;
  r.backend = "cuda";
  r.source = hw.name + ": " + hw.source + " (derated: compute x" +
             std::to_string(hw.compute_achievable).substr(0, 4) + ", HBM x" +
             std::to_string(hw.hbm_achievable).substr(0, 4) + ")";
  const std::pair<const char*, double> peaks[] = {
      {"bf16", hw.bf16_tflops}, {"fp16", hw.fp16_tflops}, {"fp32", hw.fp32_tflops}};
  for (const auto& [dtype, tflops] : peaks) {
    if (tflops <= 0) continue;
    GemmRoof g;
    g.dtype = dtype;
    g.label = "data sheet";
    g.tflops = tflops * hw.compute_achievable;
    r.gemm.push_back(g);
  }
  for (const char* kind : {"read", "write", "copy"}) {
    MemoryRoof m;
    m.kind = kind;
    m.gbps = hw.hbm_gbps * hw.hbm_achievable;
    r.memory.push_back(m);
  }
  LaunchRoof eager, graph;
  eager.kind = "eager";
  eager.ns_per_launch = hw.launch_eager_ns;
  graph.kind = "graph_node";
  graph.ns_per_launch = hw.launch_graph_node_ns;
  r.launch = {eager, graph};
  return r;
}

double memory_time_ns(const Roofs& roofs, double bytes) {
  if (bytes <= 0) return 0;
  std::vector<const MemoryRoof*> rows;
  for (const MemoryRoof& m : roofs.memory)
    if (m.kind == "read" && m.bytes > 0 && m.best_ns > 0) rows.push_back(&m);
  if (rows.size() < 2) {
    // A single size (or a description's bandwidth): bytes over the best bandwidth.
    double best = 0;
    for (const MemoryRoof& m : roofs.memory)
      best = std::max(best, m.gbps);
    return best > 0 ? bytes / best : 0;
  }
  std::sort(rows.begin(), rows.end(),
            [](const MemoryRoof* a, const MemoryRoof* b) { return a->bytes < b->bytes; });
  if (bytes <= static_cast<double>(rows.front()->bytes)) return rows.front()->best_ns;
  if (bytes >= static_cast<double>(rows.back()->bytes)) return bytes / rows.back()->gbps;
  for (size_t i = 1; i < rows.size(); ++i) {
    const double b0 = static_cast<double>(rows[i - 1]->bytes);
    const double b1 = static_cast<double>(rows[i]->bytes);
    if (bytes > b1) continue;
    const double f = (bytes - b0) / (b1 - b0);
    return rows[i - 1]->best_ns + f * (rows[i]->best_ns - rows[i - 1]->best_ns);
  }
  return bytes / rows.back()->gbps;
}

double gemm_rate_tflops(const Roofs& roofs, DType dtype, int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0 || k <= 0) return roofs.peak_tflops(dtype);
  const std::string name = dtype_name(dtype);
  const GemmRoof* nearest = nullptr;
  double best = std::numeric_limits<double>::infinity();
  auto lr = [](int64_t a, int64_t b) {
    return std::fabs(std::log(static_cast<double>(a) / static_cast<double>(b)));
  };
  // A shape whose FLOPs per byte fall below the ridge (peak rate over HBM bandwidth) was bound
  // by memory where it was measured: its rate is no compute ceiling, for itself or any other
  // shape (a decode GEMM of one row measured at 2 TFLOP/s would make the same GEMM of 16 rows
  // take 16 times as long). Its time comes from the memory roof instead.
  const double hbm = roofs.hbm_gbps();
  const double ridge = hbm > 0 ? 1e3 * roofs.peak_tflops(dtype) / hbm : 0.0;
  const double e = static_cast<double>(dtype_size(dtype));
  auto intensity = [e](const GemmRoof& g) {
    const OpCost c =
        gemm_cost(static_cast<double>(g.m), static_cast<double>(g.n), static_cast<double>(g.k), e);
    return c.flops / c.hbm_bytes;
  };
  for (const GemmRoof& g : roofs.gemm) {
    if (g.dtype != name || g.tflops <= 0) continue;
    if (g.m > 0 && intensity(g) < ridge) continue;
    // A description's row has no shape: it stands for every shape.
    const double d = g.m > 0 ? lr(m, g.m) + lr(n, g.n) + lr(k, g.k) : 0.0;
    if (d < best) best = d, nearest = &g;
  }
  return nearest != nullptr ? nearest->tflops : roofs.peak_tflops(dtype);
}

double link_collective_ns(const LinkPreset& link, double comm_bytes, double busbw_factor) {
  const double bw = link.bandwidth_gbps * link.achievable;
  return link.latency_us * 1e3 + (bw > 0 ? comm_bytes * busbw_factor / bw : 0.0);
}

double pipeline_bubble(int pp, int64_t microbatches) {
  const double p = static_cast<double>(pp), m = static_cast<double>(microbatches);
  return (p - 1.0) / (m + p - 1.0);
}

double dp_gradient_ns(double bytes, int dp, const LinkPreset& link) {
  if (dp <= 1) return 0;
  const double n = static_cast<double>(dp);
  return link_collective_ns(link, bytes, 2.0 * (n - 1.0) / n);
}

std::vector<double> gradient_buckets(double bytes, double bucket_bytes) {
  std::vector<double> buckets;
  if (bytes <= 0) return buckets;
  if (bucket_bytes <= 0) return {bytes};
  for (double at = 0; at < bytes; at += bucket_bytes)
    buckets.push_back(std::min(bucket_bytes, bytes - at));
  return buckets;
}

std::vector<double> bucket_ready_before_end_ns(const std::vector<double>& buckets, int64_t layers,
                                               double layer_backward_ns) {
  double total = 0;
  for (double b : buckets)
    total += b;
  const double n = static_cast<double>(std::max<int64_t>(1, layers));
  std::vector<double> ready;
  double end = 0;
  for (double b : buckets) {
    end += b;
    // The last layer the bucket touches (0 the first the backward finishes).
    const double last = std::min(n - 1, std::ceil(end / total * n - 1e-9) - 1);
    ready.push_back((n - 1 - std::max(0.0, last)) * layer_backward_ns);
  }
  return ready;
}

double exposed_after_end_ns(const std::vector<double>& bucket_ns,
                            const std::vector<double>& ready_before_end_ns) {
  double lane = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < bucket_ns.size(); ++i)
    lane = std::max(lane, -ready_before_end_ns[i]) + bucket_ns[i];
  return bucket_ns.empty() ? 0.0 : std::max(0.0, lane);
}

double launch_floor_ns(const Roofs& roofs, bool graphs) {
  double eager = 0, graph = 0;
  for (const LaunchRoof& l : roofs.launch) {
    if (l.kind == "eager") eager = l.ns_per_launch;
    if (l.kind == "graph_node") graph = l.ns_per_launch;
  }
  return graphs && graph > 0 ? graph : eager;
}

namespace {

/// alpha_us + bus_bytes / beta_gbps in ns (an infinite beta: the latency alone).
double alpha_beta_ns(double alpha_us, double beta_gbps, double bus_bytes) {
  return alpha_us * 1e3 + (std::isinf(beta_gbps) ? 0.0 : bus_bytes / beta_gbps);
}

} // namespace

double in_step_collective_ns(const InterconnectRoof& r, double bus_bytes) {
  const double floor = alpha_beta_ns(r.floor_alpha_us, r.floor_beta_gbps, bus_bytes);
  if (!(r.beta_gbps > 0)) return floor;
  return std::max(floor, alpha_beta_ns(r.alpha_us, r.beta_gbps, bus_bytes));
}

OpPrediction predict_op(const PredictOp& op, const Roofs& roofs, const PredictOptions& o) {
  OpPrediction p;
  p.name = op.name;
  p.kind = op_kind_name(op.work.kind);
  p.instances = op.instances;
  const auto eff = o.efficiency.find(p.kind);
  p.efficiency = eff != o.efficiency.end() ? eff->second : 1.0;
  p.launch_ns = launch_floor_ns(roofs, o.graphs);
  const OpWork& w = op.work;
  double roof_ns = 0;
  if (op.comm_lane) {
    p.collective = w.collective;
    p.group_size = w.group_size;
    p.scope = w.scope;
    if (w.group_size > 1 && w.comm_bytes > 0) {
      if (const InterconnectRoof* r =
              roofs.interconnect_for(w.collective, w.group_size, o.transport, w.scope)) {
        p.interconnect_ns = in_step_collective_ns(*r, w.comm_bytes * w.busbw_factor);
        p.interconnect_source = "roofs";
      } else if (const LinkPreset* link = w.kind == OpKind::p2p       ? o.pp_link
                                          : op.group == CommGroup::ep ? o.ep_link
                                                                      : o.tp_link) {
        p.interconnect_ns = link_collective_ns(*link, w.comm_bytes, w.busbw_factor);
        p.interconnect_source = link->name;
      }
    }
    roof_ns = p.interconnect_ns;
    p.ceiling = Ceiling::interconnect;
  } else {
    const double rate = w.kind == OpKind::gemm ? gemm_rate_tflops(roofs, w.dtype, op.m, op.n, op.k)
                                               : roofs.peak_tflops(w.dtype);
    p.compute_ns = rate > 0 ? w.flops / (rate * 1e3) : 0;
    p.hbm_ns = memory_time_ns(roofs, w.hbm_bytes);
    roof_ns = std::max(p.compute_ns, p.hbm_ns);
    p.ceiling = p.compute_ns >= p.hbm_ns ? Ceiling::compute : Ceiling::hbm;
  }
  p.time_ns = roof_ns / p.efficiency;
  if (p.launch_ns > p.time_ns) {
    p.time_ns = p.launch_ns;
    p.ceiling = Ceiling::launch;
  }
  return p;
}

namespace {

// One bucket's reduction over the dp replicas: the roofs' row of its collective, group size and
// the DP groups' scope, else the DP link preset; `source` names which ("" and 0 ns without
// either).
double bucket_reduction_ns(double bytes, const Roofs& roofs, const PredictOptions& o,
                           std::string& source) {
  const double n = static_cast<double>(o.dp);
  const char* collective = o.dp_shard ? "reduce_scatter" : "all_reduce";
  const double factor = (o.dp_shard ? 1.0 : 2.0) * (n - 1.0) / n;
  if (const InterconnectRoof* r =
          roofs.interconnect_for(collective, o.dp, o.transport, o.dp_scope)) {
    source = "roofs";
    return in_step_collective_ns(*r, bytes * factor);
  }
  source = o.dp_link != nullptr ? o.dp_link->name : "";
  return o.dp_link != nullptr ? link_collective_ns(*o.dp_link, bytes, factor) : 0.0;
}

// The gradient reduction (see PredictOptions): every bucket's time and, in the train phase,
// the part after the backward given how long one layer's backward takes, recorded as an op row.
void reduce_gradients(StepPrediction& s, const Roofs& roofs, const PredictOptions& o,
                      double layer_backward_ns) {
  const std::vector<double> buckets = gradient_buckets(o.gradient_bytes, o.bucket_bytes);
  std::vector<double> times;
  std::string source;
  for (double b : buckets) {
    times.push_back(bucket_reduction_ns(b, roofs, o, source));
    s.dp_gradient_ns += times.back();
  }
  if (!o.train || buckets.empty()) return;
  if (source.empty())
    s.missing = std::string(o.dp_shard ? "reduce_scatter" : "all_reduce") + " over " +
                std::to_string(o.dp) + " ranks (" + scope_name(o.dp_scope) + ")";
  const std::vector<double> ready =
      o.dp_overlap ? bucket_ready_before_end_ns(buckets, o.layers, layer_backward_ns)
                   : std::vector<double>(buckets.size(), 0.0);
  s.dp_exposed_ns = exposed_after_end_ns(times, ready);
  OpPrediction p;
  p.name = o.dp_shard ? op::dp_reducescatter : op::dp_allreduce;
  p.kind = op_kind_name(OpKind::collective);
  p.instances = static_cast<double>(buckets.size());
  p.interconnect_ns = p.time_ns = s.dp_gradient_ns / p.instances;
  p.ceiling = Ceiling::interconnect;
  p.interconnect_source = source;
  p.collective = o.dp_shard ? "reduce_scatter" : "all_reduce";
  p.group_size = o.dp;
  p.scope = o.dp_scope;
  s.ops.push_back(std::move(p));
}

} // namespace

StepPrediction predict_step(const std::vector<PredictOp>& ops, const Roofs& roofs,
                            const PredictOptions& o) {
  StepPrediction s;
  double lane_class[kCeilingClasses] = {0, 0, 0, 0};
  double once_class[kCeilingClasses] = {0, 0, 0, 0};
  double backward_ns = 0, once_launches = 0; // one layer's backward; the per-step ops' kernels
  for (const PredictOp& op : ops) {
    OpPrediction p = predict_op(op, roofs, o);
    const double t = p.time_ns * p.instances;
    if (op.backward) backward_ns += p.time_ns + op.work.kernels * o.gap_ns;
    if (op.per_step) {
      s.per_step_ns += t;
      once_class[static_cast<int>(p.ceiling)] += t;
      once_launches += op.instances * op.work.kernels;
    } else if (op.comm_lane) {
      if (op.work.group_size > 1 && op.work.comm_bytes > 0 && p.interconnect_source.empty())
        s.missing = op.work.collective + " over " + std::to_string(op.work.group_size) +
                    " ranks (" + scope_name(op.work.scope) + ")";
      s.comm_lane_ns += t;
    } else {
      s.compute_lane_ns += t;
      lane_class[static_cast<int>(p.ceiling)] += t;
    }
    if (!op.per_step) s.launches += op.instances * op.work.kernels;
    s.ops.push_back(std::move(p));
  }
  s.gap_ns = s.launches * o.gap_ns;
  s.compute_lane_ns += s.gap_ns;
  lane_class[static_cast<int>(Ceiling::launch)] += s.gap_ns;
  s.per_step_ns += once_launches * o.gap_ns;
  once_class[static_cast<int>(Ceiling::launch)] += once_launches * o.gap_ns;
  s.stage_ns =
      o.overlap ? std::max(s.compute_lane_ns, s.comm_lane_ns) : s.compute_lane_ns + s.comm_lane_ns;
  if (o.pp > 1 && o.p2p_bytes > 0) {
    OpWork send;
    send.kind = OpKind::p2p;
    send.collective = "sendrecv";
    send.group_size = 2;
    send.comm_bytes = o.p2p_bytes;
    send.busbw_factor = 1;
    send.scope = o.p2p_scope;
    PredictOp op{"pp_send", send, 0, 0, 0, 1, true};
    s.p2p = predict_op(op, roofs, o);
    s.p2p_ns = s.p2p.interconnect_ns;
  }
  if (o.dp > 1) reduce_gradients(s, roofs, o, backward_ns);
  s.bubble = pipeline_bubble(o.pp, o.microbatches);
  const double slots = static_cast<double>(o.microbatches + o.pp - 1);
  s.step_ns = slots * (s.stage_ns + s.p2p_ns) + s.per_step_ns + s.dp_exposed_ns;
  for (int c = 0; c < kCeilingClasses; ++c)
    s.class_ns[c] = lane_class[c] * slots + once_class[c];
  s.exposed_interconnect_ns = slots * (s.stage_ns - s.compute_lane_ns + s.p2p_ns) + s.dp_exposed_ns;
  s.class_ns[static_cast<int>(Ceiling::interconnect)] = s.exposed_interconnect_ns;
  int best = 0;
  for (int c = 1; c < kCeilingClasses; ++c)
    if (s.class_ns[c] > s.class_ns[best]) best = c;
  s.ceiling = s.step_ns > 0 ? static_cast<Ceiling>(best) : Ceiling::none;
  return s;
}

} // namespace ridgeline
