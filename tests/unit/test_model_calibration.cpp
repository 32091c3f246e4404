// The calibration's arithmetic (src/app/model_validation.cpp): which ops the event stamps'
// extra time is taken out of, on made-up aggregates (no time is measured here), and which
// phase a measured point calibrates.
#include <gtest/gtest.h>

#include <vector>

#include "app/model_detail.hpp"

namespace ridgeline::model_detail {
namespace {

OpAggregate op(const char* name, const char* kind, const char* lane, double per_step_ns) {
  OpAggregate a;
  a.name = name;
  a.kind = kind;
  a.lane = lane;
  a.per_step_p50_ns = per_step_ns;
  return a;
}

const std::vector<OpAggregate> kOps = {
    op("fc1_gemm", "gemm", "compute", 600), op("norm1", "norm", "compute", 200),
    op("allreduce_mlp", "collective", "comm", 200), op("pp_send", "p2p", "compute", 100),
    op("prefetch", "elementwise", "comm", 50)};

TEST(ModelCalibration, StampsBeyondTheGapsComeOutOfTheComputeLanesOps) {
  // 300 ns of stamps, 100 of them between ops: 200 out of the 800 ns of compute-lane ops.
  EXPECT_DOUBLE_EQ(stamped_ops_kept(kOps, 300, 100, false, false), 0.75);
}

TEST(ModelCalibration, CollectivesOnTheStepsPathShareTheStamps) {
  // Overlap none: the all-reduce runs between two compute ops, its stamps lengthened it too, so
  // the 200 ns come out of 1000 ns; the p2p op and the comm lane's other op stay out.
  EXPECT_DOUBLE_EQ(stamped_ops_kept(kOps, 300, 100, true, false), 0.8);
}

TEST(ModelCalibration, DataParallelReductionsBesideTheBackwardStayOut) {
  std::vector<OpAggregate> ops = kOps;
  ops.push_back(op("dp_allreduce", "collective", "comm", 1000));
  // --dp-overlap on: the gradient reduction runs beside the backward, off the step's path.
  EXPECT_DOUBLE_EQ(stamped_ops_kept(ops, 300, 100, true, false), 0.8);
  // --dp-overlap off: it runs after the backward, on the path: 200 ns out of 2000.
  EXPECT_DOUBLE_EQ(stamped_ops_kept(ops, 300, 100, true, true), 0.9);
}

TEST(ModelCalibration, NothingIsTakenWhereTheStampsAddedNoMoreThanTheGaps) {
  EXPECT_DOUBLE_EQ(stamped_ops_kept(kOps, 100, 100, true, false), 1.0);
  EXPECT_DOUBLE_EQ(stamped_ops_kept(kOps, 50, 100, false, false), 1.0);
  // More extra time than the ops took: not a share the ops could have kept.
  EXPECT_DOUBLE_EQ(stamped_ops_kept(kOps, 900, 0, false, false), 1.0);
  EXPECT_DOUBLE_EQ(stamped_ops_kept({}, 300, 100, true, false), 1.0);
}

RunConfig mixed_step(int64_t prefill_seqs, int64_t chunk, int64_t decode_batch) {
  RunConfig c;
  c.phase = "mixed";
  c.prefill_seqs = prefill_seqs;
  c.chunk = chunk;
  c.chunk_context = 0;
  c.decode_batch = decode_batch;
  c.context = 1024;
  c.seq = 2048;
  return c;
}

TEST(ModelCalibration, AMixedStepCalibratesThePhaseHoldingMostOfItsTokens) {
  EXPECT_EQ(calibration_phase(mixed_step(0, 512, 16)), "decode");
  EXPECT_EQ(calibration_phase(mixed_step(1, 8, 16)), "decode");
  EXPECT_EQ(calibration_phase(mixed_step(1, 512, 16)), "prefill");
  // A tie goes to prefill, as a trace's step is predicted.
  EXPECT_EQ(calibration_phase(mixed_step(1, 16, 16)), "prefill");
}

TEST(ModelCalibration, OtherPhasesAndTraceRunsKeepTheirOwn) {
  for (const char* phase : {"prefill", "decode", "train"}) {
    RunConfig c;
    c.phase = phase;
    EXPECT_EQ(calibration_phase(c), phase);
  }
  RunConfig trace = mixed_step(0, 512, 16);
  trace.trace_gen = "rate=4,requests=8,prompt=16,output=4,seed=1";
  EXPECT_EQ(calibration_phase(trace), "mixed");
}

} // namespace
} // namespace ridgeline::model_detail
