// A mixed step on a tensor-parallel stage over all ranks (mpiexec -n 2 and 4): decode tokens
// at ragged contexts and prefill chunks after cached tokens, against the TP=1 stage computing
// the same step, and against the prefill and decode stages it reduces to.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "collectives/communicator.hpp"
#include "core/stats.hpp"
#include "parallel/tp_layer.hpp"
#include "tests/support/mpi_world.hpp"
#include "tests/support/tp1_reference.hpp"

namespace ridgeline {
namespace {

// A stage of two layers running `mix` on this rank of `tp`.
StageSpec mixed_stage(const StepMix& mix, int tp, const std::string& overlap) {
  StageSpec spec;
  spec.model = small_llama_model();
  spec.shape.phase = Phase::prefill;
  spec.shape.batch = 1;
  spec.shape.seq = mix.tokens();
  spec.shape.tp = tp;
  spec.overlap = parse_overlap(overlap);
  spec.tp_rank = tp > 1 ? world_rank() : 0;
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
  const StageSpec spec = mixed_stage(mix, world_size(), GetParam());
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
  const int tp = world_size();
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
  const int tp = world_size();
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
  if (world_size() < 2) return;
  auto backend = make_host_backend();
  OpTable ops;
  EXPECT_THROW(run_stage(*backend, mixed_stage(mix, world_size(), "split:2"), ops), UsageError);
}

// A stage built at a capacity and switched to smaller mixes (TpStage::set_mix()). Every mix
// here but kSmallBlocks needs the capacity's 41 cache rows per sequence: the stage built
// directly at it then has the same cache blocks (stride and contents) as the switched one.
const StepMix kCapacity = mixed_step_mix({40, 40, 40, 40}, {9, 7}, 32); // 20 tokens, 6 seqs
const StepMix kMixed = mixed_step_mix({40, 25}, {6}, 20);               // 8 tokens
const StepMix kDecodeOnly = mixed_step_mix({40, 25, 20, 11}, {}, 0);    // 4 tokens
const StepMix kPrefillOnly = mixed_step_mix({}, {10, 4}, 31);           // 14 tokens
const StepMix kSmallBlocks = mixed_step_mix({5, 9}, {4}, 2);            // 10 rows a sequence

// The outputs of a stage built for `capacity`, switched to each of `mixes` in turn, one
// forward each (on every rank of the world when tp > 1).
std::vector<std::vector<float>> run_switched(Backend& backend, const StageSpec& capacity,
                                             const std::vector<StepMix>& mixes) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  OpTable ops;
  TpStage stage(backend, capacity.shape.tp > 1 ? comm.get() : nullptr, capacity, ops);
  Recorder silent(backend.clock(), ops);
  silent.set_enabled(false);
  std::vector<std::vector<float>> outputs;
  for (const StepMix& mix : mixes) {
    stage.set_mix(mix);
    stage.fill_input(0);
    stage.forward(silent);
    outputs.push_back(backend.to_host(stage.output()));
  }
  return outputs;
}

class SwitchedMix : public ::testing::TestWithParam<const char*> {};

// Each kind of smaller mix (fewer tokens and sequences, other contexts; decode tokens and
// prefill chunks, decode tokens alone, prefill chunks alone), switched to on a fresh stage
// built at the capacity: the output of the stage built at that mix, bit for bit.
TEST_P(SwitchedMix, EqualsTheStageBuiltAtTheMix) {
  const int tp = world_size();
  auto backend = make_host_backend();
  for (const StepMix& mix : {kMixed, kDecodeOnly, kPrefillOnly}) {
    OpTable ops;
    const std::vector<float> want = run_stage(*backend, mixed_stage(mix, tp, GetParam()), ops);
    const std::vector<std::vector<float>> got =
        run_switched(*backend, mixed_stage(kCapacity, tp, GetParam()), {mix});
    ASSERT_EQ(got[0].size(), static_cast<size_t>(mix.tokens() * small_llama_model().hidden));
    EXPECT_EQ(got[0], want) << GetParam() << " tp=" << tp << " tokens=" << mix.tokens();
  }
}

// The capacity, then kMixed, kDecodeOnly, kMixed on one stage: each step the output of the
// stage built at its mix. (No step reads a cache row an earlier one appended to: each
// sequence's block is read below the rows the earlier steps wrote.)
TEST_P(SwitchedMix, SwitchingRepeatedlyReproducesEachMix) {
  const int tp = world_size();
  auto backend = make_host_backend();
  const std::vector<StepMix> mixes = {kCapacity, kMixed, kDecodeOnly, kMixed};
  const std::vector<std::vector<float>> got =
      run_switched(*backend, mixed_stage(kCapacity, tp, GetParam()), mixes);
  for (size_t i = 0; i < mixes.size(); ++i) {
    OpTable ops;
    EXPECT_EQ(got[i], run_stage(*backend, mixed_stage(mixes[i], tp, GetParam()), ops))
        << GetParam() << " tp=" << tp << " step " << i;
  }
  EXPECT_EQ(got[1], got[3]);
}

// A mix of fewer cache rows a sequence than the capacity's reads its blocks at the capacity's
// stride: its output is the TP=1 stage's switched the same way.
TEST_P(SwitchedMix, SmallerBlocksMatchTp1) {
  const int tp = world_size();
  auto backend = make_host_backend();
  const std::vector<float> got =
      run_switched(*backend, mixed_stage(kCapacity, tp, GetParam()), {kSmallBlocks})[0];
  const std::vector<float> want =
      run_switched(*backend, mixed_stage(kCapacity, 1, "none"), {kSmallBlocks})[0];
  ASSERT_EQ(got.size(), static_cast<size_t>(kSmallBlocks.tokens() * small_llama_model().hidden));
  for (float v : got)
    ASSERT_TRUE(std::isfinite(v));
  EXPECT_LT(relative_l2(got, want), 1e-5) << GetParam() << " tp=" << tp;
}

// Decode tokens needing fewer cache rows than the capacity's, each sequence read from its block
// at the capacity's stride: their output rows are those of the stage built with two more decode
// tokens that need the capacity's 41 rows (the same blocks, rows computed row by row).
TEST_P(SwitchedMix, SmallerBlocksKeepTheCapacitysStride) {
  const int tp = world_size();
  auto backend = make_host_backend();
  const StepMix decode = mixed_step_mix({5, 9}, {}, 0);
  const std::vector<float> got =
      run_switched(*backend, mixed_stage(kCapacity, tp, GetParam()), {decode})[0];
  OpTable ops;
  std::vector<float> want =
      run_stage(*backend, mixed_stage(mixed_step_mix({5, 9, 40, 40}, {}, 0), tp, GetParam()), ops);
  want.resize(got.size());
  EXPECT_LT(relative_l2(got, want), 1e-6) << GetParam() << " tp=" << tp;
}

INSTANTIATE_TEST_SUITE_P(Overlaps, SwitchedMix, ::testing::Values("none", "async", "chunked:2"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string name = i.param;
                           return name.substr(0, name.find(':'));
                         });

// The op costs after a switch are the work model's for the new mix, its ops interned: a stage
// built for decode tokens alone switched to prefill chunks alone records attention_prefill.
TEST(SwitchedMix, OpSpecsAreTheNewMixs) {
  const int tp = world_size();
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  OpTable ops;
  const StageSpec capacity = mixed_stage(mixed_step_mix({40, 40, 40, 40}, {}, 0), tp, "none");
  TpStage stage(*backend, tp > 1 ? comm.get() : nullptr, capacity, ops);
  EXPECT_LT(ops.find(op::attention_prefill), 0);
  const StepMix prefill = mixed_step_mix({}, {4}, 20);
  stage.set_mix(prefill);
  EXPECT_GE(ops.find(op::attention_prefill), 0);
  const std::vector<OpSpec> want = stage_ops(mixed_stage(prefill, tp, "none"), capacity.attention);
  ASSERT_EQ(stage.op_specs().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(stage.op_specs()[i].name, want[i].name);
    EXPECT_EQ(stage.op_specs()[i].cost.flops, want[i].cost.flops) << want[i].name;
    EXPECT_EQ(stage.op_specs()[i].cost.hbm_bytes, want[i].cost.hbm_bytes) << want[i].name;
    EXPECT_EQ(stage.op_specs()[i].cost.comm_bytes, want[i].cost.comm_bytes) << want[i].name;
  }
  Recorder rec(backend->clock(), ops);
  backend->clock().start_epoch();
  stage.fill_input(0);
  stage.forward(rec);
  rec.flush();
  EXPECT_EQ(stage.output().rows, prefill.tokens());
}

// Mixes beyond the capacity (tokens, sequences, cache rows a sequence), malformed ones, tokens
// chunked:2 cannot halve, and a stage built without a mix are refused; a refused switch leaves
// the stage running its mix.
TEST(SwitchedMix, RefusesWhatTheStageCannotHold) {
  const int tp = world_size();
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  OpTable ops;
  const StageSpec capacity = mixed_stage(kCapacity, tp, "chunked:2");
  TpStage stage(*backend, tp > 1 ? comm.get() : nullptr, capacity, ops);
  stage.set_mix(kMixed);
  EXPECT_THROW(stage.set_mix(mixed_step_mix({5, 5}, {20}, 0)), UsageError); // 22 tokens
  EXPECT_THROW(stage.set_mix(mixed_step_mix({5, 5, 5, 5, 5, 5, 5}, {}, 0)), UsageError); // 7
  EXPECT_THROW(stage.set_mix(mixed_step_mix({41, 5}, {}, 0)), UsageError);               // 42 rows
  EXPECT_THROW(stage.set_mix(mixed_step_mix({}, {2}, 40)), UsageError);                  // 42 rows
  EXPECT_THROW(stage.set_mix(StepMix{}), UsageError);
  StepMix miscounted = kMixed;
  miscounted.decode_tokens += 1;
  EXPECT_THROW(stage.set_mix(miscounted), UsageError);
  EXPECT_THROW(stage.set_mix(mixed_step_mix({40, 40, 40}, {}, 0)), UsageError); // 3 tokens
  Recorder silent(backend->clock(), ops);
  silent.set_enabled(false);
  stage.fill_input(0);
  stage.forward(silent);
  OpTable direct_ops;
  EXPECT_EQ(backend->to_host(stage.output()),
            run_stage(*backend, mixed_stage(kMixed, tp, "chunked:2"), direct_ops));

  StageSpec prefill = capacity;
  prefill.mix = StepMix{};
  prefill.overlap = Overlap{};
  OpTable prefill_ops;
  TpStage plain(*backend, tp > 1 ? comm.get() : nullptr, prefill, prefill_ops);
  EXPECT_THROW(plain.set_mix(kMixed), UsageError);
}

} // namespace
} // namespace ridgeline
