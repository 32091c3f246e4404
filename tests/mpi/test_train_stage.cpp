// MPI tests of the train stage under every strategy it runs: over all ranks as one TP group
// (mpiexec -n 2 and 4), with and without sequence parallelism, its outputs, input gradients and
// weight gradients against one rank computing the whole model (the run's check, with its fp32
// tolerance), the strategies switched on one stage as a point switches them; ce-ring through an
// MPI peer exchange over the group.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/peer_exchange.hpp"
#include "models/layer_plan.hpp"
#include "parallel/pipeline.hpp"
#include "parallel/stage_reference.hpp"
#include "parallel/train_stage.hpp"
#include "tests/support/mpi_world.hpp"

namespace ridgeline {
namespace {

// The run's check tolerance in fp32 (train_point.cpp).
constexpr double kTolerance = 1e-4;

const std::vector<std::string> kStrategies = {"none",      "async",      "chunked:2",
                                              "split:2",   "ce-ring",    "ce-ring:2",
                                              "symm:none", "symm:async", "symm:chunked:2"};

// The peer exchange a stage of `spec` puts through (ce-ring), over every rank; none at tp 1.
std::unique_ptr<PeerExchange> exchange_for(const TrainSpec& spec) {
  if (spec.shape.tp == 1) return nullptr;
  return make_mpi_exchange(MPI_COMM_WORLD, TrainStage::exchange_windows(spec, DType::f32));
}

struct TrainCase {
  const char* name;
  bool sequence_parallel;
  ScheduleKind schedule; ///< gpipe: backward at once; zb-h1: weight gradients deferred
  bool train;            ///< false: forward only (scheduled prefill), the outputs compared
  bool recompute;
};

TrainSpec small_train_spec(const TrainCase& c, int tp, int rank) {
  TrainSpec spec;
  spec.model.hidden = 64;
  spec.model.heads = 8;
  spec.model.kv_heads = 4;
  spec.model.ffn_hidden = 128;
  spec.model.layers = 2;
  spec.model.mlp = MlpKind::swiglu;
  spec.model.norm = NormKind::rmsnorm;
  spec.model.rotary = true;
  spec.shape.phase = Phase::prefill;
  spec.shape.batch = 4; // split:2 takes two whole sequences per part
  spec.shape.seq = 8;
  spec.shape.tp = tp;
  spec.shape.sequence_parallel = c.sequence_parallel && tp > 1;
  spec.tp_rank = rank;
  spec.chunks = {{0, 2}};
  spec.recompute = c.recompute;
  spec.symmetric_buffers = true;
  spec.seed = 17;
  return spec;
}

class TrainStageMatchesTp1 : public ::testing::TestWithParam<TrainCase> {};

TEST_P(TrainStageMatchesTp1, UnderEveryStrategy) {
  const TrainCase& c = GetParam();
  const int tp = world_size();
  TrainSpec spec = small_train_spec(c, tp, world_rank());
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  const int microbatches = 2;
  const StageReference reference =
      compute_stage_reference(*backend, spec, spec.model.layers, microbatches, c.train);
  OpTable ops;
  const auto exchange = exchange_for(spec);
  TrainStage stage(*backend, tp > 1 ? comm.get() : nullptr, spec, ops, exchange.get());
  // On MPI there is no symmetric memory: symm:S runs S on ordinary buffers and says so.
  if (tp > 1) {
    EXPECT_EQ(stage.symmetric_path().rfind("none: ", 0), 0u) << stage.symmetric_path();
  }
  PipelineSpec pipe;
  pipe.schedule = Schedule{c.schedule, 1};
  pipe.microbatches = microbatches;
  pipe.train = c.train;
  pipe.seed = spec.seed;
  PipelineDriver driver(*backend, nullptr, DataParallel{}, stage, ops, pipe);
  for (const std::string& name : kStrategies) {
    stage.set_variant(spec.attention, parse_overlap(name));
    driver.refresh_inputs();
    driver.capture();
    std::string skipped;
    double err = stage_check_error(*backend, stage, driver, reference, pipe, skipped);
    MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_TRUE(std::isfinite(err)) << name;
    EXPECT_LE(err, kTolerance) << c.name << " " << name << " tp=" << tp;
    EXPECT_TRUE(skipped.empty()) << skipped;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TrainStageMatchesTp1,
    ::testing::Values(TrainCase{"train", false, ScheduleKind::gpipe, true, false},
                      TrainCase{"train_sp", true, ScheduleKind::gpipe, true, false},
                      TrainCase{"train_zb_deferred", false, ScheduleKind::zb_h1, true, false},
                      TrainCase{"train_zb_deferred_sp", true, ScheduleKind::zb_h1, true, false},
                      TrainCase{"train_recompute_sp", true, ScheduleKind::gpipe, true, true},
                      TrainCase{"prefill_outputs", false, ScheduleKind::gpipe, false, false},
                      TrainCase{"prefill_outputs_sp", true, ScheduleKind::gpipe, false, false}),
    [](const ::testing::TestParamInfo<TrainCase>& i) { return std::string(i.param.name); });

// Whatever a strategy cuts an op into, its records of one iteration add up to the work model's
// cost of that op: every layer's op once per microbatch.
TEST(TrainStageRecords, SharesAddUpToThePlanUnderEveryStrategy) {
  const int tp = world_size();
  const TrainCase c{"sp", true, ScheduleKind::gpipe, true, false};
  const TrainSpec spec = small_train_spec(c, tp, world_rank());
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  OpTable ops;
  const auto exchange = exchange_for(spec);
  TrainStage stage(*backend, tp > 1 ? comm.get() : nullptr, spec, ops, exchange.get());
  PipelineSpec pipe;
  pipe.schedule = Schedule{ScheduleKind::gpipe, 1};
  pipe.microbatches = 2;
  pipe.seed = spec.seed;
  PipelineDriver driver(*backend, nullptr, DataParallel{}, stage, ops, pipe);
  const std::vector<OpSpec> plan = train_layer_plan(spec.model, spec.shape, spec.attention);
  for (const std::string& name : kStrategies) {
    stage.set_variant(spec.attention, parse_overlap(name));
    driver.refresh_inputs();
    Recorder rec(backend->clock(), ops);
    backend->clock().start_epoch();
    driver.step(rec);
    rec.flush();
    std::map<std::string, double> flops, comm_bytes;
    for (const TimelineRecord& r : rec.records()) {
      flops[ops.name(r.op_id)] += r.flops;
      comm_bytes[ops.name(r.op_id)] += r.comm_bytes;
    }
    const double times = static_cast<double>(spec.model.layers * pipe.microbatches);
    for (const OpSpec& o : plan) {
      EXPECT_NEAR(flops[o.name], o.cost.flops * times, 1e-6 * o.cost.flops * times + 1e-9)
          << name << " " << o.name;
      EXPECT_NEAR(comm_bytes[o.name], o.cost.comm_bytes * times,
                  1e-6 * o.cost.comm_bytes * times + 1e-9)
          << name << " " << o.name;
    }
  }
}

// The stage refuses what it cannot run, naming why; under sequence parallelism the rows a rank
// holds follow the strategy's units.
TEST(TrainStageStrategies, RefusalsAndRowLayout) {
  const int tp = world_size();
  const TrainCase c{"sp", true, ScheduleKind::gpipe, true, false};
  TrainSpec spec = small_train_spec(c, tp, world_rank());
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  OpTable ops;
  TrainStage stage(*backend, tp > 1 ? comm.get() : nullptr, spec, ops);
  // Built without a peer exchange, the stage refuses the ring (at tp 1 it has nothing to put).
  if (tp > 1) {
    try {
      stage.set_variant(spec.attention, parse_overlap("ce-ring"));
      ADD_FAILURE() << "ce-ring accepted without a peer exchange";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("peer exchange"), std::string::npos) << e.what();
    }
  }
  try {
    stage.set_variant(spec.attention, parse_overlap("split:8"));
    ADD_FAILURE() << "split:8 of 4 sequences accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("whole sequences"), std::string::npos) << e.what();
  }
  if (tp == 1) return;
  const int64_t tokens = spec.shape.batch * spec.shape.seq, piece = tokens / (2 * tp);
  stage.set_variant(spec.attention, parse_overlap("chunked:2"));
  EXPECT_EQ(stage.row_units(), 2);
  const std::vector<std::pair<int64_t, int64_t>> want = {
      {tokens + world_rank() * piece, piece}, {tokens + tokens / 2 + world_rank() * piece, piece}};
  EXPECT_EQ(stage.row_blocks(1), want);
  stage.set_variant(spec.attention, parse_overlap("async"));
  EXPECT_EQ(stage.row_units(), 1);
  spec.overlap = parse_overlap("split:3");
  EXPECT_THROW(TrainStage(*backend, comm.get(), spec, ops), UsageError);
}

} // namespace
} // namespace ridgeline
