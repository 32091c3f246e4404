// Roof measurement and the `ridgeline roofs` command.
#include "app/roofs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/fingerprint.hpp"
#include "app/model.hpp"
#include "app/reporters.hpp"
#include "app/run_file.hpp"
#include "collectives/collective_runner.hpp"
#include "collectives/transport.hpp"
#include "core/error.hpp"
#include "core/watchdog.hpp"
#include "models/cuda_backend.hpp"
#include "models/roof_probes.hpp"
#include "models/work_model.hpp"
#include "parallel/grid.hpp"

namespace ridgeline {
namespace {

// NVML's SM clock during [begin_ns, end_ns) of the sampler's time base, averaged over every
// rank's GPU (-1 without samples; every rank calls).
double mean_sm_clock(MPI_Comm comm, const std::vector<GpuSample>& samples, int64_t begin_ns,
                     int64_t end_ns) {
  double sums[2] = {0, 0};
  for (const GpuSample& s : samples)
    if (s.t_ns >= begin_ns && s.t_ns <= end_ns && s.sm_clock_mhz >= 0) {
      sums[0] += static_cast<double>(s.sm_clock_mhz);
      sums[1] += 1;
    }
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, comm));
  return sums[1] > 0 ? sums[0] / sums[1] : -1;
}

// The best time of any rank (the roof: what the device can do).
void best_over_ranks(MPI_Comm comm, double& best_ns, double& p50_ns) {
  double t[2] = {best_ns, p50_ns};
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MIN, comm));
  best_ns = t[0];
  p50_ns = t[1];
}

// Each rank's own figures, gathered to rank 0 (every rank calls; the others get none): `own_ns`
// holds this rank's best time of every GEMM, memory and launch row of `roofs`, in their order;
// `node_busbw_gbps` its node group's bus bandwidth (measure_interconnect), `inter_node_gbps`
// its best exchange with another node (measure_node_pairs).
std::vector<GpuRoof> gather_gpu_roofs(JobContext& job, const Roofs& roofs,
                                      const std::vector<double>& own_ns, double node_busbw_gbps,
                                      double inter_node_gbps) {
  constexpr int kFigures = 6;
  double mine[kFigures] = {
      0, 0, 0, static_cast<double>(job.device()), node_busbw_gbps, inter_node_gbps};
  size_t row = 0;
  for (const GemmRoof& g : roofs.gemm) {
    const double ns = own_ns[row++];
    if (g.dtype == roofs.gemm.front().dtype && ns > 0)
      mine[0] = std::max(mine[0], 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) *
                                      static_cast<double>(g.k) / ns / 1e3);
  }
  int64_t largest = -1;
  for (const MemoryRoof& m : roofs.memory) {
    const double ns = own_ns[row++];
    if (m.kind == "read" && m.bytes > largest && ns > 0)
      largest = m.bytes, mine[1] = static_cast<double>(m.bytes) / ns;
  }
  for (const LaunchRoof& l : roofs.launch) {
    const double ns = own_ns[row++];
    if (l.kind == "eager") mine[2] = ns;
  }
  const MpiSession& mpi = job.mpi();
  std::vector<double> all(mpi.rank() == 0 ? kFigures * static_cast<size_t>(mpi.size()) : 0);
  RIDGELINE_CHECK(
      MPI_Gather(mine, kFigures, MPI_DOUBLE, all.data(), kFigures, MPI_DOUBLE, 0, mpi.world()));
  std::vector<GpuRoof> gpus;
  for (int r = 0; r < (mpi.rank() == 0 ? mpi.size() : 0); ++r) {
    const double* f = &all[kFigures * static_cast<size_t>(r)];
    gpus.push_back({r, mpi.hosts()[static_cast<size_t>(r)], static_cast<int64_t>(f[3]), f[0], f[1],
                    f[2], "", f[4], f[5]});
  }
  return gpus;
}

// The interconnect sweeps' options: `sizes` bytes, `iters` timed calls each after 3 warm-up
// calls, in the backend's type, under the plan's timeout.
SweepOptions roof_sweep(const RoofsPlan& plan, DType dtype, std::vector<size_t> sizes, int iters) {
  SweepOptions sweep;
  sweep.sizes = std::move(sizes);
  sweep.dtype = dtype;
  sweep.warmup = 3;
  sweep.iters = iters;
  sweep.timeout_s = plan.timeout_s;
  return sweep;
}

// This rank's group of one layout (every rank of the job builds its own at once, its group by
// `color`): the group, its communicator and the bench's buffers.
struct RoofGroup {
  RoofGroup(JobContext& job, const RoofsPlan& plan, Backend& backend, int color)
      : group(job.mpi().world(), color, job.mpi().rank()),
        comm(job.make_communicator(group.get(), nccl_options(plan))),
        bench(backend, *comm, group.get(), job.mpi().world(), plan.interconnect_max_bytes) {}
  // `spec` swept; an element that came back wrong on any rank throws Error on every rank
  // (the count is over the world), naming `what`.
  CollectiveResult sweep(const CollectiveSpec& spec, const SweepOptions& options,
                         Watchdog& watchdog, const std::string& what) {
    const CollectiveResult r = bench.sweep(spec, options, watchdog);
    int64_t wrong = 0;
    for (const SizeRow& row : r.rows)
      wrong += row.wrong;
    if (wrong > 0) throw Error(what + " returned " + std::to_string(wrong) + " wrong elements");
    return r;
  }
  static NcclOptions nccl_options(const RoofsPlan& plan) {
    NcclOptions nccl;
    nccl.timeout_s = whole_seconds(plan.timeout_s);
    return nccl;
  }

