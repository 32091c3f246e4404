// The analytic model (see predictor.hpp).
#include "models/predictor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

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
    if (w.group_size > 1 && w.comm_bytes > 0) {
      if (const InterconnectRoof* r =
              roofs.interconnect_for(w.collective, w.group_size, o.transport)) {
        p.interconnect_ns = in_step_collective_ns(*r, w.comm_bytes * w.busbw_factor);
        p.interconnect_source = "roofs";
      } else if (const LinkPreset* link = w.kind == OpKind::p2p ? o.pp_link : o.tp_link) {
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

StepPrediction predict_step(const std::vector<PredictOp>& ops, const Roofs& roofs,
                            const PredictOptions& o) {
  StepPrediction s;
  double lane_class[kCeilingClasses] = {0, 0, 0, 0};
  for (const PredictOp& op : ops) {
    OpPrediction p = predict_op(op, roofs, o);
    const double t = p.time_ns * p.instances;
    if (op.comm_lane) {
      if (op.work.group_size > 1 && op.work.comm_bytes > 0 && p.interconnect_source.empty())
        s.missing = op.work.collective + " over " + std::to_string(op.work.group_size) + " ranks";
      s.comm_lane_ns += t;
    } else {
      s.compute_lane_ns += t;
      lane_class[static_cast<int>(p.ceiling)] += t;
    }
    s.launches += op.instances * op.work.kernels;
    s.ops.push_back(std::move(p));
  }
  s.gap_ns = s.launches * o.gap_ns;
  s.compute_lane_ns += s.gap_ns;
  lane_class[static_cast<int>(Ceiling::launch)] += s.gap_ns;
  s.stage_ns =
      o.overlap ? std::max(s.compute_lane_ns, s.comm_lane_ns) : s.compute_lane_ns + s.comm_lane_ns;
  if (o.pp > 1 && o.p2p_bytes > 0) {
    OpWork send;
    send.kind = OpKind::p2p;
    send.collective = "sendrecv";
    send.group_size = 2;
    send.comm_bytes = o.p2p_bytes;
    send.busbw_factor = 1;
    PredictOp op{"pp_send", send, 0, 0, 0, 1, true};
    PredictOptions only = o;
    s.p2p_ns = predict_op(op, roofs, only).interconnect_ns;
  }
  s.bubble = pipeline_bubble(o.pp, o.microbatches);
  const double slots = static_cast<double>(o.microbatches + o.pp - 1);
  s.step_ns = slots * (s.stage_ns + s.p2p_ns);
  for (int c = 0; c < kCeilingClasses; ++c)
    s.class_ns[c] = lane_class[c] * slots;
  s.exposed_interconnect_ns = slots * (s.stage_ns - s.compute_lane_ns + s.p2p_ns);
  s.class_ns[static_cast<int>(Ceiling::interconnect)] = s.exposed_interconnect_ns;
  if (o.dp > 1 && o.dp_link != nullptr)
    s.dp_gradient_ns = dp_gradient_ns(o.gradient_bytes, o.dp, *o.dp_link);
  int best = 0;
  for (int c = 1; c < kCeilingClasses; ++c)
    if (s.class_ns[c] > s.class_ns[best]) best = c;
  s.ceiling = s.step_ns > 0 ? static_cast<Ceiling>(best) : Ceiling::none;
  return s;
}

} // namespace ridgeline
