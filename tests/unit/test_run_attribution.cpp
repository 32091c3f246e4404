// A run's attribution with injected op times: what e2e runs cannot check without timing them.
// Each op's efficiency is its ceiling's time over its measured p50, an op measured faster than its
// ceiling allows is counted in ops_over_ceiling, and the step's ceiling follows the ops' split.
#include <gtest/gtest.h>

#include <mpi.h>

#include "app/attribution.hpp"
#include "app/point.hpp"
#include "app/summary.hpp"

namespace ridgeline {
namespace {

// 100 TFLOP/s bf16, copy 1000 GB/s at 1 GiB, a 2 us launch floor, all_reduce over 2 ranks.
Roofs roofs() {
  Roofs r;
  r.backend = "host";
  r.source = "measured";
  r.gemm.push_back({"bf16", "square", 8192, 8192, 8192, 10, 0, 0, 100.0, -1});
  r.memory.push_back({"copy", int64_t{1} << 30, 5, 0, 0, 1000.0, -1});
  r.launch.push_back({"eager", 1000, 2000.0, -1});
  r.interconnect.push_back({"all_reduce", 2, "bf16", "host", 12.0, 90.0, 10.0, 100.0, 8, 1 << 30});
  return r;
}

OpSpec spec(const char* name, OpKind kind, Lane lane, double flops, double bytes, double comm = 0,
            const char* collective = "") {
  OpSpec s;
  s.name = name;
  s.kind = kind;
  s.lane = lane;
  s.cost = {flops, bytes, comm};
  s.collective = collective;
  return s;
}

OpAggregate measured(const char* name, const char* kind, double p50_ns, const OpCost& cost) {
  OpAggregate a;
  a.name = name;
  a.kind = kind;
  a.count = 4;
  a.p50_ns = p50_ns;
  a.per_step_p50_ns = p50_ns;
  a.flops = cost.flops;
  a.hbm_bytes = cost.hbm_bytes;
  a.comm_bytes = cost.comm_bytes;
  return a;
}

const AttrValue* find(const Attrs& attrs, const std::string& key) {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

TEST(RunAttribution, EfficiencyAndOpsOverTheCeiling) {
  AttributionInput in;
  in.tp = 1;
  in.dtype = DType::bf16;
  in.transport = "host";
  // A GEMM of 1e12 FLOPs: 10 ms at the compute roof. An elementwise op of 1 GB: 1 ms at HBM.
  in.specs.push_back(spec("fc1_gemm", OpKind::gemm, Lane::compute, 1e12, 1e6));
  in.specs.push_back(spec("activation", OpKind::elementwise, Lane::compute, 0, 1e9));
  RunSummary s;
  s.step.count = 4;
  s.step.p50 = 21e6;
  s.ops.push_back(measured("fc1_gemm", "gemm", 20e6, in.specs[0].cost)); // half its roof's speed
  s.ops.push_back(measured("activation", "elementwise", 0.5e6, in.specs[1].cost)); // 2x too fast
  attribute(s, in, roofs());
  EXPECT_EQ(s.ops[0].ceiling, "compute");
  EXPECT_NEAR(s.ops[0].bound_ns, 10e6, 1e-3);
  EXPECT_NEAR(s.ops[0].efficiency, 0.5, 1e-12);
  EXPECT_EQ(s.ops[1].ceiling, "hbm");
  EXPECT_NEAR(s.ops[1].efficiency, 2.0, 1e-12);
  const AttrValue* over = find(s.attrs, "ops_over_ceiling");
  ASSERT_NE(over, nullptr);
  EXPECT_EQ(std::get<int64_t>(*over), 1);
  const AttrValue* ceiling = find(s.attrs, "ceiling");
  ASSERT_NE(ceiling, nullptr);
  EXPECT_EQ(std::get<std::string>(*ceiling), "compute");
}

TEST(RunAttribution, OpsWithinTheirCeilingsAreNotCounted) {
  AttributionInput in;
  in.tp = 2;
  in.dtype = DType::bf16;
  in.transport = "host";
  in.specs.push_back(spec("norm1", OpKind::norm, Lane::compute, 0, 2e6));
  in.specs.push_back(
      spec("attn_allreduce", OpKind::collective, Lane::comm, 0, 0, 64e6, "all_reduce"));
  RunSummary s;
  s.step.count = 2;
  s.step.p50 = 3e6;
  s.ops.push_back(measured("norm1", "norm", 2.1e3 * 2, in.specs[0].cost));
  s.ops.push_back(measured("attn_allreduce", "collective", 2.9e6, in.specs[1].cost));
  attribute(s, in, roofs());
  for (const OpAggregate& a : s.ops) {
    EXPECT_NE(a.ceiling, "none") << a.name;
    EXPECT_GT(a.efficiency, 0.0) << a.name;
    EXPECT_LE(a.efficiency, 1.0) << a.name;
  }
  EXPECT_EQ(s.ops[1].ceiling, "interconnect");
  EXPECT_EQ(std::get<int64_t>(*find(s.attrs, "ops_over_ceiling")), 0);
  EXPECT_EQ(std::get<std::string>(*find(s.attrs, "ceiling")), "interconnect");
}

// On two nodes the TP group stays inside one and the replicas go across: the layer's collective
// takes the roof within a node, the data-parallel bucket the roof across nodes, each op records
// its scope, and a scope the roofs lack leaves the op unattributed with the reason.
TEST(RunAttribution, CollectivesTakeTheRoofOfTheScopeTheirGroupSpans) {
  Roofs r = roofs();
  InterconnectRoof across = r.interconnect.front(); // all_reduce x2 within a node: 10 us, 100 GB/s
  across.scope = Scope::inter;
  across.group_nodes = 2;
  across.floor_alpha_us = 50.0;
  across.floor_beta_gbps = 5.0;
  r.interconnect.push_back(across);
  AttributionInput in;
  in.tp = 2;
  in.dtype = DType::bf16;
  in.transport = "host";
  in.scopes = grid_scopes(map_nodes({"a", "a", "b", "b"}), 2, 1);
  ASSERT_EQ(in.scopes.dp, Scope::inter);
  in.specs.push_back(
      spec("allreduce_mlp", OpKind::collective, Lane::comm, 0, 0, 1e6, "all_reduce"));
  OpSpec dp = spec("dp_allreduce", OpKind::collective, Lane::comm, 0, 0, 0, "all_reduce");
  dp.group_size = 2;
  dp.group = CommGroup::dp;
  in.stage.push_back(dp);
  RunSummary s;
  s.step.count = 2;
  s.step.p50 = 10e6;
  s.ops.push_back(measured("allreduce_mlp", "collective", 1e6, in.specs[0].cost));
  s.ops.push_back(measured("dp_allreduce", "collective", 1e6, OpCost{0, 0, 1e6}));
  s.ops.push_back(measured("norm1", "norm", 1e6, OpCost{}));
  attribute(s, in, r);
  EXPECT_EQ(s.ops[0].scope, "intra");
  EXPECT_NEAR(s.ops[0].interconnect_bound_ns, 10e3 + 1e6 / 100.0, 1e-6);
  EXPECT_EQ(s.ops[1].scope, "inter");
  EXPECT_NEAR(s.ops[1].interconnect_bound_ns, 50e3 + 1e6 / 5.0, 1e-6);
  EXPECT_EQ(s.ops[2].scope, ""); // not a collective
  // The same ops against one node's roofs: the bucket across nodes has no roof, and says so.
  RunSummary one_node = s;
  for (OpAggregate& a : one_node.ops)
    a.ceiling = "none", a.efficiency = 0, a.scope.clear();
  one_node.attrs.clear();
  attribute(one_node, in, roofs());
  EXPECT_EQ(one_node.ops[0].ceiling, "interconnect");
  EXPECT_EQ(one_node.ops[1].ceiling, "none");
  const AttrValue* why = find(one_node.attrs, "unattributed_ops");
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::get<std::string>(*why).find("dp_allreduce: the roofs lack all_reduce over 2 "
                                             "ranks (inter, host)"),
            std::string::npos)
      << std::get<std::string>(*why);
}

// Data-parallel buckets run over the dp replicas, not the TP group: their roof is the
// all-reduce of the dp group size, and an op no roof applies to says why it has none.
TEST(RunAttribution, DataParallelBucketsUseTheirOwnGroupsRoof) {
  Roofs r = roofs();
  r.interconnect.push_back({"all_reduce", 4, "bf16", "host", 40.0, 20.0, 30.0, 25.0, 8, 1 << 30});
  AttributionInput in;
  in.tp = 2;
  in.dtype = DType::bf16;
  in.transport = "host";
  OpSpec dp = spec("dp_allreduce", OpKind::collective, Lane::comm, 0, 0, 0, "all_reduce");
  dp.group_size = 4;
  in.stage.push_back(dp);
  in.no_roof["pp_wait"] = "a wait";
  RunSummary s;
  s.step.count = 2;
  s.step.p50 = 10e6;
  s.ops.push_back(measured("dp_allreduce", "collective", 2e6, OpCost{25e6, 50e6, 25e6}));
  s.ops.push_back(measured("pp_wait", "p2p", 1e6, OpCost{}));
  s.ops.push_back(measured("mystery", "other", 1e6, OpCost{}));
  attribute(s, in, r);
  EXPECT_EQ(s.ops[0].ceiling, "interconnect");
  // The x4 roof: 30 us + 25e6 B x 2 (4 - 1) / 4 / 25 GB/s = 30 us + 1.5 ms.
  EXPECT_NEAR(s.ops[0].interconnect_bound_ns, 30e3 + 25e6 * 1.5 / 25.0, 1e-6);
  EXPECT_EQ(s.ops[1].ceiling, "none");
  EXPECT_EQ(s.ops[2].ceiling, "none");
  EXPECT_EQ(std::get<std::string>(*find(s.attrs, "unattributed_ops")),
            "pp_wait: a wait; mystery: not in the work model");
  // Without the x4 roof the bucket names the roof it lacks.
  RunSummary t = s;
  t.attrs.clear();
  for (OpAggregate& a : t.ops)
    a.ceiling = "none";
  attribute(t, in, roofs());
  EXPECT_EQ(t.ops[0].ceiling, "none");
  EXPECT_EQ(std::get<std::string>(*find(t.attrs, "unattributed_ops")),
            "dp_allreduce: the roofs lack all_reduce over 4 ranks (intra, host); pp_wait: a wait; "
            "mystery: not in the work model");
}

TimelineRecord row(int32_t op, int32_t iteration, int64_t start, int64_t end, double bytes) {
  TimelineRecord r{};
  r.op_id = op;
  r.layer = -1;
  r.iteration = iteration;
  r.lane = static_cast<uint8_t>(op == 0 ? Lane::compute : Lane::comm);
  r.t_start_ns = start;
  r.t_end_ns = end;
  r.flops = op == 0 ? 1e6 : bytes;
  r.hbm_bytes = 2 * bytes;
  r.comm_bytes = op == 0 ? 0 : bytes;
  return r;
}

// Buckets posted one after another and completed by one wait overlap: the op's time in the step
// is the union of their intervals (never more than the step), not their sum (3 x the step here),
// and its costs per instance are the buckets' mean (the last bucket is smaller).
TEST(RunSummary, OverlappingInstancesCountOnceInTheStep) {
  OpTable ops;
  ops.intern("gemm", OpKind::gemm);
  ops.intern("dp_allreduce", OpKind::collective);
  std::vector<TimelineRecord> mine;
  for (int32_t it = 0; it < 3; ++it) {
    const int64_t t0 = 1000 * it;
    mine.push_back(row(0, it, t0, t0 + 400, 0));
    // Posted at 100, 200, 300; all complete at the wait at 900. A gap at 950 to 980.
    for (int64_t post : {100, 200, 300})
      mine.push_back(row(1, it, t0 + post, t0 + 900, post == 300 ? 1000.0 : 4000.0));
    mine.push_back(row(1, it, t0 + 950, t0 + 980, 4000.0));
  }
  const RunSummary s = summarize_run(MPI_COMM_SELF, ops, mine);
  ASSERT_EQ(s.ops.size(), 2u);
  EXPECT_EQ(s.step.p50, 980.0);
  EXPECT_EQ(s.ops[0].per_step_p50_ns, 400.0);
  EXPECT_EQ(s.ops[1].per_step_p50_ns, 800.0 + 30.0);
  EXPECT_LE(s.ops[1].share, 1.0);
  EXPECT_EQ(s.ops[1].comm_bytes, (3 * 4000.0 + 1000.0) / 4);
  EXPECT_EQ(s.ops[0].flops, 1e6);
}

// Exposed communication is never negative: a step without collectives (TP1) exposes none, whatever
// its two loops' noise, and a step faster than its compute-only loop exposes 0.
TEST(OverlapFigures, ExposedCommunicationIsNeverNegative) {
  StrategyResult r;
  r.overlap = "none";
  OpAggregate gemm;
  gemm.name = "fc1_gemm";
  gemm.kind = "gemm";
  gemm.lane = "compute";
  r.summary.ops.push_back(gemm);
  r.loops.plain_ns = 9.8e6;
  r.loops.compute_only_ns = 10e6; // the same step, timed a little slower
  r.loops.comm_only_ns = 0.1e6;   // the loop's own overhead: no collective ran
  const Attrs tp1 = overlap_attrs(r, r.loops.plain_ns);
  EXPECT_EQ(std::get<double>(*find(tp1, "exposed_comm_ns")), 0.0);
  EXPECT_EQ(std::get<double>(*find(tp1, "overlap_efficiency")), 0.0);
  OpAggregate ar;
  ar.name = "allreduce_mlp";
  ar.kind = "collective";
  ar.lane = "comm";
  r.summary.ops.push_back(ar);
  const Attrs tp2 = overlap_attrs(r, r.loops.plain_ns);
  EXPECT_EQ(std::get<double>(*find(tp2, "exposed_comm_ns")), 0.0);
  r.loops.plain_ns = 10.5e6;
  EXPECT_EQ(std::get<double>(*find(overlap_attrs(r, 10.5e6), "exposed_comm_ns")), 0.5e6);
}

} // namespace
} // namespace ridgeline
