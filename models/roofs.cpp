// Lookups over the measured roofs.
#include "models/roofs.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <string>

#include "core/stats.hpp"

namespace ridgeline {

const char* scope_name(Scope s) {
  switch (s) {
  case Scope::inter:
    return "inter";
  case Scope::hier:
    return "hier";
  case Scope::intra:
    break;
  }
  return "intra";
}

bool parse_scope(const std::string& name, Scope& out) {
  for (Scope s : kScopes)
    if (name == scope_name(s)) {
      out = s;
      return true;
    }
  return false;
}

int mark_gpu_outliers(std::vector<GpuRoof>& gpus, const GpuReference* reference, double pct) {
  // One figure of every GPU: the median to hold each against, and which way is worse.
  struct Figure {
    const char* name;
    const char* unit;
    std::function<double(const GpuRoof&)> of;
    double reference;
    bool higher_is_worse;
    bool per_node = false; ///< one figure a node: the median is over nodes
  };
  const GpuReference none;
  const GpuReference& ref = reference != nullptr ? *reference : none;
  const Figure figures[] = {
      {"GEMM", "TFLOP/s", [](const GpuRoof& g) { return g.gemm_tflops; }, ref.gemm_tflops, false},
      {"read", "GB/s", [](const GpuRoof& g) { return g.read_gbps; }, ref.read_gbps, false},
      {"launch", "ns", [](const GpuRoof& g) { return g.launch_ns; }, ref.launch_ns, true},
      // A node's link against the other nodes' (no reference: it depends on the transport).
      {"node link", "GB/s", [](const GpuRoof& g) { return g.node_busbw_gbps; }, 0, false, true},
      // Each rank's best exchange with another node: a slow node's ranks are slow with every
      // partner, the others fast with at least one (two nodes cannot tell theirs apart).
      {"inter-node link", "GB/s", [](const GpuRoof& g) { return g.inter_node_gbps; }, 0, false}};
  auto text = [](const Figure& f, double value, double against, const std::string& what) {
    char line[160];
    std::snprintf(line, sizeof(line), "%s %.4g %s is %+.0f %% against %s %.4g", f.name, value,
                  f.unit, 100.0 * (value / against - 1.0), what.c_str(), against);
    return std::string(line);
  };
  const double limit = pct / 100.0;
  auto worse = [&](const Figure& f, double value, double against) {
    if (against <= 0 || value <= 0) return false;
    return f.higher_is_worse ? value > against * (1.0 + limit) : value < against * (1.0 - limit);
  };
  for (GpuRoof& g : gpus)
    g.outlier.clear();
  for (const Figure& f : figures) {
    std::vector<double> values;
    std::set<std::string> nodes;
    for (const GpuRoof& g : gpus)
      if (f.of(g) > 0 && (!f.per_node || nodes.insert(g.node).second)) values.push_back(f.of(g));
    // Two GPUs (or nodes) have no majority to stand out from.
    const double median = values.size() >= 3 ? median_in_place(values) : 0;
    for (GpuRoof& g : gpus) {
      std::vector<std::string> why;
      if (worse(f, f.of(g), median)) why.push_back(text(f, f.of(g), median, "the median"));
      if (worse(f, f.of(g), f.reference))
        why.push_back(text(f, f.of(g), f.reference, ref.name.empty() ? "the reference" : ref.name));
      for (const std::string& w : why)
        g.outlier += (g.outlier.empty() ? "" : "; ") + w;
    }
  }
  return static_cast<int>(
      std::count_if(gpus.begin(), gpus.end(), [](const GpuRoof& g) { return !g.outlier.empty(); }));
}

Scope wider_scope(Scope a, Scope b) {
  return static_cast<int>(a) >= static_cast<int>(b) ? a : b;
}

double Roofs::peak_tflops(DType dtype) const {
  double best = 0;
  for (const GemmRoof& g : gemm)
    if (g.dtype == dtype_name(dtype)) best = std::max(best, g.tflops);
  return best;
}

double Roofs::memory_gbps(double footprint_bytes) const {
  double best = 0, largest_gbps = 0;
  int64_t largest = -1;
  for (const MemoryRoof& m : memory) {
    // An op both reads and writes: the best of the three kernels at a large enough set. Half
    // the footprint counts as large enough: an op's operands are often still in a cache that
    // its own traffic would overflow when streamed cold, as the probes stream them.
    if (2.0 * static_cast<double>(m.bytes) >= footprint_bytes) best = std::max(best, m.gbps);
    if (m.kind == "copy" && m.bytes > largest) {
      largest = m.bytes;
      largest_gbps = m.gbps;
    }
  }
  return best > 0 ? best : largest_gbps;
}

double Roofs::hbm_gbps() const {
  double gbps = 0;
  int64_t largest = -1;
  for (const MemoryRoof& m : memory)
    if (m.kind == "copy" && m.bytes > largest) {
      largest = m.bytes;
      gbps = m.gbps;
    }
  return gbps;
}

double Roofs::launch_floor_ns() const {
  double eager = 0;
  for (const LaunchRoof& l : launch) {
    if (l.kind == "graph_node") return l.ns_per_launch;
    if (l.kind == "eager") eager = l.ns_per_launch;
  }
  return eager;
}

const InterconnectRoof* Roofs::interconnect_for(const std::string& collective, int64_t group_size,
                                                const std::string& transport, Scope scope) const {
  auto same_path = [](const std::string& a, const std::string& b) {
    auto nv = [](const std::string& t) { return t == "auto" || t == "nvlink"; };
    return a == b || (nv(a) && nv(b));
  };
  std::vector<const InterconnectRoof*> candidates;
  for (const InterconnectRoof& r : interconnect)
    if (r.collective == collective && r.group_size == group_size && r.scope == scope)
      candidates.push_back(&r);
  for (const InterconnectRoof* r : candidates)
    if (same_path(r->transport, transport)) return r;
  // Roofs measured over one transport only (e.g. MPI on the host) serve every run.
  bool one_transport = true;
  for (const InterconnectRoof& r : interconnect)
    one_transport = one_transport && r.transport == interconnect.front().transport;
  return one_transport && !candidates.empty() ? candidates.front() : nullptr;
}

} // namespace ridgeline
