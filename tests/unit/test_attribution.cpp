// The attribution arithmetic on hand-computed cases: each roof's bound, the ceiling, the
// interconnect envelope, and the split of a step by ceiling.
#include <gtest/gtest.h>

#include <cmath>

#include "models/attribution.hpp"
#include "models/roofs.hpp"

namespace ridgeline {
namespace {

// 100 TFLOP/s bf16; copy 1000 GB/s at 1 GiB, 4000 GB/s at 16 MiB (a cache); read 1200 GB/s at
// 1 GiB; launch floor 2 us (graph node) beside 5 us eager; all_reduce over 2 ranks on nvlink:
// floor alpha 10 us, floor beta 100 GB/s.
Roofs sample_roofs() {
  Roofs r;
  r.backend = "cuda";
  r.gemm.push_back({"bf16", "square", 8192, 8192, 8192, 10, 0, 0, 100.0, -1});
  r.gemm.push_back({"bf16", "fc1_gemm", 4096, 32768, 8192, 10, 0, 0, 90.0, -1});
  r.gemm.push_back({"fp16", "square", 8192, 8192, 8192, 10, 0, 0, 80.0, -1});
  r.memory.push_back({"copy", int64_t{1} << 30, 5, 0, 0, 1000.0, -1});
  r.memory.push_back({"read", int64_t{1} << 30, 5, 0, 0, 1200.0, -1});
  r.memory.push_back({"copy", int64_t{16} << 20, 5, 0, 0, 4000.0, -1});
  r.launch.push_back({"eager", 1000, 5000.0, -1});
  r.launch.push_back({"graph_node", 1000, 2000.0, -1});
  r.interconnect.push_back(
      {"all_reduce", 2, "bf16", "nvlink", 12.0, 90.0, 10.0, 100.0, 8, 1 << 30});
  return r;
}

TEST(Roofs, Lookups) {
  const Roofs r = sample_roofs();
  EXPECT_DOUBLE_EQ(r.peak_tflops(DType::bf16), 100.0); // best over every shape of the dtype
  EXPECT_DOUBLE_EQ(r.peak_tflops(DType::f16), 80.0);
  EXPECT_DOUBLE_EQ(r.peak_tflops(DType::f32), 0.0);
  EXPECT_DOUBLE_EQ(r.hbm_gbps(), 1000.0);                     // the largest copy
  EXPECT_DOUBLE_EQ(r.memory_gbps(3.0 * (1 << 30)), 1000.0);   // beyond the range: largest copy
  EXPECT_DOUBLE_EQ(r.memory_gbps(2.0 * (1 << 30)), 1200.0);   // 1 GiB is half of it
  EXPECT_DOUBLE_EQ(r.memory_gbps(512.0 * (1 << 20)), 1200.0); // best kind at sizes >= 256 MiB
  EXPECT_DOUBLE_EQ(r.memory_gbps(1 << 20), 4000.0);           // a cache-sized set
  EXPECT_DOUBLE_EQ(r.memory_gbps(32.0 * (1 << 20)), 4000.0);  // 16 MiB is half of it
  EXPECT_DOUBLE_EQ(r.memory_gbps(33.0 * (1 << 20)), 1200.0);  // more than twice the cache roof
  EXPECT_DOUBLE_EQ(r.launch_floor_ns(), 2000.0);
  EXPECT_NE(r.interconnect_for("all_reduce", 2, "auto"), nullptr); // auto and nvlink agree
  EXPECT_EQ(r.interconnect_for("all_reduce", 4, "nvlink"), nullptr);
  EXPECT_EQ(r.interconnect_for("all_gather", 2, "nvlink"), nullptr);
}

TEST(Attribution, ComputeBoundGemm) {
  // 2 * 8192^3 FLOPs = 1.0995e12 at 100 TFLOP/s = 10.995 ms; bytes 3 * 8192^2 * 2 = 402.65 MB
  // at the 1 GiB roof: 0.4027 ms; launch 2 us.
  OpWork op;
  op.kind = OpKind::gemm;
  op.flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  op.hbm_bytes = 3.0 * 8192 * 8192 * 2;
  op.dtype = DType::bf16;
  const OpBounds b = op_bounds(op, sample_roofs(), "nvlink");
  EXPECT_NEAR(b.compute_ns, op.flops / 100e3, 1e-3);
  EXPECT_NEAR(b.hbm_ns, op.hbm_bytes / 1200.0, 1e-6); // 402 MB: sizes >= it are 1 GiB copy and read
  EXPECT_DOUBLE_EQ(b.launch_ns, 2000.0);
  EXPECT_EQ(b.ceiling, Ceiling::compute);
  EXPECT_DOUBLE_EQ(b.bound_ns, b.compute_ns);
  EXPECT_TRUE(b.missing.empty());
}

TEST(Attribution, HbmBoundElementwise) {
  // 3 GiB of traffic at 1000 GB/s (beyond the range: the largest copy) = 3.2212 ms.
  OpWork op;
  op.kind = OpKind::elementwise;
  op.flops = 1e9;
  op.hbm_bytes = 3.0 * (1 << 30);
  op.dtype = DType::bf16;
  const OpBounds b = op_bounds(op, sample_roofs(), "nvlink");
  EXPECT_NEAR(b.hbm_ns, 3.0 * (1 << 30) / 1000.0, 1e-6);
  EXPECT_NEAR(b.compute_ns, 1e9 / 100e3, 1e-9);
  EXPECT_EQ(b.ceiling, Ceiling::hbm);
}

TEST(Attribution, LaunchBoundTinyOp) {
  OpWork op;
  op.kind = OpKind::norm;
  op.flops = 1000;
  op.hbm_bytes = 4096; // 4 KiB in the 16 MiB cache roof: ~1 ns
  op.dtype = DType::bf16;
  const OpBounds b = op_bounds(op, sample_roofs(), "nvlink");
  EXPECT_NEAR(b.hbm_ns, 4096 / 4000.0, 1e-9);
  EXPECT_EQ(b.ceiling, Ceiling::launch);
  EXPECT_DOUBLE_EQ(b.bound_ns, 2000.0);
}

TEST(Attribution, InterconnectBoundCollective) {
  // 64 MiB all-reduce over 2 ranks: bus bytes = 64 MiB x 2(n-1)/n = 64 MiB; 10 us + 67108864 /
  // 100 GB/s = 10 us + 671.09 us. Its FLOPs and HBM bytes do not count (inside the roof).
  OpWork op;
  op.kind = OpKind::collective;
  op.flops = 1e12;
  op.hbm_bytes = 1e12;
  op.comm_bytes = 64.0 * (1 << 20);
  op.collective = "all_reduce";
  op.group_size = 2;
  op.busbw_factor = 1.0;
  op.dtype = DType::bf16;
  const OpBounds b = op_bounds(op, sample_roofs(), "nvlink");
  EXPECT_NEAR(b.interconnect_ns, 10e3 + 67108864.0 / 100.0, 1e-6);
  EXPECT_DOUBLE_EQ(b.compute_ns, 0.0);
  EXPECT_DOUBLE_EQ(b.hbm_ns, 0.0);
  EXPECT_EQ(b.ceiling, Ceiling::interconnect);
  // A tiny message is bound by the latency alpha (10 us), above the launch floor (2 us).
  op.comm_bytes = 8;
  EXPECT_NEAR(op_bounds(op, sample_roofs(), "auto").bound_ns, 10e3 + 8 / 100.0, 1e-9);
}

// A collective takes the roof of the scope its group spans: the same collective and group size
// across nodes is another roof, and never one of another scope in its place.
TEST(Attribution, CollectiveTakesTheRoofOfItsScope) {
  Roofs r = sample_roofs(); // all_reduce x2 within a node: 10 us + bus bytes / 100 GB/s
  InterconnectRoof across = r.interconnect.front();
  across.scope = Scope::inter;
  across.group_nodes = 2;
  across.floor_alpha_us = 40.0;
  across.floor_beta_gbps = 10.0;
  r.interconnect.push_back(across);
  EXPECT_EQ(r.interconnect_for("all_reduce", 2, "nvlink")->scope, Scope::intra);
  EXPECT_EQ(r.interconnect_for("all_reduce", 2, "nvlink", Scope::inter)->scope, Scope::inter);
  EXPECT_EQ(r.interconnect_for("all_reduce", 2, "nvlink", Scope::hier), nullptr);
  OpWork op;
  op.kind = OpKind::collective;
  op.comm_bytes = 1e6;
  op.collective = "all_reduce";
  op.group_size = 2;
  op.busbw_factor = 1.0;
  EXPECT_NEAR(op_bounds(op, r, "nvlink").interconnect_ns, 10e3 + 1e6 / 100.0, 1e-6);
  op.scope = Scope::inter;
  EXPECT_NEAR(op_bounds(op, r, "nvlink").interconnect_ns, 40e3 + 1e6 / 10.0, 1e-6);
  op.scope = Scope::hier;
  const OpBounds none = op_bounds(op, r, "nvlink");
  EXPECT_EQ(none.ceiling, Ceiling::none);
  EXPECT_EQ(none.missing, "all_reduce over 2 ranks (hier, nvlink)");
  // A file of one node's roofs: a collective across nodes finds no roof.
  op.scope = Scope::inter;
  EXPECT_EQ(op_bounds(op, sample_roofs(), "nvlink").ceiling, Ceiling::none);
}

TEST(Attribution, MissingRoofsAreNamed) {
  OpWork op;
  op.kind = OpKind::collective;
  op.comm_bytes = 1 << 20;
  op.collective = "all_gather";
  op.group_size = 2;
  op.busbw_factor = 0.5;
  EXPECT_NE(op_bounds(op, sample_roofs(), "nvlink").missing.find("all_gather over 2 ranks"),
            std::string::npos);
  OpWork gemm;
  gemm.kind = OpKind::gemm;
  gemm.flops = 1e9;
  gemm.dtype = DType::f32;
  EXPECT_NE(op_bounds(gemm, sample_roofs(), "nvlink").missing.find("fp32"), std::string::npos);
}

TEST(Attribution, StepSplitSerial) {
  // Compute lane: 6 ms compute-bound + 2 ms HBM-bound; interconnect ops 1.5 ms; step 10 ms:
  // 8 ms of compute ops leave 2 ms, of which the interconnect takes its 1.5 ms; 0.5 ms of gaps
  // count as launch. Ceiling: compute.
  const StepSplit s = split_step(10e6, {{6e6, false, Ceiling::compute},
                                        {2e6, false, Ceiling::hbm},
                                        {1.5e6, true, Ceiling::interconnect}});
  EXPECT_DOUBLE_EQ(s.by_class_ns[0], 6e6);
  EXPECT_DOUBLE_EQ(s.by_class_ns[1], 2e6);
  EXPECT_DOUBLE_EQ(s.by_class_ns[2], 1.5e6);
  EXPECT_DOUBLE_EQ(s.by_class_ns[3], 0.5e6);
  EXPECT_DOUBLE_EQ(s.exposed_interconnect_ns, 1.5e6);
  EXPECT_EQ(s.ceiling, Ceiling::compute);
}

TEST(Attribution, StepSplitOverlappedAndInterconnectBound) {
  // Overlap hid most of 5 ms of collectives: the step (4 ms) exceeds the compute ops (3 ms HBM)
  // by 1 ms, which is the exposed interconnect; no launch share.
  StepSplit s = split_step(4e6, {{3e6, false, Ceiling::hbm}, {5e6, true, Ceiling::interconnect}});
  EXPECT_DOUBLE_EQ(s.by_class_ns[2], 1e6);
  EXPECT_DOUBLE_EQ(s.by_class_ns[3], 0.0);
  EXPECT_EQ(s.ceiling, Ceiling::hbm);
  // Decode-like: 1 ms of HBM-bound compute, 3 ms collectives, serialized: interconnect.
  s = split_step(4.2e6, {{1e6, false, Ceiling::hbm}, {3e6, true, Ceiling::interconnect}});
  EXPECT_DOUBLE_EQ(s.by_class_ns[2], 3e6);
  EXPECT_NEAR(s.by_class_ns[3], 0.2e6, 1e-6);
  EXPECT_EQ(s.ceiling, Ceiling::interconnect);
  // Compute ops summed over ranks can exceed the step: they are scaled into it.
  s = split_step(1e6, {{1.5e6, false, Ceiling::compute}, {0.5e6, false, Ceiling::hbm}});
  EXPECT_DOUBLE_EQ(s.by_class_ns[0], 0.75e6);
  EXPECT_DOUBLE_EQ(s.by_class_ns[1], 0.25e6);
}

TEST(Attribution, StepSplitByBounds) {
  // A graph replay of 2 layers: bounds 3 us compute and 1 us interconnect per layer: 75 / 25 %.
  OpBounds a, b;
  a.bound_ns = 3000, a.ceiling = Ceiling::compute;
  b.bound_ns = 1000, b.ceiling = Ceiling::interconnect;
  const StepSplit s = split_step_by_bounds(10e3, {a, b}, {2, 2});
  EXPECT_DOUBLE_EQ(s.by_class_ns[0], 7.5e3);
  EXPECT_DOUBLE_EQ(s.by_class_ns[2], 2.5e3);
  EXPECT_EQ(s.ceiling, Ceiling::compute);
}

} // namespace
} // namespace ridgeline

