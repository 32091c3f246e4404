// The crossover along a what-if link's bandwidth (`model --link-gbps --link-alpha-us`) on
// injected roofs: a step of one memory-bound op and one all-reduce, predicted at every link,
// and the lowest bandwidth at which the interconnect is no longer its ceiling, per latency.
#include <gtest/gtest.h>

#include "app/sweep.hpp"
#include "models/predictor.hpp"

namespace ridgeline {
namespace {

// 45e6 bytes at 1000 GB/s: 45 us of HBM; no launch floor.
Roofs injected_roofs() {
  Roofs r;
  r.backend = "cuda";
  r.memory.push_back({"read", int64_t{1} << 30, 5, 0, 0, 1000.0, -1});
  return r;
}

std::vector<PredictOp> step_ops() {
  PredictOp norm;
  norm.name = "norm1";
  norm.work.kind = OpKind::norm;
  norm.work.dtype = DType::bf16;
  norm.work.hbm_bytes = 45e6;
  PredictOp ar;
  ar.name = "allreduce_mlp";
  ar.comm_lane = true;
  ar.work.kind = OpKind::collective;
  ar.work.collective = "all_reduce";
  ar.work.group_size = 4;
  ar.work.busbw_factor = 1.5;
  ar.work.comm_bytes = 2e6; // 3e6 bus bytes: 120 us at 25 GB/s ... 6.67 us at 450
  return {norm, ar};
}

TEST(LinkCrossover, LowestBandwidthAtWhichTheInterconnectIsNoLongerTheCeiling) {
  const Roofs roofs = injected_roofs();
  std::vector<SweepRow> rows;
  for (double alpha_us : {2.0, 20.0, 50.0})
    for (double gbps : {25.0, 50.0, 100.0, 200.0, 450.0}) {
      const LinkPreset link{"what-if", gbps, 1.0, alpha_us, "test"};
      PredictOptions o;
      o.tp_link = &link;
      const StepPrediction s = predict_step(step_ops(), roofs, o);
      SweepRow r;
      r.point = static_cast<int64_t>(rows.size());
      r.axis[kLinkLatencyAxis] = std::to_string(alpha_us);
      r.axis[kLinkBandwidthAxis] = std::to_string(gbps);
      for (int c = 0; c < kCeilingClasses; ++c)
        r.class_ns[c] = s.class_ns[c];
      r.ceiling = ceiling_name(s.ceiling);
      rows.push_back(r);
    }
  // The all-reduce's 2 us + 3e6 / 50 ns = 62 us passes 45 us of HBM, 2 + 30 = 32 us does not.
  EXPECT_DOUBLE_EQ(rows[1].class_ns[static_cast<int>(Ceiling::interconnect)], 62e3);
  EXPECT_DOUBLE_EQ(rows[2].class_ns[static_cast<int>(Ceiling::hbm)], 45e3);
  const std::vector<Crossover> found =
      find_crossovers(rows, {kLinkLatencyAxis, kLinkBandwidthAxis});
  std::vector<const Crossover*> along;
  for (const Crossover& c : found)
    if (c.axis == kLinkBandwidthAxis) along.push_back(&c);
  ASSERT_EQ(along.size(), 3u);
  // alpha 2 us: interconnect-bound at 50 GB/s (62 us), HBM from 100 GB/s on (32 us < 45 us).
  EXPECT_EQ(along[0]->fixed, kLinkLatencyAxis + ("=" + std::to_string(2.0)));
  EXPECT_EQ(along[0]->kind, "hbm");
  EXPECT_FALSE(along[0]->predicted);
  EXPECT_EQ(along[0]->before_value, std::to_string(50.0));
  EXPECT_EQ(along[0]->at_value, std::to_string(100.0));
  EXPECT_DOUBLE_EQ(along[0]->rising_ns, 45e3);
  EXPECT_DOUBLE_EQ(along[0]->falling_ns, 32e3);
  // alpha 20 us: 20 + 30 = 50 us at 100 GB/s still passes HBM; 20 + 15 = 35 us at 200 does not.
  EXPECT_EQ(along[1]->at_value, std::to_string(200.0));
  EXPECT_DOUBLE_EQ(along[1]->falling_ns, 35e3);
  // alpha 50 us: the latency alone passes HBM, at every bandwidth of the grid.
  EXPECT_TRUE(along[2]->predicted);
  EXPECT_TRUE(along[2]->at_value.empty());
  EXPECT_EQ(along[2]->kind, "interconnect");
  // Along the latency, at 100 GB/s, the interconnect becomes the ceiling from 20 us on.
  bool latency_crossover = false;
  for (const Crossover& c : found)
    if (c.axis == kLinkLatencyAxis && c.fixed == kLinkBandwidthAxis + ("=" + std::to_string(100.0)))
      latency_crossover = c.kind == "interconnect" && c.at_value == std::to_string(20.0);
  EXPECT_TRUE(latency_crossover);
}

} // namespace
} // namespace ridgeline
