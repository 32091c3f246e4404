// MPI tests: the MPI communicator's collectives, and a tensor-parallel stage over all ranks
// computing the same output as the TP=1 stage (run under mpiexec -n 1, 2 and 4).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "collectives/communicator.hpp"
#include "collectives/half_types.hpp"
#include "collectives/peer_exchange.hpp"
#include "core/stats.hpp"
#include "parallel/grid.hpp"
#include "parallel/tp_layer.hpp"
#include "tests/support/mpi_world.hpp"
#include "tests/support/tp1_reference.hpp"

namespace ridgeline {
namespace {

TEST(MpiCommunicator, AllReduceSumAndAverage) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  const int n = comm->size(), r = comm->rank();
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(r + 1) * static_cast<float>(i);
  comm->all_reduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, nullptr);
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < v.size(); ++i)
    ASSERT_EQ(v[i], ranks_sum * static_cast<float>(i));
  std::vector<float> a(10, static_cast<float>(r)), out(10);
  comm->all_reduce(a.data(), out.data(), a.size(), DType::f32, ReduceOp::avg, nullptr);
  for (float x : out)
    ASSERT_FLOAT_EQ(x, static_cast<float>(n - 1) / 2.0f);
}

TEST(MpiCommunicator, Bf16SumUsesUserOp) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  std::vector<uint16_t> v(33, float_to_bf16(1.5f));
  comm->all_reduce(v.data(), v.data(), v.size(), DType::bf16, ReduceOp::sum, nullptr);
  for (uint16_t x : v)
    ASSERT_EQ(bf16_to_float(x), 1.5f * static_cast<float>(comm->size()));
  std::vector<uint16_t> m(5, float_to_f16(static_cast<float>(comm->rank())));
  comm->all_reduce(m.data(), m.data(), m.size(), DType::f16, ReduceOp::max, nullptr);
  for (uint16_t x : m)
    ASSERT_EQ(f16_to_float(x), static_cast<float>(comm->size() - 1));
}

TEST(MpiCommunicator, GatherScatterAllToAllBroadcastAndAsync) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  const int n = comm->size(), r = comm->rank();
  std::vector<int32_t> mine(3, r), all(static_cast<size_t>(3 * n));
  comm->all_gather(mine.data(), all.data(), 3, DType::i32, nullptr);
  for (int i = 0; i < 3 * n; ++i)
    ASSERT_EQ(all[static_cast<size_t>(i)], i / 3);
  std::vector<int32_t> send(static_cast<size_t>(2 * n), 1), recv(2);
  comm->reduce_scatter(send.data(), recv.data(), 2, DType::i32, ReduceOp::sum, nullptr);
  ASSERT_EQ(recv[0], n);
  std::vector<int32_t> a2a(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j)
    a2a[static_cast<size_t>(j)] = r * 100 + j;
  comm->all_to_all(a2a.data(), got.data(), 1, DType::i32, nullptr);
  for (int j = 0; j < n; ++j)
    ASSERT_EQ(got[static_cast<size_t>(j)], j * 100 + r);
  std::vector<int32_t> b(4, r == 0 ? 7 : -1);
  comm->broadcast(b.data(), b.data(), 4, DType::i32, 0, nullptr);
  ASSERT_EQ(b[3], 7);
  // A request on a tagged stream completes only at complete(); the buffer is final then.
  char tag = 0;
  std::vector<float> x(64, 1.0f);
  comm->all_reduce(x.data(), x.data(), x.size(), DType::f32, ReduceOp::sum, &tag);
  comm->complete(&tag);
  ASSERT_EQ(x[63], static_cast<float>(n));
}

TEST(MpiCommunicator, RingSendRecvInGroup) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  const int n = comm->size(), r = comm->rank();
  int32_t out = r, in = -1;
  comm->group_start();
  comm->send(&out, 1, DType::i32, (r + 1) % n, nullptr);
  comm->recv(&in, 1, DType::i32, (r + n - 1) % n, nullptr);
  comm->group_end();
  ASSERT_EQ(in, (r + n - 1) % n);
}