  GroupComm group;
  std::unique_ptr<Communicator> comm;
  CollectiveBench bench;
};

// Inter-node links, node by node: round by round, the i-th rank of each node of a pair
// exchanges `plan.interconnect_max_bytes` with the i-th rank of the other (sendrecv; the pairs
// of a round and their ranks at once, as a job's cross-node traffic runs); a rank without a
// partner that round runs alone and keeps nothing. A pair's figure is its fastest call (the
// link, not a busy host's stalls); returns this rank's best over its partners (0 on a single
// node). Every rank calls.
double measure_node_pairs(JobContext& job, const RoofsPlan& plan, Backend& backend,
                          Watchdog& watchdog) {
  const NodeMap nodes = map_nodes(job.mpi().hosts());
  if (nodes.nodes < 2) return 0;
  const int rank = job.mpi().rank(), size = job.mpi().size();
  // Each rank's place among its node's ranks, and the ranks of each node in order.
  std::vector<std::vector<int>> members(static_cast<size_t>(nodes.nodes));
  for (int r = 0; r < size; ++r)
    members[static_cast<size_t>(nodes.node_of_rank[static_cast<size_t>(r)])].push_back(r);
  const int node = nodes.node_of_rank[static_cast<size_t>(rank)];
  const auto& mine = members[static_cast<size_t>(node)];
  const int place = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  const CollectiveSpec* spec = find_collective("sendrecv");
  RIDGELINE_REQUIRE(spec != nullptr, "the sendrecv collective is not registered");
  const SweepOptions sweep = roof_sweep(plan, backend.dtype(), {plan.interconnect_max_bytes},
                                        std::max(plan.interconnect_iters, 10));
  double best = 0;
  for (const auto& pairs : node_pair_rounds(nodes.nodes)) {
    // A paired rank's group: its pair and place; everyone else alone (colors past the pairs').
    int color = static_cast<int>(pairs.size()) * size + rank;
    for (size_t k = 0; k < pairs.size(); ++k) {
      const int other = pairs[k].first == node    ? pairs[k].second
                        : pairs[k].second == node ? pairs[k].first
                                                  : -1;
      if (other >= 0 && place < static_cast<int>(members[static_cast<size_t>(other)].size()))
        color = static_cast<int>(k) * size + place;
    }
    RoofGroup g(job, plan, backend, color);
    int group_size = 0;
    RIDGELINE_CHECK(MPI_Comm_size(g.group.get(), &group_size));
    const CollectiveResult r =
        g.sweep(*spec, sweep, watchdog, "inter-node links: sendrecv between nodes");
    if (group_size == 2 && !r.rows.empty())
      best =
          std::max(best, busbw_gbps(*spec, 2, static_cast<double>(r.rows.back().shape.size_bytes),
                                    r.rows.back().time_ns.min));
  }
  return best;
}

// Windows of each measured row on the sampler's clock, resolved once sampling stops.
struct Windows {
  std::unique_ptr<GpuSampler> sampler;
  std::vector<std::pair<int64_t, int64_t>> spans;
  int64_t now() const { return sampler ? sampler->now_ns() : 0; }
};

// Interconnect: each collective over every layout of groups the job's nodes allow
// (roof_layouts: within a node, one rank per node, and every rank of several nodes), every group
// of a layout running at once, as a grid's groups of one kind do. Returns this rank's node link:
// the bus bandwidth its own group reached in the largest intra-node layout, for the first
// collective at the largest size (0 where the node holds one rank), which tells the nodes apart.
double measure_interconnect(JobContext& job, const RoofsPlan& plan, Backend& backend,
                            Watchdog& watchdog, Roofs& roofs) {
  double node_busbw_gbps = 0;
  int node_group = 0;
  const SweepOptions sweep =
      roof_sweep(plan, backend.dtype(), size_sweep(8, plan.interconnect_max_bytes, 4.0),
                 plan.interconnect_iters);
  const int rank = job.mpi().rank();
  for (const GroupLayout& layout : roof_layouts(map_nodes(job.mpi().hosts()))) {
    RoofGroup g(job, plan, backend, layout.color[static_cast<size_t>(rank)]);
    for (const std::string& name : plan.collectives) {
      const CollectiveSpec* spec = find_collective(name);
      if (spec == nullptr) throw UsageError("unknown collective '" + name + "'");
      const CollectiveResult r =
          g.sweep(*spec, sweep, watchdog,
                  "interconnect roof: " + name + " (" + scope_name(layout.scope) + ")");
      // Each rank's rows are its own group's (the max over the group's ranks per sample).
      if (layout.scope == Scope::intra && name == plan.collectives.front() &&
          layout.group_size > node_group && !r.rows.empty()) {
        const SizeRow& last = r.rows.back();
        node_group = layout.group_size;
        node_busbw_gbps = busbw_gbps(*spec, layout.group_size,
                                     static_cast<double>(last.shape.size_bytes), last.time_ns.p50);
      }
      if (!r.fitted) continue;
      InterconnectRoof roof;
      roof.collective = name;
      roof.group_size = layout.group_size;
      roof.dtype = dtype_name(sweep.dtype);
      roof.transport = job.transport();
      roof.alpha_us = r.fit.alpha_us;
      roof.beta_gbps = r.fit.beta_gbps;
      roof.floor_alpha_us = r.floor_alpha_us;
      roof.floor_beta_gbps = r.floor_beta_gbps;
      roof.fit_min_bytes = static_cast<int64_t>(r.rows.front().shape.size_bytes);
      roof.fit_max_bytes = static_cast<int64_t>(r.rows.back().shape.size_bytes);
      roof.scope = layout.scope;
      roof.group_nodes = layout.group_nodes;
      roofs.interconnect.push_back(roof);
    }
  }
  return node_busbw_gbps;
}

} // namespace

