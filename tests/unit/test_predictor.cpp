// The analytic model on hand-computed cases: a GEMM under the compute roof, a memory-bound op
// on the measured curve, the launch floor, a collective over a link preset and one inside a step
// at the roofs' median fit, the pipeline bubble,
// a data-parallel gradient all-reduce, the train step's gradient buckets and a step's
// combination.
#include <gtest/gtest.h>

#include <limits>

#include "models/predictor.hpp"

namespace ridgeline {
namespace {

// 100 TFLOP/s bf16 at 8192^3 and 50 at 1024^3; read: 1 MiB in 5000 ns, 1 GiB in 1e6 ns;
// launch 4000 ns eager, 1000 ns graph node.
Roofs sample_roofs() {
  Roofs r;
  r.backend = "cuda";
  r.gemm.push_back({"bf16", "square", 8192, 8192, 8192, 10, 0, 0, 100.0, -1});
  r.gemm.push_back({"bf16", "square", 1024, 1024, 1024, 10, 0, 0, 50.0, -1});
  r.memory.push_back({"read", int64_t{1} << 20, 5, 5000.0, 0, 209.7, -1});
  r.memory.push_back({"read", int64_t{1} << 30, 5, 1.0e6, 0, 1073.741824, -1});
  r.launch.push_back({"eager", 1000, 4000.0, -1});
  r.launch.push_back({"graph_node", 1000, 1000.0, -1});
  return r;
}

PredictOp gemm(int64_t m, int64_t n, int64_t k) {
  PredictOp op;
  op.name = "fc1_gemm";
  op.work.kind = OpKind::gemm;
  op.work.dtype = DType::bf16;
  op.work.flops = 2.0 * m * n * k;
  op.work.hbm_bytes = 2.0 * (m * k + n * k + m * n);
  op.m = m, op.n = n, op.k = k;
  return op;
}

TEST(Predictor, GemmTakesTheRateOfTheNearestMeasuredShape) {
  const Roofs r = sample_roofs();
  // 2 x 8192^3 FLOPs at 100 TFLOP/s = 10995.1 us; its 402 MB read: about 0.37 ms.
  const OpPrediction p = predict_op(gemm(8192, 8192, 8192), r, {});
  EXPECT_NEAR(p.compute_ns, 2.0 * 8192.0 * 8192 * 8192 / 100e3, 1);
  EXPECT_EQ(p.ceiling, Ceiling::compute);
  EXPECT_DOUBLE_EQ(p.time_ns, p.compute_ns);
  // 1000^3 is nearest 1024^3: 50 TFLOP/s.
  EXPECT_DOUBLE_EQ(gemm_rate_tflops(r, DType::bf16, 1000, 1000, 1000), 50.0);
}

TEST(Predictor, ShapesMeasuredBelowTheRidgeAreNoComputeRate) {
  Roofs r = sample_roofs();
  // A copy roof of 1000 GB/s: the ridge is 1e3 * 100 / 1000 = 100 FLOPs per byte.
  r.memory.push_back({"copy", int64_t{1} << 30, 5, 1.0e6, 0, 1000.0, -1});
  // A decode GEMM of one row, measured at 2 TFLOP/s: about 1 FLOP per byte, bound by memory.
  r.gemm.push_back({"bf16", "fc1_gemm", 1, 14336, 4096, 10, 0, 0, 2.0, -1});
  // Neither its own shape nor the same GEMM at 16 rows takes its rate: both get the nearest
  // square row's (8192^3 at 100 TFLOP/s), and their time comes from the memory roof.
  EXPECT_DOUBLE_EQ(gemm_rate_tflops(r, DType::bf16, 1, 14336, 4096), 100.0);
  EXPECT_DOUBLE_EQ(gemm_rate_tflops(r, DType::bf16, 16, 14336, 4096), 100.0);
  const OpPrediction p = predict_op(gemm(16, 14336, 4096), r, {});
  EXPECT_EQ(p.ceiling, Ceiling::hbm);
  EXPECT_LT(p.compute_ns, p.hbm_ns);
  // A shape above the ridge still counts: 2048^3 at 80 TFLOP/s is nearest to 2000^3.
  r.gemm.push_back({"bf16", "square", 2048, 2048, 2048, 10, 0, 0, 80.0, -1});
  EXPECT_DOUBLE_EQ(gemm_rate_tflops(r, DType::bf16, 2000, 2000, 2000), 80.0);
  // Without any row above the ridge: the peak.
  Roofs only_skinny;
  only_skinny.memory = r.memory;
  only_skinny.gemm.push_back({"bf16", "fc1_gemm", 1, 14336, 4096, 10, 0, 0, 2.0, -1});
  EXPECT_DOUBLE_EQ(gemm_rate_tflops(only_skinny, DType::bf16, 16, 14336, 4096), 2.0);
}

TEST(Predictor, MemoryTimeInterpolatesTheMeasuredCurve) {
  const Roofs r = sample_roofs();
  const double mid =
      (static_cast<double>(int64_t{1} << 20) + static_cast<double>(int64_t{1} << 30)) / 2;
  EXPECT_NEAR(memory_time_ns(r, mid), (5000.0 + 1.0e6) / 2, 1e-6);
  EXPECT_DOUBLE_EQ(memory_time_ns(r, 1000), 5000.0); // below the curve: its smallest time
  EXPECT_NEAR(memory_time_ns(r, 2.0 * (int64_t{1} << 30)), 2.0e6, 1e-3); // beyond: its bandwidth
}

TEST(Predictor, LaunchFloorAndEfficiency) {
  const Roofs r = sample_roofs();
  PredictOp tiny;
  tiny.name = "residual1";
  tiny.work.kind = OpKind::elementwise;
  tiny.work.dtype = DType::bf16;
  tiny.work.flops = 10;
  PredictOptions o;
  EXPECT_EQ(predict_op(tiny, r, o).ceiling, Ceiling::launch);
  EXPECT_DOUBLE_EQ(predict_op(tiny, r, o).time_ns, 4000.0);
  o.graphs = true;
  EXPECT_DOUBLE_EQ(predict_op(tiny, r, o).time_ns, 1000.0);
  // An efficiency of 0.5 for GEMMs doubles the roof's time.
  o.efficiency["gemm"] = 0.5;
  const OpPrediction p = predict_op(gemm(8192, 8192, 8192), r, o);
  EXPECT_DOUBLE_EQ(p.time_ns, 2 * p.compute_ns);
  EXPECT_DOUBLE_EQ(p.efficiency, 0.5);
}

/// The MLP's all-reduce over 4 ranks of `bytes` (bus bytes 1.5 x that).
PredictOp all_reduce_of_4(double bytes) {
  PredictOp ar;
  ar.name = "allreduce_mlp";
  ar.comm_lane = true;
  ar.work.kind = OpKind::collective;
  ar.work.collective = "all_reduce";
  ar.work.group_size = 4;
  ar.work.busbw_factor = 1.5;
  ar.work.comm_bytes = bytes;
  return ar;
}

TEST(Predictor, CollectiveOverALinkPreset) {
  LinkPreset l{"nvlink", 400.0, 0.5, 10.0, "test"};
  // 10 us + 1e9 bytes x 1.5 (all-reduce over 4) / (400 x 0.5 GB/s) = 10 us + 7.5 ms.
  EXPECT_DOUBLE_EQ(link_collective_ns(l, 1e9, 1.5), 10e3 + 1.5e9 / 200.0);
  const PredictOp ar = all_reduce_of_4(1e9);
  PredictOptions o;
  o.tp_link = &l;
  const OpPrediction p = predict_op(ar, sample_roofs(), o);
  EXPECT_DOUBLE_EQ(p.interconnect_ns, 10e3 + 1.5e9 / 200.0);
  EXPECT_EQ(p.interconnect_source, "nvlink");
  EXPECT_EQ(p.ceiling, Ceiling::interconnect);
}

TEST(Predictor, InStepCollectiveAtTheMedianFitNeverBelowTheEnvelope) {
  InterconnectRoof r;
  r.collective = "all_reduce";
  r.group_size = 4;
  r.alpha_us = 12.0, r.beta_gbps = 100.0;            // medians
  r.floor_alpha_us = 8.0, r.floor_beta_gbps = 200.0; // best calls
  // 1 MB of bus bytes: fit 12 us + 1e6 / 100 ns = 22 us; envelope 8 us + 5 us = 13 us.
  EXPECT_DOUBLE_EQ(in_step_collective_ns(r, 1e6), 22e3);
  // A fit whose intercept fell below the envelope's (a least-squares fit can) keeps the
  // envelope: at no bytes 8 us, not 2 us.
  r.alpha_us = 2.0;
  EXPECT_DOUBLE_EQ(in_step_collective_ns(r, 0), 8e3);
  // No fit (beta 0): the envelope; an infinite bandwidth: the latency alone.
  r.beta_gbps = 0;
  EXPECT_DOUBLE_EQ(in_step_collective_ns(r, 1e6), 13e3);
  r.beta_gbps = std::numeric_limits<double>::infinity();
  r.alpha_us = 12.0;
  r.floor_beta_gbps = std::numeric_limits<double>::infinity();
  EXPECT_DOUBLE_EQ(in_step_collective_ns(r, 1e6), 12e3);

  // predict_op places a collective op of the roofs' group at that time.
  Roofs roofs = sample_roofs();
  r.transport = "auto";
  r.dtype = "bf16";
  r.beta_gbps = 100.0, r.floor_beta_gbps = 200.0;
  roofs.interconnect = {r};
  const PredictOp ar = all_reduce_of_4(1e6);
  const OpPrediction p = predict_op(ar, roofs, PredictOptions{});
  EXPECT_EQ(p.interconnect_source, "roofs");
  EXPECT_DOUBLE_EQ(p.interconnect_ns, 12e3 + 1.5e6 / 100.0);
}

// A measured roof serves a group only where its scope is the group's: a TP group across nodes
// takes the preset, the data-parallel reduction and the pipeline send the rows of their scopes.
TEST(Predictor, RoofsServeOnlyTheirScope) {
  Roofs roofs = sample_roofs();
  InterconnectRoof within;
  within.collective = "all_reduce";
  within.group_size = 4;
  within.transport = "auto";
  within.alpha_us = within.floor_alpha_us = 10.0;
  within.beta_gbps = within.floor_beta_gbps = 100.0;
  InterconnectRoof across = within;
  across.scope = Scope::inter;
  across.group_nodes = 4;
  across.alpha_us = across.floor_alpha_us = 30.0;
  across.beta_gbps = across.floor_beta_gbps = 10.0;
  InterconnectRoof send = across;
  send.collective = "sendrecv";
  send.group_size = 2;
  send.group_nodes = 2;
  roofs.interconnect = {within, across, send};
  LinkPreset ib{"ib-ndr", 50.0, 1.0, 5.0, "test"};
  PredictOptions o;
  o.tp_link = o.pp_link = o.dp_link = &ib;
  PredictOp ar = all_reduce_of_4(1e6);
  OpPrediction p = predict_op(ar, roofs, o);
  EXPECT_EQ(p.interconnect_source, "roofs");
  EXPECT_EQ(p.scope, Scope::intra);
  EXPECT_DOUBLE_EQ(p.interconnect_ns, 10e3 + 1.5e6 / 100.0);
  ar.work.scope = Scope::inter;
  p = predict_op(ar, roofs, o);
  EXPECT_EQ(p.interconnect_source, "roofs");
  EXPECT_EQ(p.scope, Scope::inter);
  EXPECT_DOUBLE_EQ(p.interconnect_ns, 30e3 + 1.5e6 / 10.0);
  ar.work.scope = Scope::hier; // no hier row: the preset
  p = predict_op(ar, roofs, o);
  EXPECT_EQ(p.interconnect_source, "ib-ndr");
  EXPECT_EQ(p.collective, "all_reduce");
  EXPECT_EQ(p.group_size, 4);
  // Data parallel over 4 nodes, a pipeline of 2 stages across nodes.
  o.dp = 4;
  o.dp_scope = Scope::inter;
  o.gradient_bytes = 1e6;
  o.train = true;
  o.pp = 2;
  o.p2p_bytes = 1e6;
  o.p2p_scope = Scope::inter;
  StepPrediction s = predict_step({gemm(1024, 1024, 1024)}, roofs, o);
  EXPECT_EQ(s.ops.back().name, "dp_allreduce");
  EXPECT_EQ(s.ops.back().interconnect_source, "roofs");
  EXPECT_EQ(s.ops.back().scope, Scope::inter);
  EXPECT_DOUBLE_EQ(s.dp_gradient_ns, 30e3 + 1.5e6 / 10.0);
  EXPECT_EQ(s.p2p.interconnect_source, "roofs");
  EXPECT_DOUBLE_EQ(s.p2p_ns, 30e3 + 1e6 / 10.0);
  // The same groups within a node: no intra row of those sizes, so the presets.
  o.dp_scope = o.p2p_scope = Scope::intra;
  o.dp = 2;
  s = predict_step({gemm(1024, 1024, 1024)}, roofs, o);
  EXPECT_EQ(s.ops.back().interconnect_source, "ib-ndr");
  EXPECT_EQ(s.p2p.interconnect_source, "ib-ndr");
}

TEST(Predictor, PipelineBubbleAndGradients) {
  EXPECT_DOUBLE_EQ(pipeline_bubble(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble(2, 1), 0.5);
  LinkPreset ib{"ib-ndr", 50.0, 1.0, 0.0, "test"};
  // 2 (dp - 1) / dp = 1.5 of 4e9 bytes at 50 GB/s: 120 ms.
  EXPECT_DOUBLE_EQ(dp_gradient_ns(4e9, 4, ib), 1.5 * 4e9 / 50.0);
  EXPECT_DOUBLE_EQ(dp_gradient_ns(4e9, 1, ib), 0.0);
}

TEST(Predictor, GradientBucketsAndWhenTheyMayStart) {
  // 60 bytes in buckets of 25: 25, 25, 10; no bucket size: one bucket.
  EXPECT_EQ(gradient_buckets(60, 25), (std::vector<double>{25, 25, 10}));
  EXPECT_EQ(gradient_buckets(60, 0), (std::vector<double>{60}));
  EXPECT_TRUE(gradient_buckets(0, 25).empty());
  // Three layers of 20 bytes, 10 us of backward each. Bucket 0 (bytes 0-25) covers layers 0
  // and 1: final 10 us before the end; bucket 1 (25-50) layers 1 and 2, bucket 2 layer 2: at
  // the end.
  const std::vector<double> ready = bucket_ready_before_end_ns({25, 25, 10}, 3, 10e3);
  EXPECT_EQ(ready, (std::vector<double>{10e3, 0, 0}));
  // One layer: every bucket waits for the end of the backward.
  EXPECT_EQ(bucket_ready_before_end_ns({25, 25, 10}, 1, 10e3), (std::vector<double>{0, 0, 0}));
  // Buckets of 6, 6 and 3 us: the first runs from -10 to -4 us, the second from 0 to 6, the
  // third to 9: 9 us after the end. Started 20 us before the end, all three end before it.
  EXPECT_DOUBLE_EQ(exposed_after_end_ns({6e3, 6e3, 3e3}, ready), 9e3);
  EXPECT_DOUBLE_EQ(exposed_after_end_ns({6e3, 6e3, 3e3}, {20e3, 20e3, 20e3}), 0.0);
  EXPECT_DOUBLE_EQ(exposed_after_end_ns({6e3, 6e3, 3e3}, {0, 0, 0}), 15e3);
  EXPECT_DOUBLE_EQ(exposed_after_end_ns({}, {}), 0.0);
}

TEST(Predictor, TrainStepAddsTheExposedGradientReductionAndTheStepOps) {
  const Roofs r = sample_roofs();
  LinkPreset l{"nvlink", 100.0, 1.0, 0.0, "test"};
  PredictOp fwd = gemm(8192, 8192, 8192), bwd = gemm(8192, 8192, 8192);
  bwd.backward = true;
  // The gradient buffer zeroed once per step: a 1 GiB write, 1e6 ns on the curve.
  PredictOp zero;
  zero.name = "grad_zero";
  zero.work.kind = OpKind::elementwise;
  zero.work.hbm_bytes = static_cast<double>(int64_t{1} << 30);
  zero.per_step = true;
  PredictOptions o;
  o.dp = 4;
  o.dp_link = &l;
  o.gradient_bytes = 60e6;
  o.bucket_bytes = 25e6;
  o.microbatches = 2;
  const double gemm_ns = predict_op(fwd, r, o).time_ns;
  // Forward phases: the reduction (3 buckets at 1.5 x bytes / 100 GB/s) beside the step.
  StepPrediction s = predict_step({fwd, bwd, zero}, r, o);
  EXPECT_DOUBLE_EQ(s.dp_gradient_ns, 1.5 * 60e6 / 100.0);
  EXPECT_DOUBLE_EQ(s.dp_exposed_ns, 0.0);
  EXPECT_DOUBLE_EQ(s.step_ns, 2 * 2 * gemm_ns + 1e6);
  // Train, one layer: every bucket after the backward, all of it exposed, and one op row.
  o.train = true;
  s = predict_step({fwd, bwd, zero}, r, o);
  EXPECT_DOUBLE_EQ(s.dp_exposed_ns, s.dp_gradient_ns);
  EXPECT_DOUBLE_EQ(s.step_ns, 2 * 2 * gemm_ns + 1e6 + s.dp_gradient_ns);
  EXPECT_DOUBLE_EQ(s.exposed_interconnect_ns, s.dp_gradient_ns);
  EXPECT_EQ(s.ops.back().name, "dp_allreduce");
  EXPECT_DOUBLE_EQ(s.ops.back().instances, 3.0);
  // Two layers (30 MB each): bucket 0 covers the first layer the backward finishes and starts
  // one layer's backward (the GEMM) before the end, which is longer than the three buckets.
  o.layers = 2;
  s = predict_step({fwd, bwd, zero}, r, o);
  EXPECT_DOUBLE_EQ(s.dp_exposed_ns, (25e6 + 10e6) * 1.5 / 100.0);
  // Without overlap the whole reduction follows the backward; sharded, a reduce-scatter
  // moves half the bus bytes.
  o.dp_overlap = false;
  EXPECT_DOUBLE_EQ(predict_step({fwd, bwd, zero}, r, o).dp_exposed_ns, s.dp_gradient_ns);
  o.dp_shard = true;
  s = predict_step({fwd, bwd, zero}, r, o);
  EXPECT_DOUBLE_EQ(s.dp_exposed_ns, 0.75 * 60e6 / 100.0);
  EXPECT_EQ(s.ops.back().name, "dp_reducescatter");
  // No roof and no link for the DP group: named as missing.
  o.dp_link = nullptr;
  EXPECT_EQ(predict_step({fwd, bwd, zero}, r, o).missing, "reduce_scatter over 4 ranks (intra)");
}

TEST(Predictor, StepCombinesLanesAndPipelineSlots) {
  const Roofs r = sample_roofs();
  LinkPreset l{"nvlink", 100.0, 1.0, 0.0, "test"};
  PredictOp ar;
  ar.name = "allreduce_mlp";
  ar.comm_lane = true;
  ar.work.kind = OpKind::collective;
  ar.work.collective = "all_reduce";
  ar.work.group_size = 2;
  ar.work.busbw_factor = 1.0;
  ar.work.comm_bytes = 1e6; // 10 us at 100 GB/s
  const PredictOp g = gemm(8192, 8192, 8192);
  PredictOptions o;
  o.tp_link = &l;
  o.pp_link = &l;
  const double compute = predict_op(g, r, o).time_ns;
  StepPrediction s = predict_step({g, ar}, r, o);
  EXPECT_DOUBLE_EQ(s.step_ns, compute + 1e4); // serialized
  EXPECT_EQ(s.ceiling, Ceiling::compute);
  o.overlap = true;
  s = predict_step({g, ar}, r, o);
  EXPECT_DOUBLE_EQ(s.step_ns, compute); // the collective hides under the GEMM
  // Two stages, four microbatches: 5 slots of (stage + a 1e6-byte send at 100 GB/s).
  o.overlap = false;
  o.pp = 2;
  o.microbatches = 4;
  o.p2p_bytes = 1e6;
  s = predict_step({g, ar}, r, o);
  EXPECT_DOUBLE_EQ(s.p2p_ns, 1e4);
  EXPECT_DOUBLE_EQ(s.step_ns, 5 * (compute + 1e4 + 1e4));
  EXPECT_DOUBLE_EQ(s.bubble, 1.0 / 5.0);
}

TEST(Predictor, GapsBetweenLaunchesLengthenTheStepAsLaunch) {
  const Roofs r = sample_roofs();
  LinkPreset l{"nvlink", 100.0, 1.0, 0.0, "test"};
  PredictOp ar = all_reduce_of_4(1e6); // 1.5e6 bus bytes at 100 GB/s: 15 us
  ar.instances = 2;
  PredictOp g = gemm(8192, 8192, 8192);
  g.instances = 2;
  g.work.kernels = 3;
  PredictOptions o;
  o.tp_link = &l;
  const StepPrediction without = predict_step({g, ar}, r, o);
  // 2 GEMMs of 3 kernels and 2 all-reduces of 1: 8 launches, 2.5 us apart: 20 us more, all of
  // it in the launch class, the exposed interconnect unchanged.
  o.gap_ns = 2500;
  const StepPrediction with = predict_step({g, ar}, r, o);
  EXPECT_DOUBLE_EQ(with.launches, 8.0);
  EXPECT_DOUBLE_EQ(with.gap_ns, 20e3);
  EXPECT_DOUBLE_EQ(with.step_ns, without.step_ns + 20e3);
  EXPECT_DOUBLE_EQ(with.class_ns[static_cast<int>(Ceiling::launch)],
                   without.class_ns[static_cast<int>(Ceiling::launch)] + 20e3);
  EXPECT_DOUBLE_EQ(with.exposed_interconnect_ns, 2 * 15e3);
  // Two stages, four microbatches: the gaps of 5 slots.
  o.pp = 2;
  o.microbatches = 4;
  EXPECT_DOUBLE_EQ(predict_step({g, ar}, r, o).class_ns[static_cast<int>(Ceiling::launch)],
                   5 * 20e3);
  // The roofs' floors the gap comes from: eager launches, or a graph's node.
  EXPECT_DOUBLE_EQ(launch_floor_ns(r, false), 4000.0);
  EXPECT_DOUBLE_EQ(launch_floor_ns(r, true), 1000.0);
}

TEST(Predictor, RoofsFromAHardwareDescription) {
  HardwareSpec hw;
  hw.name = "test";
  hw.bf16_tflops = 1000;
  hw.hbm_gbps = 4000;
  hw.compute_achievable = 0.8;
  hw.hbm_achievable = 0.9;
  hw.launch_eager_ns = 4000;
  const Roofs r = roofs_from_hardware(hw);
  EXPECT_DOUBLE_EQ(r.peak_tflops(DType::bf16), 800.0);
  EXPECT_DOUBLE_EQ(memory_time_ns(r, 3.6e9), 1e6); // 3.6 GB at 3600 GB/s
}

} // namespace
} // namespace ridgeline