TEST(Grid, CoordinatesAreConsistent) {
  for (int w = 0; w < 24; ++w) {
    const GridCoords c = grid_coords(w, 2, 3);
    EXPECT_EQ(grid_rank(c, 2, 3), w);
    EXPECT_LT(c.tp_rank, 2);
    EXPECT_LT(c.pp_rank, 3);
  }
  ProcessGrid g(MPI_COMM_WORLD, world_size(), 1, 1);
  int tp_size = 0;
  MPI_Comm_size(g.tp_comm(), &tp_size);
  EXPECT_EQ(tp_size, world_size());
  EXPECT_THROW(ProcessGrid(MPI_COMM_WORLD, world_size() + 1, 1, 1), UsageError);
}

struct StageCase {
  const char* name;
  MlpKind mlp;
  NormKind norm;
  bool rotary;
  int64_t kv_heads;
  Phase phase;
};

class TpStageMatchesTp1 : public ::testing::TestWithParam<StageCase> {};

TEST_P(TpStageMatchesTp1, OnEveryRank) {
  const StageCase& c = GetParam();
  const int tp = world_size();
  ModelSpec m;
  m.hidden = 128;
  m.heads = 8;
  m.kv_heads = c.kv_heads;
  m.ffn_hidden = 256;
  m.layers = 2;
  m.mlp = c.mlp;
  m.norm = c.norm;
  m.rotary = c.rotary;
  StageSpec spec;
  spec.model = m;
  spec.shape.phase = c.phase;
  spec.shape.batch = 2;
  spec.shape.seq = c.phase == Phase::prefill ? 24 : 1;
  spec.shape.context = c.phase == Phase::decode ? 30 : 0;
  spec.shape.tp = tp;
  spec.tp_rank = world_rank();
  spec.num_layers = 2;
  spec.seed = 99;
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  OpTable ops;
  TpStage stage(*backend, tp > 1 ? comm.get() : nullptr, spec, ops);
  stage.fill_input(0);
  Recorder rec(backend->clock(), ops);
  backend->clock().start_epoch();
  stage.forward(rec);
  rec.flush();

  StageSpec ref_spec = spec;
  ref_spec.shape.tp = 1;
  ref_spec.tp_rank = 0;
  OpTable ref_ops;
  TpStage ref(*backend, nullptr, ref_spec, ref_ops);
  ref.fill_input(0);
  Recorder silent(backend->clock(), ref_ops);
  silent.set_enabled(false);
  ref.forward(silent);
  const std::vector<float> got = backend->to_host(stage.output());
  const std::vector<float> want = backend->to_host(ref.output());
  for (float v : got)
    ASSERT_TRUE(std::isfinite(v));
  EXPECT_LT(relative_l2(got, want), 1e-5) << c.name << " tp=" << tp;
  // Every op of both layers was recorded, collectives only when tp > 1.
  const size_t per_layer = stage.op_specs().size();
  EXPECT_EQ(rec.records().size(), 2 * per_layer);
  EXPECT_EQ(ops.find("allreduce_attn") >= 0, tp > 1);
}

INSTANTIATE_TEST_SUITE_P(
    Layers, TpStageMatchesTp1,
    ::testing::Values(
        StageCase{"gpt_prefill", MlpKind::gelu, NormKind::layernorm, false, 8, Phase::prefill},
        StageCase{"llama_prefill_gqa", MlpKind::swiglu, NormKind::rmsnorm, true, 4, Phase::prefill},
        StageCase{"llama_decode_gqa", MlpKind::swiglu, NormKind::rmsnorm, true, 4, Phase::decode},
        StageCase{"replicated_kv_decode", MlpKind::gelu, NormKind::rmsnorm, true, 1,
                  Phase::decode}),
    [](const ::testing::TestParamInfo<StageCase>& i) { return std::string(i.param.name); });