RoofsPlan RoofsPlan::defaults(bool cuda, bool quick) {
  RoofsPlan p;
  p.collectives = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv"};
  if (cuda) {
    p.dtypes =
        quick ? std::vector<DType>{DType::bf16} : std::vector<DType>{DType::bf16, DType::f16};
    p.gemm_sizes =
        quick ? std::vector<int64_t>{4096, 8192} : std::vector<int64_t>{2048, 4096, 8192, 16384};
    p.gemm_reps = quick ? 10 : 20;
    p.memory_min_bytes = 1 << 20;
    p.memory_max_bytes = quick ? (int64_t{1} << 30) : (int64_t{4} << 30);
    p.memory_reps = quick ? 5 : 10;
    p.interconnect_max_bytes = quick ? (size_t{64} << 20) : (size_t{1} << 30);
    p.interconnect_iters = quick ? 10 : 20;
  } else {
    p.dtypes = {DType::f32};
    p.gemm_sizes =
        quick ? std::vector<int64_t>{128, 512} : std::vector<int64_t>{128, 256, 512, 1024};
    p.gemm_reps = quick ? 5 : 10;
    p.memory_min_bytes = 16 << 10;
    // Caches shape host bandwidth: finer steps find each level's plateau.
    p.memory_step = 2;
    p.memory_max_bytes = quick ? (int64_t{64} << 20) : (int64_t{256} << 20);
    p.memory_reps = quick ? 5 : 10;
    p.interconnect_max_bytes = quick ? (size_t{256} << 10) : (size_t{4} << 20);
    p.interconnect_iters = quick ? 5 : 20;
  }
  p.source = quick ? "measured by this job (quick plan)" : "measured by ridgeline roofs";
  return p;
}

Attrs RoofsPlan::attrs() const {
  std::vector<std::string> d, sizes, shapes;
  for (DType t : dtypes)
    d.emplace_back(dtype_name(t));
  for (int64_t n : gemm_sizes)
    sizes.push_back(std::to_string(n));
  for (const Shape& s : gemm_shapes)
    shapes.push_back(s.label + ":" + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                     std::to_string(s.k));
  return {{"dtypes", join(d, ",")},
          {"gemm_sizes", join(sizes, ",")},
          {"gemm_shapes", join(shapes, ",")},
          {"gemm_reps", static_cast<int64_t>(gemm_reps)},
          {"memory_min_bytes", memory_min_bytes},
          {"memory_max_bytes", memory_max_bytes},
          {"memory_step", memory_step},
          {"memory_reps", static_cast<int64_t>(memory_reps)},
          {"launches", static_cast<int64_t>(launches)},
          {"launch_reps", static_cast<int64_t>(launch_reps)},
          {"collectives", join(collectives, ",")},
          {"interconnect_max_bytes", static_cast<int64_t>(interconnect_max_bytes)},
          {"interconnect_iters", static_cast<int64_t>(interconnect_iters)},
          {"sample_ms", static_cast<int64_t>(sample_ms)},
          {"timeout_s", timeout_s}};
}

