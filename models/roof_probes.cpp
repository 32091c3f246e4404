// Roof probes (see roof_probes.hpp).
#include "models/roof_probes.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/stamped_loop.hpp"
#include "core/stats.hpp"

namespace ridgeline {
namespace {

// Times `reps` calls of `call` after `warmup` untimed ones: one sample per call, between two
// stamps of its own.
template <class Call>
std::vector<double> time_calls(Backend& backend, int warmup, int reps, Call&& call) {
  for (int i = 0; i < warmup; ++i)
    call();
  Clock& clock = backend.clock();
  backend.synchronize();
  clock.start_epoch();
  MarkRecorder rec(clock);
  std::vector<StampedSample> samples;
  stamped_loop(
      rec, Lane::compute, reps, reps, [&](int) { call(); }, samples, SampleMarks::paired);
  backend.synchronize();
  rec.flush();
  return ns_per_call(rec, samples);
}

double best(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

} // namespace

GemmRoof probe_gemm(Backend& backend, const std::string& label, int64_t m, int64_t n, int64_t k,
                    int reps) {
  const Buffer a = backend.allocate(m, k), w = backend.allocate(n, k), c = backend.allocate(m, n);
  const DType dtype = backend.dtype();
  const Tensor ta = a.view(m, k, dtype), tw = w.view(n, k, dtype), tc = c.view(m, n, dtype);
  // Random operands: zeros run faster than real data on some GPUs.
  backend.fill_random(ta, GenKey{7, 1, k, 1.0f}, 0, 0);
  backend.fill_random(tw, GenKey{7, 2, k, 1.0f}, 0, 0);
  const std::vector<double> ns = time_calls(backend, 2, reps, [&] { backend.gemm(ta, tw, tc); });
  GemmRoof g;
  g.dtype = dtype_name(dtype);
  g.label = label;
  g.m = m, g.n = n, g.k = k, g.reps = reps;
  g.best_ns = best(ns);
  g.p50_ns = percentile(ns, 50);
  g.tflops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
             g.best_ns / 1e3;
  return g;
}

MemoryRoof probe_memory(Backend& backend, Backend::MemoryPass kind, int64_t bytes,
                        const Buffer& src, const Buffer& dst, int reps) {
  // A copy moves each byte twice (read + write): it runs over half the traffic.
  const size_t span =
      static_cast<size_t>(kind == Backend::MemoryPass::copy ? bytes / 2 : bytes) / 16 * 16;
  const std::vector<double> ns =
      time_calls(backend, 1, reps, [&] { backend.memory_pass(kind, src, dst, span); });
  MemoryRoof r;
  r.kind = kind == Backend::MemoryPass::read    ? "read"
           : kind == Backend::MemoryPass::write ? "write"
                                                : "copy";
  r.bytes = static_cast<int64_t>(kind == Backend::MemoryPass::copy ? 2 * span : span);
  r.reps = reps;
  r.best_ns = best(ns);
  r.p50_ns = percentile(ns, 50);
  r.gbps = static_cast<double>(r.bytes) / r.best_ns;
  return r;
}

LaunchRoof probe_launch(Backend& backend, bool graph, int launches, int reps) {
  std::vector<double> ns;
  if (graph) {
    backend.capture_begin(Lane::compute);
    backend.empty_kernels(launches, Lane::compute);
    const int id = backend.capture_end(Lane::compute);
    ns = time_calls(backend, 1, reps, [&] { backend.replay(id, Lane::compute); });
  } else {
    ns = time_calls(backend, 1, reps, [&] { backend.empty_kernels(launches, Lane::compute); });
  }
  LaunchRoof r;
  r.kind = graph ? "graph_node" : "eager";
  r.launches = launches;
  r.ns_per_launch = best(ns) / launches;
  return r;
}

} // namespace ridgeline