// A growing KV cache: step i appends at position context + i and attends to context + i + 1
// keys; every step's output equals the TP=1 stage's at the same step, the steps differ from
// each other, and a second pass over the steps (rewriting the rows the first pass appended)
// repeats the first pass exactly, which the protocol's repeated passes rely on.
TEST(DecodeSteps, EveryStepMatchesTp1) {
  const int tp = world_size();
  StageSpec spec;
  spec.model = small_llama_model();
  spec.shape.phase = Phase::decode;
  spec.shape.batch = 3;
  spec.shape.context = 7;
  spec.shape.decode_steps = 5;
  spec.shape.tp = tp;
  spec.tp_rank = world_rank();
  spec.num_layers = 2;
  spec.seed = 5;
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  OpTable ops, ref_ops;
  TpStage stage(*backend, tp > 1 ? comm.get() : nullptr, spec, ops);
  StageSpec ref_spec = spec;
  ref_spec.shape.tp = 1;
  ref_spec.tp_rank = 0;
  TpStage ref(*backend, nullptr, ref_spec, ref_ops);
  stage.fill_input(0);
  ref.fill_input(0);
  Recorder rec(backend->clock(), ops), silent(backend->clock(), ref_ops);
  rec.set_enabled(false);
  silent.set_enabled(false);
  std::vector<std::vector<float>> first_pass;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t step = 0; step < spec.shape.decode_steps; ++step) {
      stage.set_decode_step(step);
      stage.forward(rec);
      const std::vector<float> got = backend->to_host(stage.output());
      if (pass == 1) {
        EXPECT_EQ(got, first_pass[static_cast<size_t>(step)]) << "step " << step;
        continue;
      }
      ref.set_decode_step(step);
      ref.forward(silent);
      EXPECT_LT(relative_l2(got, backend->to_host(ref.output())), 1e-5)
          << "step " << step << " tp=" << tp;
      if (step > 0) {
        EXPECT_GT(relative_l2(got, first_pass.back()), 1e-3) << "step " << step;
      }
      first_pass.push_back(got);
    }
  EXPECT_THROW(stage.set_decode_step(spec.shape.decode_steps), Error);
  EXPECT_THROW(stage.set_decode_step(-1), Error);
}

} // namespace
} // namespace ridgeline

