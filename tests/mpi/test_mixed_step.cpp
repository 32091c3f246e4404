// A mixed step on a tensor-parallel stage over all ranks (mpiexec -n 2 and 4): decode tokens
// at ragged contexts and prefill chunks after cached tokens, against the TP=1 stage computing
// the same step, and against the prefill and decode stages it reduces to.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "collectives/communicator.hpp"
#include "core/stats.hpp"
#include "parallel/tp_layer.hpp"
#include "tests/support/tp1_reference.hpp"

namespace ridgeline {
namespace {

// This rank and the ranks of the world: the TP group of every stage here.
int world(bool size) {
  int v = 0;
  (size ? MPI_Comm_size : MPI_Comm_rank)(MPI_COMM_WORLD, &v);
  return v;
}

// A stage of two layers running `mix` on this rank of `tp`.
StageSpec mixed_stage(const StepMix& mix, int tp, const std::string& overlap) {
  StageSpec spec;
  spec.model = small_llama_model();
  spec.shape.phase = Phase::prefill;
  spec.shape.batch = 1;
  spec.shape.seq = mix.tokens();
  spec.shape.tp = tp;
  spec.overlap = parse_overlap(overlap);
  spec.tp_rank = tp > 1 ? world(false) : 0;
  spec.num_layers = 2;
  spec.seed = 17;
  spec.mix = mix;
  return spec;
}

// The output of `spec`'s stage after `passes` forward passes of the same step (on every rank
// of the world when spec.shape.tp > 1).
std::vector<float> run_stage(Backend& backend, const StageSpec& spec, OpTable& ops,
                             Recorder* rec = nullptr, int passes = 1) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  TpStage stage(backend, spec.shape.tp > 1 ? comm.get() : nullptr, spec, ops);
  stage.fill_input(0);
  Recorder silent(backend.clock(), ops);
  silent.set_enabled(false);
  for (int i = 0; i < passes; ++i)
    stage.forward(rec ? *rec : silent);
  return backend.to_host(stage.output());
}

class MixedStepMatchesTp1 : public ::testing::TestWithParam<const char*> {};

// Ragged decode contexts (two equal, batched in one call), two chunks of unequal length (as a
// --prefill-share splits its tokens) after 5 cached tokens: every rank's output equals the TP=1
// stage's, and a repeated step (rewriting the cache rows the first wrote) gives the same
// output, which the protocol's repeated steps rely on.
TEST_P(MixedStepMatchesTp1, RaggedContexts) {
  std::vector<int64_t> contexts = ragged_contexts("uniform:1:40", 4, 3);
  contexts.insert(contexts.end(), {9, 9});
  const StepMix mix = mixed_step_mix(contexts, {7, 5}, 5);
  const StageSpec spec = mixed_stage(mix, world(true), GetParam());
  auto backend = make_host_backend();
  OpTable ops;
  Recorder rec(backend->clock(), ops);
  backend->clock().start_epoch();
  const std::vector<float> once = run_stage(*backend, spec, ops);
  const std::vector<float> got = run_stage(*backend, spec, ops, &rec, 2);
  rec.flush();
  const std::vector<float> want = tp1_stage_output(*backend, spec);
  ASSERT_EQ(got.size(), static_cast<size_t>(mix.tokens() * spec.model.hidden));
  for (float v : got)
    ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(got, once);
  EXPECT_LT(relative_l2(got, want), 1e-5) << GetParam() << " tp=" << spec.shape.tp;
  // The mixed step's ops, recorded under the work model's names.
  for (const char* name : {op::attention_prefill, op::attention_decode, op::kv_append, op::rotary})
    EXPECT_GE(ops.find(name), 0) << name;
  EXPECT_LT(ops.find(op::attention), 0);
}

INSTANTIATE_TEST_SUITE_P(Overlaps, MixedStepMatchesTp1,
                         ::testing::Values("none", "async", "chunked:2"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string name = i.param;
                           return name.substr(0, name.find(':'));
                         });

// Decode tokens alone, every one at the same context: the decode stage of that batch and
// context (the same inputs, weights and cache rows).
TEST(MixedStep, EqualContextsAreADecodeStep) {
  const int tp = world(true);
  const StageSpec spec = mixed_stage(mixed_step_mix({11, 11, 11}, {}, 0), tp, "none");
  StageSpec decode = spec;
  decode.mix = StepMix{};
  decode.shape.phase = Phase::decode;
  decode.shape.batch = 3;
  decode.shape.seq = 1;
  decode.shape.context = 11;
  auto backend = make_host_backend();
  OpTable ops, decode_ops;
  const std::vector<float> got = run_stage(*backend, spec, ops);
  EXPECT_LT(relative_l2(got, run_stage(*backend, decode, decode_ops)), 1e-6) << "tp=" << tp;
}

// One chunk of a prompt's first tokens: the prefill stage of one sequence of them.
TEST(MixedStep, AFirstChunkIsAPrefill) {
  const int tp = world(true);
  const StageSpec spec = mixed_stage(mixed_step_mix({}, {12}, 0), tp, "none");
  StageSpec prefill = spec;
  prefill.mix = StepMix{};
  auto backend = make_host_backend();
  OpTable ops, prefill_ops;
  const std::vector<float> got = run_stage(*backend, spec, ops);
  EXPECT_LT(relative_l2(got, run_stage(*backend, prefill, prefill_ops)), 1e-6) << "tp=" << tp;
}

TEST(MixedStep, RefusesStrategiesThatCutTheStep) {
  const StepMix mix = mixed_step_mix({4, 9}, {8}, 0);
  EXPECT_EQ(mixed_overlap_problem(parse_overlap("none"), false), "");
  EXPECT_NE(mixed_overlap_problem(parse_overlap("split:2"), false), "");
  EXPECT_NE(mixed_overlap_problem(parse_overlap("ce-ring"), false), "");
  EXPECT_NE(mixed_overlap_problem(parse_overlap("none"), true), "");
  if (world(true) < 2) return;
  auto backend = make_host_backend();
  OpTable ops;
  EXPECT_THROW(run_stage(*backend, mixed_stage(mix, world(true), "split:2"), ops), UsageError);
}

} // namespace
} // namespace ridgeline