Roofs measure_roofs(JobContext& job, const RoofsPlan& plan, Watchdog& watchdog) {
  MPI_Comm world = job.mpi().world();
  Roofs roofs;
  roofs.backend = job.backend_name();
  roofs.source = plan.source;
  Windows w;
  if (job.device() >= 0 && plan.sample_ms > 0)
    w.sampler = std::make_unique<GpuSampler>(job.device(), plan.sample_ms);
  // Each probe synchronises at its end: a host window around it covers its device time. Every
  // rank runs it at once; the roof is the best rank's, and each rank keeps its own time too.
  std::vector<double> own_ns;
  auto timed = [&](auto&& probe) {
    RIDGELINE_CHECK(MPI_Barrier(world));
    const int64_t begin = w.now();
    auto row = probe();
    w.spans.emplace_back(begin, w.now());
    own_ns.push_back(row.best_ns);
    best_over_ranks(world, row.best_ns, row.p50_ns);
    return row;
  };

  for (DType dtype : plan.dtypes) {
    Backend& backend = job.backend(dtype);
    std::vector<RoofsPlan::Shape> shapes;
    for (int64_t n : plan.gemm_sizes)
      shapes.push_back({"square", n, n, n});
    shapes.insert(shapes.end(), plan.gemm_shapes.begin(), plan.gemm_shapes.end());
    for (const RoofsPlan::Shape& s : shapes) {
      watchdog.rearm("GEMM roof " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                     std::to_string(s.k));
      GemmRoof g =
          timed([&] { return probe_gemm(backend, s.label, s.m, s.n, s.k, plan.gemm_reps); });
      g.tflops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) *
                 static_cast<double>(s.k) / g.best_ns / 1e3;
      roofs.gemm.push_back(g);
    }
  }
  Backend& backend = job.backend(job.cuda() ? DType::bf16 : DType::f32);
  {
    const Buffer src = backend.allocate_bytes(static_cast<size_t>(plan.memory_max_bytes));
    const Buffer dst = backend.allocate_bytes(static_cast<size_t>(plan.memory_max_bytes));
    // Defined contents: the read kernel sums real data, never uninitialised memory.
    backend.memory_pass(Backend::MemoryPass::write, src, src,
                        static_cast<size_t>(plan.memory_max_bytes));
    for (int64_t bytes = plan.memory_min_bytes; bytes <= plan.memory_max_bytes;
         bytes *= plan.memory_step)
      for (Backend::MemoryPass kind :
           {Backend::MemoryPass::read, Backend::MemoryPass::write, Backend::MemoryPass::copy}) {
        watchdog.rearm("memory roof of " + std::to_string(bytes) + " bytes");
        MemoryRoof m =
            timed([&] { return probe_memory(backend, kind, bytes, src, dst, plan.memory_reps); });
        m.gbps = static_cast<double>(m.bytes) / m.best_ns;
        roofs.memory.push_back(m);
      }
  }
  watchdog.rearm("launch floor");
  for (bool graph : {false, true}) {
    if (graph && !backend.supports_graphs()) continue;
    RIDGELINE_CHECK(MPI_Barrier(world));
    const int64_t begin = w.now();
    LaunchRoof l = probe_launch(backend, graph, plan.launches, plan.launch_reps);
    w.spans.emplace_back(begin, w.now());
    own_ns.push_back(l.ns_per_launch);
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &l.ns_per_launch, 1, MPI_DOUBLE, MPI_MIN, world));
    roofs.launch.push_back(l);
  }

  const double node_busbw_gbps = measure_interconnect(job, plan, backend, watchdog, roofs);
  if (plan.per_gpu) {
    watchdog.rearm("measuring each node's links to the other nodes");
    const double inter_node_gbps = measure_node_pairs(job, plan, backend, watchdog);
    roofs.gpus = gather_gpu_roofs(job, roofs, own_ns, node_busbw_gbps, inter_node_gbps);
  }
  const std::vector<GpuSample> samples = w.sampler ? w.sampler->stop() : std::vector<GpuSample>{};
  size_t span = 0;
  for (GemmRoof& g : roofs.gemm)
    g.sm_clock_mhz = mean_sm_clock(world, samples, w.spans[span].first, w.spans[span].second),
    ++span;
  for (MemoryRoof& m : roofs.memory)
    m.sm_clock_mhz = mean_sm_clock(world, samples, w.spans[span].first, w.spans[span].second),
    ++span;
  for (LaunchRoof& l : roofs.launch)
    l.sm_clock_mhz = mean_sm_clock(world, samples, w.spans[span].first, w.spans[span].second),
    ++span;
  backend.synchronize();
  return roofs;
}

std::vector<RoofsPlan::Shape> layer_gemm_shapes(const PointSpec& point) {
  std::vector<RoofsPlan::Shape> shapes;
  for (const OpSpec& o : layer_ops(point.model, point.shape, AttentionImpl::fused))
    if (o.kind == OpKind::gemm) shapes.push_back({o.name, o.m, o.n, o.k});
  return shapes;
}

Roofs obtain_roofs(JobContext& job, const std::string& option, const std::vector<DType>& dtypes,
                   const std::vector<RoofsPlan::Shape>& shapes, double timeout_s) {
  if (option == "none") return {};
  if (!option.empty()) {
    Roofs roofs = read_roofs(option);
    if (roofs.backend != job.backend_name())
      throw UsageError("--roofs " + option + " holds the roofs of a " + roofs.backend +
                       " backend; this job runs on " + job.backend_name());
    return roofs;
  }
  if (job.mpi().rank() == 0)
    std::cout
        << "ridgeline: no --roofs file: measuring a short version of the roofs (ridgeline roofs "
           "measures them in full; --roofs none skips attribution)\n";
  RoofsPlan plan = RoofsPlan::defaults(job.cuda(), true);
  plan.dtypes = dtypes;
  plan.gemm_shapes = shapes;
  plan.timeout_s = timeout_s;
  Watchdog watchdog(timeout_s, "measuring the roofs");
  return measure_roofs(job, plan, watchdog);
}

namespace {

// A row's SM clock: NVML's mean while it ran, "-" where none was sampled (the host has no SM
// clock; --sample-ms 0).
std::string sm_clock(double mhz) {
  char text[32];
  if (mhz >= 0)
    std::snprintf(text, sizeof(text), "  SM %5.0f MHz", mhz);
  else
    std::snprintf(text, sizeof(text), "  SM %5s", "-");
  return text;
}

// "1 node", "2 nodes".
std::string node_count(int64_t nodes) {
  return std::to_string(nodes) + (nodes == 1 ? " node" : " nodes");
}

} // namespace