namespace ridgeline {
namespace {

struct OverlapCase {
  const char* name;
  const char* overlap;
  bool sequence_parallel;
  Phase phase;
  int64_t batch = 4;
  bool rotary = false;
  bool exchange = false; ///< the stage built with a peer exchange (its windows hold the buffers)
};

class OverlapMatchesTp1 : public ::testing::TestWithParam<OverlapCase> {};

// Every overlap strategy, with and without sequence parallelism, computes the TP=1 output; the
// compute-only and comm-only modes record only their own lane.
TEST_P(OverlapMatchesTp1, OnEveryRank) {
  const OverlapCase& c = GetParam();
  const int tp = world_size();
  ModelSpec m;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 4;
  m.ffn_hidden = 128;
  m.layers = 2;
  m.rotary = c.rotary;
  StageSpec spec;
  spec.model = m;
  spec.shape.phase = c.phase;
  spec.shape.batch = c.batch;
  spec.shape.seq = c.phase == Phase::prefill ? 16 : 1;
  spec.shape.context = c.phase == Phase::decode ? 9 : 0;
  spec.shape.tp = tp;
  spec.shape.sequence_parallel = c.sequence_parallel;
  spec.overlap = parse_overlap(c.overlap);
  spec.symmetric_buffers = spec.overlap.symmetric;
  spec.tp_rank = world_rank();
  spec.num_layers = 2;
  spec.seed = 5;
  if (!stage_split_problems(spec.shape, spec.overlap).empty())
    GTEST_SKIP() << "tokens do not split";
  auto backend = make_host_backend();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  std::unique_ptr<PeerExchange> exchange;
  if (c.exchange && tp > 1)
    exchange = make_mpi_exchange(MPI_COMM_WORLD, TpStage::exchange_windows(spec, DType::f32));
  OpTable ops;
  TpStage stage(*backend, tp > 1 ? comm.get() : nullptr, spec, ops, exchange.get());
  stage.fill_input(0);
  Recorder rec(backend->clock(), ops);
  backend->clock().start_epoch();
  stage.forward(rec);
  rec.flush();
  const std::vector<float> got = stage.gather_output();

  const std::vector<float> want = tp1_stage_output(*backend, spec);
  EXPECT_LT(relative_l2(got, want), 1e-5) << c.name << " tp=" << tp;
  // The rank's own rows, as the GPU tests compare them (under sequence parallelism a 1/tp piece
  // of every chunk of every part).
  EXPECT_LT(relative_l2(backend->to_host(stage.output()), rank_rows(want, spec)), 1e-5)
      << c.name << " tp=" << tp << ", this rank's rows";
  // MPI has no symmetric memory: the symm: strategies keep their schedule on ordinary buffers,
  // and say so.
  if (spec.symmetric_buffers)
    EXPECT_EQ(stage.symmetric_path().rfind(tp > 1 ? "none: mpi" : "none: at tp 1", 0), 0u)
        << stage.symmetric_path();
  else
    EXPECT_TRUE(stage.symmetric_path().empty());

  for (StageMode mode : {StageMode::compute_only, StageMode::comm_only}) {
    Recorder lane_rec(backend->clock(), ops);
    stage.set_mode(mode);
    stage.forward(lane_rec);
    lane_rec.flush();
    for (const TimelineRecord& r : lane_rec.records())
      EXPECT_EQ(r.lane == static_cast<uint8_t>(Lane::comm), mode == StageMode::comm_only) << c.name;
    if (tp == 1 && mode == StageMode::comm_only) {
      EXPECT_TRUE(lane_rec.records().empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, OverlapMatchesTp1,
    ::testing::Values(
        OverlapCase{"none", "none", false, Phase::prefill},
        OverlapCase{"async", "async", false, Phase::prefill},
        OverlapCase{"chunked4", "chunked:4", false, Phase::prefill},
        OverlapCase{"split2", "split:2", false, Phase::prefill},
        OverlapCase{"sp_none", "none", true, Phase::prefill},
        OverlapCase{"sp_chunked2", "chunked:2", true, Phase::prefill},
        OverlapCase{"sp_split2", "split:2", true, Phase::prefill},
        OverlapCase{"decode_split2", "split:2", false, Phase::decode},
        // One sequence split by tokens: later parts attend to earlier parts' keys,
        // and rotary positions continue across parts.
        OverlapCase{"tokens_split2", "split:2", false, Phase::prefill, 1, true},
        OverlapCase{"tokens_split4", "split:4", false, Phase::prefill, 1, true},
        OverlapCase{"tokens_sp_split2", "split:2", true, Phase::prefill, 1, true},
        OverlapCase{"decode_sp_chunked2", "chunked:2", true, Phase::decode},
        // The copy-engine ring's schedule over MPI messages, and the other
        // strategies gathering into the exchange's windows.
        OverlapCase{"ce_ring", "ce-ring", false, Phase::prefill, 4, false, true},
        OverlapCase{"ce_ring2", "ce-ring:2", false, Phase::prefill, 4, false, true},
        OverlapCase{"ce_ring4", "ce-ring:4", false, Phase::prefill, 4, true, true},
        OverlapCase{"decode_ce_ring2", "ce-ring:2", false, Phase::decode, 8, false, true},
        OverlapCase{"sp_ce_ring2", "ce-ring:2", true, Phase::prefill, 4, true, true},
        OverlapCase{"decode_sp_ce_ring2", "ce-ring:2", true, Phase::decode, 8, false, true},
        OverlapCase{"sp_ce_ring", "ce-ring", true, Phase::prefill, 4, true, true},
        OverlapCase{"decode_ce_ring", "ce-ring", false, Phase::decode, 4, false, true},
        OverlapCase{"decode_sp_ce_ring", "ce-ring", true, Phase::decode, 4, false, true},
        OverlapCase{"sp_chunked2_windows", "chunked:2", true, Phase::prefill, 4, false, true},
        OverlapCase{"async_windows", "async", false, Phase::prefill, 4, false, true},
        // symm: on the host: the same schedules on ordinary buffers.
        OverlapCase{"symm_none", "symm:none", false, Phase::prefill},
        OverlapCase{"symm_chunked2", "symm:chunked:2", false, Phase::prefill},
        OverlapCase{"sp_symm_async", "symm:async", true, Phase::prefill},
        OverlapCase{"sp_symm_chunked2", "symm:chunked:2", true, Phase::prefill},
        OverlapCase{"decode_sp_symm_chunked2", "symm:chunked:2", true, Phase::decode}),
    [](const ::testing::TestParamInfo<OverlapCase>& i) { return std::string(i.param.name); });

TEST(Overlap, ParsesAndRejects) {
  EXPECT_EQ(parse_overlap("chunked:4").chunks(), 4);
  EXPECT_EQ(parse_overlap("split:2").parts(), 2);
  EXPECT_EQ(parse_overlap("async").name(), "async");
  EXPECT_EQ(parse_overlap("ce-ring").name(), "ce-ring");
  EXPECT_EQ(parse_overlap("ce-ring").chunks() * parse_overlap("ce-ring").parts(), 1);
  EXPECT_EQ(parse_overlap("ce-ring").ring_subpieces(), 1);
  const Overlap ring4 = parse_overlap("ce-ring:4");
  EXPECT_EQ(ring4.name(), "ce-ring:4");
  EXPECT_EQ(ring4.ring_subpieces(), 4);
  EXPECT_EQ(ring4.chunks() * ring4.parts(), 1);
  EXPECT_EQ(parse_overlap("chunked:4").ring_subpieces(), 1);
  const Overlap symm = parse_overlap("symm:chunked:4");
  EXPECT_TRUE(symm.symmetric);
  EXPECT_EQ(symm.chunks(), 4);
  EXPECT_EQ(symm.name(), "symm:chunked:4");
  EXPECT_EQ(parse_overlap("symm:none").name(), "symm:none");
  EXPECT_EQ(parse_overlap("symm:async").kind, Overlap::Kind::async);
  EXPECT_FALSE(parse_overlap("chunked:4").symmetric);
  for (const char* bad : {"chunked", "chunked:1", "split:x", "fast", "chunked:-2", "", "ce-ring:1",
                          "ce-ring:x", "ce_ring", "symm", "symm:", "symm:split:2", "symm:ce-ring",
                          "symm:ce-ring:2", "symm:symm:none", "symm:chunked:1"})
    EXPECT_THROW(parse_overlap(bad), UsageError) << bad;
  LayerShape s;
  s.batch = 1;
  s.seq = 10;
  s.tp = 4;
  s.sequence_parallel = true;
  // One prefill sequence splits by tokens: only the rows (10 tokens in 2 parts x 4 shards) fail.
  EXPECT_EQ(stage_split_problems(s, parse_overlap("split:2")).size(), 1u);
  EXPECT_TRUE(splits_tokens(s, parse_overlap("split:2")));
  s.phase = Phase::decode;
  EXPECT_FALSE(splits_tokens(s, parse_overlap("split:2")));
  EXPECT_EQ(stage_split_problems(s, parse_overlap("split:2")).size(), 2u); // batch and rows
  s.phase = Phase::prefill;
  s.batch = 3;
  EXPECT_FALSE(splits_tokens(s, parse_overlap("split:2")));
  s.seq = 16;
  s.batch = 2;
  EXPECT_TRUE(stage_split_problems(s, parse_overlap("chunked:2")).empty());
  // ce-ring cuts the tokens into tp pieces, with or without sequence parallelism.
  s.phase = Phase::decode;
  s.batch = 6;
  s.sequence_parallel = false;
  EXPECT_EQ(stage_split_problems(s, parse_overlap("ce-ring")).size(), 1u);
  s.batch = 8;
  EXPECT_TRUE(stage_split_problems(s, parse_overlap("ce-ring")).empty());
  // ce-ring:K cuts each of the tp pieces into K, with or without sequence parallelism.
  EXPECT_TRUE(stage_split_problems(s, parse_overlap("ce-ring:2")).empty());
  const std::vector<std::string> rows = stage_split_problems(s, parse_overlap("ce-ring:4"));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NE(rows[0].find("do not divide into 16 sub-pieces"), std::string::npos) << rows[0];
  s.sequence_parallel = true;
  EXPECT_TRUE(stage_split_problems(s, parse_overlap("ce-ring:2")).empty());
  EXPECT_EQ(stage_split_problems(s, parse_overlap("ce-ring:4")).size(), 1u);
  EXPECT_TRUE(stage_split_problems(s, parse_overlap("ce-ring")).empty());
}

} // namespace
} // namespace ridgeline
