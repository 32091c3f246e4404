// The check of a trace run's steps (check_replay()) over all ranks (mpiexec -n 1, 2 and 4): a
// scheduled trace's steps on a tensor-parallel stage built at the scheduler's capacity mix,
// each held against the TP=1 stage of every layer running the same steps; a reference of other
// weights fails it; the stage's cache back to its built state (TpStage::reset_cache()) replays
// the steps to the same outputs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "app/trace_run.hpp"
#include "collectives/communicator.hpp"
#include "tests/support/mpi_world.hpp"
#include "tests/support/tp1_reference.hpp"

namespace ridgeline {
namespace {

const SchedulerConfig kScheduler{48, 16, 4, 400};
constexpr int64_t kLongest = 64; // --seq: the longest request a cache block holds

// Requests of prompts beyond one chunk and several outputs, arriving together: steps of prefill
// chunks alone, chunks beside decode tokens, and decode tokens alone.
ServingSchedule trace_schedule() {
  std::vector<Request> requests;
  const int64_t prompts[] = {20, 7, 33, 12, 5};
  const int64_t outputs[] = {4, 6, 2, 5, 3};
  for (int64_t i = 0; i < 5; ++i)
    requests.push_back(Request{i, 0.001 * static_cast<double>(i), prompts[i], outputs[i]});
  return schedule_requests(requests, kScheduler, [](const StepMix& mix) {
    return 1e5 * static_cast<double>(mix.tokens());
  });
}

// The stage built at the capacity mix, on this rank of the world's TP group.
StageSpec capacity_stage(int tp, uint64_t seed) {
  StageSpec spec;
  spec.model = small_llama_model();
  spec.mix = serving_capacity_mix(kScheduler, kLongest);
  spec.shape.phase = Phase::prefill;
  spec.shape.batch = 1;
  spec.shape.seq = spec.mix.tokens();
  spec.shape.tp = tp;
  spec.tp_rank = tp > 1 ? world_rank() : 0;
  spec.num_layers = spec.model.layers;
  spec.seed = seed;
  return spec;
}

// check_replay() of the schedule on the world's stage against a TP=1 stage of `reference_seed`
// built on rank 0.
ReplayCheck check_against(uint64_t reference_seed) {
  const int tp = world_size();
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  OpTable ops, reference_ops;
  StageSpec spec = capacity_stage(tp, 17);
  TpStage stage(*backend, tp > 1 ? comm.get() : nullptr, spec, ops);
  std::unique_ptr<TpStage> reference;
  if (world_rank() == 0) {
    StageSpec ref_spec = capacity_stage(1, reference_seed);
    reference = std::make_unique<TpStage>(*backend, nullptr, ref_spec, reference_ops);
  }
  Watchdog watchdog(120, "checking a trace's steps");
  return check_replay(trace_schedule(), stage, ops, reference.get(), reference_ops, *backend,
                      MPI_COMM_WORLD, watchdog, 1e-4);
}

TEST(TraceCheck, EveryStepMatchesTheTp1Model) {
  const ServingSchedule schedule = trace_schedule();
  ASSERT_GT(schedule.steps.size(), 5u);
  const ReplayCheck c = check_against(17);
  EXPECT_EQ(c.status, "passed") << "tp=" << world_size() << " max " << c.max_rel_error;
  EXPECT_EQ(c.steps, static_cast<int64_t>(schedule.steps.size()));
  EXPECT_LE(c.max_rel_error, 1e-4);
  ASSERT_EQ(c.step_error.size(), schedule.steps.size());
  for (double e : c.step_error)
    EXPECT_EQ(std::isnan(e), world_rank() != 0) << e; // compared on the reference's rank only
}

TEST(TraceCheck, OtherWeightsFailIt) {
  const ReplayCheck c = check_against(18);
  EXPECT_EQ(c.status, "failed") << "tp=" << world_size();
  EXPECT_GT(c.max_rel_error, 1e-4);
}

// The decode tokens of later steps read the cache rows earlier steps appended: the same steps
// again after reset_cache() give the same outputs, and without it (the cache as the first pass
// left it) a later step differs.
TEST(TraceCheck, ResetCacheReplaysTheSameOutputs) {
  const int tp = world_size();
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  OpTable ops;
  TpStage stage(*backend, tp > 1 ? comm.get() : nullptr, capacity_stage(tp, 17), ops);
  Recorder silent(backend->clock(), ops);
  silent.set_enabled(false);
  const ServingSchedule schedule = trace_schedule();
  auto pass = [&] {
    std::vector<std::vector<float>> out;
    for (const ScheduledStep& step : schedule.steps) {
      stage.set_mix(step.mix);
      stage.fill_input(0);
      stage.forward(silent);
      out.push_back(stage.gather_output());
    }
    return out;
  };
  const auto first = pass();
  const auto again = pass();
  stage.reset_cache();
  const auto reset = pass();
  EXPECT_EQ(reset, first);
  EXPECT_NE(again, first);
}

} // namespace
} // namespace ridgeline