void print_roofs(std::ostream& out, const Roofs& r) {
  char line[256];
  out << "roofs (" << r.backend << "; " << r.source << ")\n";
  // Rows no job timed (a hardware description's derated data-sheet figures) have no shape, size,
  // time or clock: they print what the description gives, marked as such.
  bool clocks = false, described = false;
  for (const GemmRoof& g : r.gemm)
    clocks = clocks || g.sm_clock_mhz >= 0;
  for (const MemoryRoof& m : r.memory)
    clocks = clocks || m.sm_clock_mhz >= 0;
  for (const GemmRoof& g : r.gemm) {
    if (g.best_ns <= 0) {
      described = true;
      std::snprintf(line, sizeof(line),
                    "  gemm    %-5s %-30s %10.3f TFLOP/s  (data sheet, derated)\n", g.dtype.c_str(),
                    "no shape timed", g.tflops);
      out << line;
      continue;
    }
    std::snprintf(line, sizeof(line),
                  "  gemm    %-5s %-10s %6lldx%6lldx%6lld %10.3f TFLOP/s  best %10.2f us  p50 "
                  "%10.2f us%s\n",
                  g.dtype.c_str(), g.label.c_str(), static_cast<long long>(g.m),
                  static_cast<long long>(g.n), static_cast<long long>(g.k), g.tflops,
                  g.best_ns / 1e3, g.p50_ns / 1e3, clocks ? sm_clock(g.sm_clock_mhz).c_str() : "");
    out << line;
  }
  for (const MemoryRoof& m : r.memory) {
    if (m.best_ns <= 0) {
      described = true;
      std::snprintf(line, sizeof(line), "  memory  %-5s %16s %10.1f GB/s  (data sheet, derated)\n",
                    m.kind.c_str(), "no size timed", m.gbps);
      out << line;
      continue;
    }
    std::snprintf(line, sizeof(line),
                  "  memory  %-5s %14lld B %10.1f GB/s  best %10.2f us  p50 %10.2f us%s\n",
                  m.kind.c_str(), static_cast<long long>(m.bytes), m.gbps, m.best_ns / 1e3,
                  m.p50_ns / 1e3, clocks ? sm_clock(m.sm_clock_mhz).c_str() : "");
    out << line;
  }
  for (const LaunchRoof& l : r.launch) {
    if (l.launches <= 0) {
      described = true;
      std::snprintf(line, sizeof(line),
                    "  launch  %-10s %8.3f us per kernel (from the hardware description, not timed "
                    "by this job)\n",
                    l.kind.c_str(), l.ns_per_launch / 1e3);
    } else {
      std::snprintf(line, sizeof(line), "  launch  %-10s %8.3f us per kernel (%lld launches)\n",
                    l.kind.c_str(), l.ns_per_launch / 1e3, static_cast<long long>(l.launches));
    }
    out << line;
  }
  for (const InterconnectRoof& c : r.interconnect) {
    std::snprintf(
        line, sizeof(line),
        "  interconnect %-14s x%-3lld %-5s %-8s %-6s fit: alpha %8.2f us beta %9.2f GB/s   "
        "floor: alpha %8.2f us beta %9.2f GB/s\n",
        c.collective.c_str(), static_cast<long long>(c.group_size), scope_name(c.scope),
        node_count(c.group_nodes).c_str(), c.transport.c_str(), c.alpha_us, c.beta_gbps,
        c.floor_alpha_us, c.floor_beta_gbps);
    out << line;
  }
  if (!r.interconnect.empty())
    out << "interconnect scope: intra, each group on one node; inter, one rank on each of its "
           "nodes; hier, several nodes with several ranks on some\n";
  if (clocks) out << "SM: NVML's mean SM clock while the row ran (-: not sampled)\n";
  if (described)
    out << "data sheet, derated: a hardware description's peak times its stated achievable "
           "fraction, not a measurement\n";
}

void print_roofs_summary(std::ostream& out, const Roofs& r) {
  char line[256];
  out << "roofs (" << r.backend << "; " << r.source << "):";
  for (DType d : {DType::bf16, DType::f16, DType::f32})
    if (r.peak_tflops(d) > 0) {
      std::snprintf(line, sizeof(line), "  GEMM %s %.3f TFLOP/s;", dtype_name(d), r.peak_tflops(d));
      out << line;
    }
  std::snprintf(line, sizeof(line),
                "  memory %.1f GB/s (largest copy), %.1f GB/s (best, cache-sized);", r.hbm_gbps(),
                r.memory_gbps(0));
  out << line;
  std::snprintf(line, sizeof(line), "  launch floor %.3f us\n", r.launch_floor_ns() / 1e3);
  out << line;
  for (const InterconnectRoof& c : r.interconnect) {
    std::snprintf(line, sizeof(line),
                  "  interconnect %s x%lld %s (%s): %.2f us + bytes / %.2f GB/s\n",
                  c.collective.c_str(), static_cast<long long>(c.group_size), scope_name(c.scope),
                  c.transport.c_str(), c.floor_alpha_us, c.floor_beta_gbps);
    out << line;
  }
}