namespace ridgeline {
namespace {

// Four GPUs, one slow in GEMM and one slow to launch, held against their median at 10 %.
std::vector<GpuRoof> four_gpus() {
  return {{0, "a", 0, 800, 4400, 4300, ""},
          {1, "a", 1, 790, 4450, 4350, ""},
          {2, "b", 0, 600, 4420, 4330, ""},
          {3, "b", 1, 805, 4410, 6000, ""}};
}

TEST(GpuOutliers, TheMedianNamesTheSlowGemmAndTheSlowLaunch) {
  std::vector<GpuRoof> gpus = four_gpus();
  EXPECT_EQ(mark_gpu_outliers(gpus, nullptr, 10), 2);
  EXPECT_EQ(gpus[0].outlier, "");
  EXPECT_EQ(gpus[1].outlier, "");
  // Median of 800, 790, 600, 805: 795; 600 is 25 % below.
  EXPECT_EQ(gpus[2].outlier, "GEMM 600 TFLOP/s is -25 % against the median 795");
  // Median launch 4340; 6000 is 38 % above.
  EXPECT_EQ(gpus[3].outlier, "launch 6000 ns is +38 % against the median 4340");
  // A wider threshold lets both pass.
  EXPECT_EQ(mark_gpu_outliers(gpus, nullptr, 40), 0);
  EXPECT_EQ(gpus[2].outlier, "");
}

TEST(GpuOutliers, TheReferenceHoldsEveryGpuAndTwoHaveNoMedian) {
  std::vector<GpuRoof> two = {{0, "a", 0, 800, 4400, 4300, ""}, {1, "a", 1, 400, 4400, 4300, ""}};
  // Two GPUs: no median to stand out from.
  EXPECT_EQ(mark_gpu_outliers(two, nullptr, 10), 0);
  const GpuReference h200{"H200", 801, 4464, 4352};
  EXPECT_EQ(mark_gpu_outliers(two, &h200, 10), 1);
  EXPECT_EQ(two[1].outlier, "GEMM 400 TFLOP/s is -50 % against H200 801");
  // A figure the reference leaves at 0 is not compared.
  const GpuReference gemm_only{"H200", 801, 0, 0};
  std::vector<GpuRoof> slow_read = {{0, "a", 0, 800, 100, 90000, ""}};
  EXPECT_EQ(mark_gpu_outliers(slow_read, &gemm_only, 10), 0);
}

// The node link is one figure a node: its median is over nodes, so a node of many ranks does not
// outvote the others, and two nodes have no median.
TEST(GpuOutliers, TheNodeLinkIsHeldAgainstTheMedianOfTheNodes) {
  auto gpu = [](int64_t rank, const std::string& node, double link) {
    GpuRoof g{rank, node, 0, 800, 4400, 4300, ""};
    g.node_busbw_gbps = link;
    return g;
  };
  // Node c holds four ranks at 150 GB/s, a and b one each at 300: the median of the nodes is 300.
  std::vector<GpuRoof> gpus = {gpu(0, "a", 300), gpu(1, "b", 310), gpu(2, "c", 150),
                               gpu(3, "c", 150), gpu(4, "c", 150), gpu(5, "c", 150)};
  EXPECT_EQ(mark_gpu_outliers(gpus, nullptr, 10), 4);
  EXPECT_EQ(gpus[0].outlier, "");
  EXPECT_EQ(gpus[2].outlier, "node link 150 GB/s is -50 % against the median 300");
  EXPECT_EQ(gpus[5].outlier, gpus[2].outlier);
  // Two nodes: no median; a node of one rank (link 0) is never compared.
  std::vector<GpuRoof> two = {gpu(0, "a", 300), gpu(1, "a", 300), gpu(2, "b", 100),
                              gpu(3, "b", 100), gpu(4, "d", 0)};
  EXPECT_EQ(mark_gpu_outliers(two, nullptr, 10), 0);
}

// The inter-node link is each rank's best exchange with another node: the ranks of a node that
// is slow with every partner stand out against the median of every rank; a rank that never met
// another node (0) is not compared.
TEST(GpuOutliers, ANodeSlowWithEveryPartnerIsNamed) {
  auto gpu = [](int64_t rank, const std::string& node, double inter) {
    GpuRoof g{rank, node, 0, 800, 4400, 4300, ""};
    g.inter_node_gbps = inter;
    return g;
  };
  std::vector<GpuRoof> gpus = {gpu(0, "a", 48), gpu(1, "a", 50), gpu(2, "b", 50),
                               gpu(3, "b", 49), gpu(4, "c", 6),  gpu(5, "c", 6.2)};
  EXPECT_EQ(mark_gpu_outliers(gpus, nullptr, 10), 2);
  EXPECT_EQ(gpus[4].outlier, "inter-node link 6 GB/s is -88 % against the median 48.5");
  EXPECT_EQ(gpus[0].outlier, "");
  std::vector<GpuRoof> single = {gpu(0, "a", 0), gpu(1, "a", 0), gpu(2, "a", 0)};
  EXPECT_EQ(mark_gpu_outliers(single, nullptr, 10), 0);
}

} // namespace
} // namespace ridgeline