namespace {

// Items of the list options (checked while parsing; see comma_list).
std::string dtype_item(const std::string& item, std::string& canonical) {
  try {
    canonical = dtype_name(parse_dtype_of(item, {DType::f32, DType::bf16, DType::f16}));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// The largest GEMM dimension --gemm-sizes and --gemm-shapes take: an n x n operand of it is
// 4 TiB in fp32, beyond any device, and every product of three of them fits 64 bits.
constexpr int64_t kMaxGemmDimension = int64_t{1} << 20;

std::string size_item(const std::string& item, std::string& canonical) {
  std::string text = item;
  const std::string problem = integer_in(1, kMaxGemmDimension)(text);
  if (problem.empty()) canonical = std::to_string(std::stoll(item));
  return problem;
}

// MxNxK with M, N, K from 1 to kMaxGemmDimension.
std::string shape_item(const std::string& item, std::string& canonical) {
  const std::vector<std::string> dims = split_by(item, 'x');
  canonical.clear();
  for (const std::string& d : dims) {
    std::string c;
    if (dims.size() != 3 || !size_item(d, c).empty())
      return "'" + item + "' is not MxNxK with M, N, K from 1 to " +
             std::to_string(kMaxGemmDimension);
    canonical += (canonical.empty() ? "" : "x") + c;
  }
  return "";
}

std::string collective_name_item(const std::string& item, std::string& canonical) {
  return find_collective(item) == nullptr ? "unknown collective '" + item + "'" : "";
}

struct RoofsOptions {
  std::string backend = "auto";
  std::string transport = "auto";
  bool allow_shared_gpu = false;
  bool quick = false;
  std::string dtypes;
  std::string gemm_sizes;
  std::string gemm_shapes;
  std::string memory_max_bytes;
  std::string interconnect_max_bytes;
  std::string collectives;
  int sample_ms = 20;
  std::string out;
  double timeout_s = 300;
  std::string reference;   ///< a hardware description (models/hardware/*.toml)
  double outlier_pct = 10; ///< how far from the median or the reference a GPU stands out
  bool check_gpus = false; ///< exit 3 when one does
};

// What a GPU of the description's model reaches: the data-sheet peak of `dtype` and HBM
// bandwidth times the deratings measured on a results page, and the measured launch floor.
GpuReference gpu_reference(const HardwareSpec& hw, const std::string& dtype) {
  const Roofs r = roofs_from_hardware(hw); // the one place a description's deratings apply
  GpuReference ref{hw.name, r.peak_tflops(parse_dtype(dtype)), r.hbm_gbps(), 0};
  for (const LaunchRoof& l : r.launch)
    if (l.kind == "eager") ref.launch_ns = l.ns_per_launch;
  return ref;
}

// Each GPU's own figures beside the allocation's median and the reference, outliers named.
void print_gpu_roofs(std::ostream& out, const std::vector<GpuRoof>& gpus,
                     const GpuReference* reference, double pct) {
  if (gpus.empty()) return;
  char line[256];
  out << "\nper GPU (each rank's own probes, run at once; outliers beyond " << pct
      << " % of the median of every GPU" << (reference ? " or of " + reference->name : "")
      << "):\n";
  std::snprintf(line, sizeof(line), "%5s  %-20s %6s %12s %12s %11s %14s %15s  %s\n", "rank", "node",
                "device", "GEMM TFLOP/s", "read GB/s", "launch ns", "node link GB/s",
                "inter-node GB/s", "stands out");
  out << line;
  for (const GpuRoof& g : gpus) {
    std::snprintf(line, sizeof(line), "%5lld  %-20s %6lld %12.2f %12.1f %11.0f %14.2f %15.2f  ",
                  static_cast<long long>(g.rank), g.node.c_str(), static_cast<long long>(g.device),
                  g.gemm_tflops, g.read_gbps, g.launch_ns, g.node_busbw_gbps, g.inter_node_gbps);
    out << line << (g.outlier.empty() ? "-" : g.outlier) << "\n";
  }
  if (reference != nullptr) {
    std::snprintf(line, sizeof(line), "%5s  %-20s %6s %12.2f %12.1f %11.0f\n", "ref",
                  reference->name.substr(0, 20).c_str(), "", reference->gemm_tflops,
                  reference->read_gbps, reference->launch_ns);
    out << line;
  }
}

// The plan of the options (the defaults where none is given) and, in `problems`, every
// problem of the options; the buffers are checked against the smallest free memory of any
// rank once every rank agrees that the options are valid. Every rank calls.
RoofsPlan roofs_plan(JobContext& job, const RoofsOptions& o, std::vector<std::string>& problems) {
  RoofsPlan plan = RoofsPlan::defaults(job.cuda(), o.quick);
  if (o.backend != "auto" && o.backend != "host" && o.backend != "cuda")
    problems.push_back("--backend must be auto, host or cuda (got '" + o.backend + "')");
  if (o.backend == "cuda" && job.gpus() == 0)
    problems.emplace_back("--backend cuda: no CUDA device is visible");
  // The lists and sizes were checked while parsing (no empty, bad or repeated item).
  if (!o.dtypes.empty()) {
    plan.dtypes.clear();
    for (const std::string& d : split_list(o.dtypes)) {
      plan.dtypes.push_back(parse_dtype(d));
      if (job.cuda() == (plan.dtypes.back() == DType::f32))
        problems.push_back(
            "--dtypes: " + d + " is not a GEMM type of the " + job.backend_name() +
            " backend (its types: " +
            (job.cuda() ? dtype_choices({DType::bf16, DType::f16}) : dtype_choices({DType::f32})) +
            ")");
    }
  }
  if (!o.gemm_sizes.empty()) {
    plan.gemm_sizes.clear();
    for (const std::string& n : split_list(o.gemm_sizes))
      plan.gemm_sizes.push_back(std::stoll(n));
  }
  if (!o.gemm_shapes.empty())
    for (const std::string& text : split_list(o.gemm_shapes)) {
      const std::vector<std::string> d = split_by(text, 'x');
      plan.gemm_shapes.push_back({"shape", std::stoll(d[0]), std::stoll(d[1]), std::stoll(d[2])});
    }
  if (!o.memory_max_bytes.empty())
    plan.memory_max_bytes =
        static_cast<int64_t>(parse_size_bytes(o.memory_max_bytes, "--memory-max-bytes"));
  if (!o.interconnect_max_bytes.empty())
    plan.interconnect_max_bytes =
        parse_size_bytes(o.interconnect_max_bytes, "--interconnect-max-bytes");
  // The kernels move 16-byte words.
  if (plan.memory_max_bytes % 16 != 0)
    problems.push_back("--memory-max-bytes " + std::to_string(plan.memory_max_bytes) +
                       " is not a multiple of 16 (the memory kernels move 16-byte words)");
  if (plan.memory_max_bytes < plan.memory_min_bytes)
    problems.push_back("--memory-max-bytes must be at least " +
                       std::to_string(plan.memory_min_bytes));
  if (plan.interconnect_max_bytes < 8)
    problems.emplace_back("--interconnect-max-bytes must be at least 8");
  if (!o.collectives.empty()) plan.collectives = split_list(o.collectives);
  if (find_transport(o.transport) == nullptr)
    problems.push_back("--transport must be one of " + transport_names() + " (got '" + o.transport +
                       "')");
  else if (o.transport != "auto" && !job.cuda())
    problems.push_back("--transport " + o.transport +
                       " selects an NCCL transport: needs the cuda backend");
  // Two buffers of the largest memory size, against the smallest free memory of any rank
  // (collective: only once every rank agrees that the options are valid).
  if (all_ranks_true(job.mpi().world(), problems.empty())) {
    const int64_t free_bytes = job.min_free_bytes();
    // The largest GEMM's three operands are held alone, at another time than the other buffers.
    double gemm = 0;
    for (DType dtype : plan.dtypes) {
      const double size = static_cast<double>(dtype_size(dtype));
      for (int64_t n : plan.gemm_sizes)
        gemm = std::max(gemm, 3.0 * static_cast<double>(n) * static_cast<double>(n) * size);
      for (const RoofsPlan::Shape& g : plan.gemm_shapes)
        gemm = std::max(gemm, (static_cast<double>(g.m) * static_cast<double>(g.k) +
                               static_cast<double>(g.n) * static_cast<double>(g.k) +
                               static_cast<double>(g.m) * static_cast<double>(g.n)) *
                                  size);
    }
    const double need = std::max(gemm, 2.0 * static_cast<double>(plan.memory_max_bytes) +
                                           3.0 * static_cast<double>(plan.interconnect_max_bytes));
    if (free_bytes >= 0 && need > 0.9 * static_cast<double>(free_bytes))
      problems.push_back("the roofs' buffers need about " +
                         std::to_string(static_cast<int64_t>(need / 1048576)) +
                         " MiB per rank but the smallest free memory of any rank is " +
                         std::to_string(free_bytes / 1048576) +
                         " MiB (lower --memory-max-bytes or the GEMM sizes)");
  }
  plan.sample_ms = o.sample_ms;
  plan.timeout_s = o.timeout_s;
  return plan;
}

int run_roofs(CommandContext& ctx, const RoofsOptions& o) {
  JobContext job(ctx, o.backend, o.allow_shared_gpu);
  if (reject_if_any(ctx, "invalid GPU placement", job.placement_problems())) return 2;
  std::vector<std::string> problems;
  RoofsPlan plan = roofs_plan(job, o, problems);
  plan.per_gpu = true;
  const std::string out = output_path(job.mpi().world(), o.out, "roofs");
  // What the job prints and writes once measured, from these.
  Roofs roofs;
  RunData data;
  std::optional<GpuReference> reference;
  int outliers = 0;
  ConsoleReporter console(job.mpi(), [&](std::ostream& os) {
    print_roofs(os, roofs);
    print_gpu_roofs(os, roofs.gpus, reference ? &*reference : nullptr, o.outlier_pct);
    if (outliers > 0)
      os << outliers << " GPU(s) stand out" << (o.check_gpus ? " (--check-gpus: exit 3)" : "")
         << "\n";
  });
  Hdf5Reporter h5(job.mpi(), out, false, [&](const std::string& path) {
    write_run_file(path, data);
    return std::string();
  });
  JobReports reports(ctx, {&console, &h5});
  // The output file is checked (a probe file created beside it) before anything is measured.
  for (std::string& problem : reports.file_problems({{o.reference, "--reference"}}))
    problems.push_back(std::move(problem));
  HardwareSpec hw;
  if (!o.reference.empty()) try {
      hw = read_hardware_file(o.reference);
    } catch (const std::exception& e) {
      problems.push_back(std::string("--reference: ") + e.what());
    }
  if (reject_if_any(ctx, "invalid roofs configuration", problems)) return 2;
  for (const std::string& warning : job.use_transport(o.transport))
    if (job.mpi().rank() == 0) std::cerr << "ridgeline: warning: " << warning << "\n";
  Watchdog watchdog(o.timeout_s, "measuring the roofs");
  roofs = measure_roofs(job, plan, watchdog);
  if (!o.reference.empty() && !roofs.gemm.empty())
    reference = gpu_reference(hw, roofs.gemm.front().dtype);
  outliers = mark_gpu_outliers(roofs.gpus, reference ? &*reference : nullptr, o.outlier_pct);
  watchdog.rearm("gathering the topology and writing the file");
  data.root = job.root_attrs("roofs");
  data.stack = job.stack();
  data.env = performance_env();
  data.config = plan.attrs();
  data.config.emplace_back("backend", job.backend_name());
  data.config.emplace_back("transport", job.transport());
  data.config.emplace_back("allow_shared_gpu", static_cast<int64_t>(o.allow_shared_gpu ? 1 : 0));
  data.config.emplace_back("out", out);
  data.config.emplace_back("reference", o.reference);
  data.config.emplace_back("outlier_pct", o.outlier_pct);
  data.config.emplace_back("check_gpus", static_cast<int64_t>(o.check_gpus ? 1 : 0));
  data.topology = job.topology({});
  if (job.mpi().rank() == 0) add_roofs(data, roofs, {{"transport", job.transport()}});
  // A GPU that stands out is a failed check only where asked for (an acceptance script's exit).
  return reports.finish(o.check_gpus && outliers > 0 ? 3 : 0);
}

} // namespace

void setup_roofs_command(CLI::App& app, CommandAction& action) {
  auto o = std::make_shared<RoofsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "roofs",
      "Measure the roofs (GEMM peak per dtype, memory read/write/copy bandwidth, launch floor, "
      "interconnect alpha/beta per collective, group size and scope: within a node, one rank per "
      "node and every rank of several nodes, as the job's nodes allow) -> HDF5 /roofs");
  cmd->add_option("--backend", o->backend, "auto | host | cuda")->capture_default_str();
  cmd->add_option("--transport", o->transport,
                  "NCCL transport preset: auto, nvlink, host or net (one per job)")
      ->capture_default_str();
  cmd->add_flag("--allow-shared-gpu", o->allow_shared_gpu,
                "Run even where a node has more ranks than GPUs (refused otherwise)");
  cmd->add_flag("--quick", o->quick,
                "The short plan that run and sweep measure when given no --roofs file");
  cmd->add_option("--dtypes", o->dtypes,
                  "GEMM types, comma list: bf16 and fp16 on cuda, fp32 on host (default: "
                  "bf16,fp16 on cuda, bf16 with --quick; fp32 on host)")
      ->check(comma_list(dtype_item));
  cmd->add_option("--gemm-sizes", o->gemm_sizes,
                  "Square GEMM sizes n (n x n x n, n at most " + std::to_string(kMaxGemmDimension) +
                      "), comma list")
      ->check(comma_list(size_item));
  cmd->add_option("--gemm-shapes", o->gemm_shapes,
                  "Further GEMM shapes MxNxK (e.g. a layer's; each at most " +
                      std::to_string(kMaxGemmDimension) + "), comma list")
      ->check(comma_list(shape_item));
  cmd->add_option("--memory-max-bytes", o->memory_max_bytes,
                  "Largest memory pass, a multiple of 16 bytes (default 4G on cuda, 256M on host; "
                  "--quick: 1G, 64M), the passes from 1M up in x4 steps on cuda, from 16K up in x2 "
                  "steps on host")
      ->check(byte_count());
  cmd->add_option(
         "--interconnect-max-bytes", o->interconnect_max_bytes,
         "Largest collective size of the interconnect sweep (default 1G on cuda, 4M on host; "
         "--quick: 64M, 256K)")
      ->check(byte_count());
  cmd->add_option("--collectives", o->collectives,
                  "Collectives of the interconnect roof (default "
                  "all_reduce,all_gather,reduce_scatter,all_to_all,sendrecv)")
      ->check(comma_list(collective_name_item));
  cmd->add_option("--sample-ms", o->sample_ms,
                  "NVML sampling period during the measurement (0 = off)")
      ->check(integer_in(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--out,-o", o->out, "HDF5 output (default: results/ridgeline-roofs-<UTC>.h5)");
  cmd->add_option("--timeout", o->timeout_s,
                  "Seconds one measurement may wait before the job is aborted (1e9 or more: never)")
      ->check(number_above(0))
      ->capture_default_str();
  cmd->add_option("--reference", o->reference,
                  "Hardware description of the GPUs (models/hardware/*.toml): each GPU is held "
                  "against its data-sheet peaks times the measured deratings and its measured "
                  "launch floor, beside the allocation's median")
      ->check(CLI::ExistingFile)
      ->check(regular_file())
      ->group("Checks");
  cmd->add_option("--outlier-pct", o->outlier_pct,
                  "A GPU stands out when its GEMM rate, read bandwidth or link to the other nodes "
                  "is more than this many percent below (its launch floor above) the median of "
                  "every GPU (3 or more), its node's link below the median of the nodes (3 or "
                  "more), or a figure below the --reference")
      ->check(CLI::Range(0.1, 1000.0))
      ->capture_default_str()
      ->group("Checks");
  cmd->add_flag("--check-gpus", o->check_gpus,
                "Exit 3 when a GPU stands out (the file and tables are written all the same)")
      ->group("Checks");
  cmd->footer("run --roofs FILE and sweep --roofs FILE reuse the file's /roofs for attribution.");
  cmd->callback([o, &action] { action = [o](CommandContext& ctx) { return run_roofs(ctx, *o); }; });
}

} // namespace ridgeline
