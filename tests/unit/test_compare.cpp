// `ridgeline compare` without files: the verdict rule on hand-made samples, the key -> layer
// registry, the stack diff of two in-memory runs, and the per-iteration op totals.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "app/compare.hpp"

namespace ridgeline {
namespace {

// `n` samples around `center`, each within +-`noise` (relative), from a fixed seed.
std::vector<double> series(double center, double noise, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i)
    v.push_back(center * (1 + u(rng)));
  return v;
}

TEST(CompareMedians, IdenticalSeriesAreUnchanged) {
  const std::vector<double> a = series(1e6, 0.05, 20, 1);
  const MedianChange c = compare_medians(a, a);
  EXPECT_TRUE(c.has_interval);
  EXPECT_DOUBLE_EQ(c.change, 0.0);
  EXPECT_LE(c.ci_low, 0.0);
  EXPECT_GE(c.ci_high, 0.0);
  EXPECT_FALSE(c.moved);
}

TEST(CompareMedians, TwentyPercentWithSmallNoiseMoved) {
  const MedianChange c = compare_medians(series(1e6, 0.01, 20, 1), series(1.2e6, 0.01, 20, 2));
  EXPECT_TRUE(c.moved);
  EXPECT_NEAR(c.change, 0.20, 0.02);
  EXPECT_GT(c.ci_low, 0.0); // the interval excludes 0
  EXPECT_LT(c.ci_low, c.change);
  EXPECT_GT(c.ci_high, c.change);
  EXPECT_GE(c.noise, kNoiseFloor);
  // Faster by the same amount moves too, with the interval below 0.
  const MedianChange faster = compare_medians(series(1.2e6, 0.01, 20, 2), series(1e6, 0.01, 20, 1));
  EXPECT_TRUE(faster.moved);
  EXPECT_LT(faster.ci_high, 0.0);
}

TEST(CompareMedians, LargeNoiseHidesTwentyPercent) {
  const MedianChange c = compare_medians(series(1e6, 0.6, 20, 3), series(1.2e6, 0.6, 20, 4));
  EXPECT_GT(c.noise, 0.2);
  EXPECT_FALSE(c.moved);
}

TEST(CompareMedians, SmallChangeBelowTheNoiseFloorIsUnchanged) {
  // Tight series 0.5 % apart: the interval excludes 0, but the change is under the 1 % floor.
  const MedianChange c =
      compare_medians(series(1e6, 0.0005, 30, 5), series(1.005e6, 0.0005, 30, 6));
  EXPECT_GT(c.ci_low, 0.0);
  EXPECT_DOUBLE_EQ(c.noise, kNoiseFloor);
  EXPECT_FALSE(c.moved);
}

TEST(CompareMedians, DeterministicAndNeedsEnoughSamples) {
  const std::vector<double> a = series(1e6, 0.1, 25, 7), b = series(1.1e6, 0.1, 25, 8);
  const MedianChange first = compare_medians(a, b);
  const MedianChange second = compare_medians(a, b);
  EXPECT_EQ(first.ci_low, second.ci_low);
  EXPECT_EQ(first.ci_high, second.ci_high);
  const MedianChange few =
      compare_medians(series(1e6, 0.01, kMinSamples - 1, 1), series(2e6, 0.01, 20, 2));
  EXPECT_FALSE(few.has_interval);
  EXPECT_FALSE(few.moved);
  EXPECT_NEAR(few.change, 1.0, 0.05);
}

TEST(StackLayers, RegistryMapsTheRecordedKeys) {
  EXPECT_EQ(stack_layer_of(KeySource::env, "NCCL_ALGO"), StackLayer::environment);
  EXPECT_EQ(stack_layer_of(KeySource::env, "OMPI_MCA_btl"), StackLayer::environment);
  EXPECT_EQ(stack_layer_of(KeySource::env, "OMPI_ARGV"), StackLayer::not_compared);
  EXPECT_EQ(stack_layer_of(KeySource::env, "OMPI_MCA_orte_hnp_uri"), StackLayer::not_compared);
  EXPECT_EQ(stack_layer_of(KeySource::env, "NCCL_VERSION"), StackLayer::nccl);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "nccl"), StackLayer::nccl);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "NCCL_P2P_DISABLE"), StackLayer::environment);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "cublaslt"), StackLayer::gemm_library);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "cuda_runtime"), StackLayer::cuda);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "driver"), StackLayer::driver);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "mpi_library"), StackLayer::mpi);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "hdf5"), StackLayer::hdf5);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "cxx_flags"), StackLayer::compiler);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "git_sha"), StackLayer::build);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "gpu_link_matrix"), StackLayer::hardware);
  EXPECT_EQ(stack_layer_of(KeySource::stack, "a_key_nobody_wrote"), StackLayer::other);
  EXPECT_EQ(stack_layer_of(KeySource::topology, "gpu_name"), StackLayer::hardware);
  EXPECT_EQ(stack_layer_of(KeySource::topology, "gpu_power_limit_w"), StackLayer::clocks);
  EXPECT_EQ(stack_layer_of(KeySource::topology, "pid"), StackLayer::not_compared);
  EXPECT_EQ(stack_layer_of(KeySource::summary, "gpu.step.sm_clock_mhz"), StackLayer::clocks);
  EXPECT_EQ(stack_layer_of(KeySource::summary, "gpu.instrumented.power_w"), StackLayer::clocks);
  EXPECT_EQ(stack_layer_of(KeySource::summary, "check_max_rel_error"), StackLayer::not_compared);
  EXPECT_EQ(stack_layer_of(KeySource::config, "batch"), StackLayer::configuration);
  EXPECT_EQ(stack_layer_of(KeySource::config, "out"), StackLayer::not_compared);
  EXPECT_EQ(stack_layer_of(KeySource::root, "created_utc"), StackLayer::not_compared);
  EXPECT_EQ(stack_layer_of(KeySource::root, "world_size"), StackLayer::hardware);
  EXPECT_STREQ(stack_layer_id(StackLayer::environment), "environment");
}

// A run as the fingerprint records it: two ranks of one host.
RunData make_run(const std::string& created, const std::string& out, int64_t pid) {
  RunData d;
  d.root = {{"schema_version", int64_t{1}}, {"git_sha", std::string("abc123")},
            {"created_utc", created},       {"argv", "ridgeline run --out " + out},
            {"world_size", int64_t{2}},     {"command", std::string("run")}};
  d.stack = {{"git_sha", std::string("abc123")},
             {"build_type", std::string("Release")},
             {"nccl", std::string("2.28.9")},
             {"mpi_library", std::string("Open MPI v4.1.4")}};
  d.env = {{"OMPI_ARGV", "run --out " + out}, {"OPENBLAS_NUM_THREADS", "1"}};
  d.config = {{"batch", int64_t{2}}, {"out", out}};
  for (int64_t r = 0; r < 2; ++r)
    d.topology.push_back({{"rank", r},
                          {"host", std::string("vm")},
                          {"pid", pid + r},
                          {"gpu_name", std::string("NVIDIA H200")}});
  d.summary.attrs = {{"gpu.step.sm_clock_mhz", 1980.0}, {"check_max_rel_error", 1e-7}};
  return d;
}

std::vector<StackDifference> compared(const std::vector<StackDifference>& diffs) {
  std::vector<StackDifference> out;
  for (const StackDifference& d : diffs)
    if (d.layer != StackLayer::not_compared) out.push_back(d);
  return out;
}

TEST(StackDiff, OneEnvironmentVariableNamesOnlyItsLayer) {
  RunData a = make_run("2026-11-23T10:00:00Z", "a.h5", 100);
  RunData b = make_run("2026-11-23T11:00:00Z", "b.h5", 200);
  // The "-dirty" flag, the time, argv, out and pids are run identity, not the stack.
  b.stack[0].second = std::string("abc123-dirty");
  b.summary.attrs[1].second = 3e-7;
  b.env.emplace_back("NCCL_ALGO", "Ring");
  const std::vector<StackDifference> diffs = diff_stack(a, b);
  const std::vector<StackDifference> layers = compared(diffs);
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0].layer, StackLayer::environment);
  EXPECT_EQ(layers[0].source, KeySource::env);
  EXPECT_EQ(layers[0].key, "NCCL_ALGO");
  EXPECT_EQ(layers[0].a, "(unset)");
  EXPECT_EQ(layers[0].b, "Ring");
  // The identity keys are reported apart; results in /summary are not stack keys at all.
  EXPECT_EQ(diffs.size() - layers.size(), 5u); // created_utc, argv, OMPI_ARGV, out, pid
  for (const StackDifference& d : diffs)
    EXPECT_NE(d.key, "check_max_rel_error");
}

TEST(StackDiff, LibraryConfigurationAndClocks) {
  const RunData a = make_run("t", "a.h5", 1);
  RunData b = make_run("t", "a.h5", 1);
  EXPECT_TRUE(diff_stack(a, b).empty());
  b.stack[2].second = std::string("2.29.1"); // nccl
  b.config[0].second = int64_t{8};           // batch
  b.summary.attrs[0].second = 1970.0;        // within the clocks' 2 % tolerance
  std::vector<StackDifference> diffs = diff_stack(a, b);
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_EQ(diffs[0].layer, StackLayer::nccl); // layer order: libraries before configuration
  EXPECT_EQ(diffs[1].layer, StackLayer::configuration);
  EXPECT_EQ(diffs[1].a, "2");
  EXPECT_EQ(diffs[1].b, "8");
  b.summary.attrs[0].second = 1600.0; // a throttled GPU
  diffs = diff_stack(a, b);
  ASSERT_EQ(diffs.size(), 3u);
  EXPECT_EQ(diffs[1].layer, StackLayer::clocks); // printed before the configuration
  EXPECT_EQ(diffs[1].key, "gpu.step.sm_clock_mhz");
}

TEST(StackDiff, MoreRanksIsTheWorldSizeNotEveryTopologyKey) {
  const RunData a = make_run("t", "a.h5", 1);
  RunData b = make_run("t", "a.h5", 1);
  b.root[4].second = int64_t{3};
  b.topology.push_back({{"rank", int64_t{2}},
                        {"host", std::string("vm")},
                        {"pid", int64_t{3}},
                        {"gpu_name", std::string("NVIDIA H200")}});
  const std::vector<StackDifference> diffs = compared(diff_stack(a, b));
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_EQ(diffs[0].key, "world_size");
  EXPECT_EQ(diffs[0].layer, StackLayer::hardware);
  b.topology[1][3].second = std::string("NVIDIA H100");
  EXPECT_EQ(compared(diff_stack(a, b)).size(), 2u);
}

TimelineRecord row(int32_t op, int32_t layer, int32_t iteration, bool warmup, int64_t start,
                   int64_t ns) {
  return {op,    layer,      0, iteration, 0, static_cast<uint8_t>(warmup ? 1 : 0),
          start, start + ns, 0, 0,         0};
}

TEST(OpTotals, PerIterationMaxOverRanksOfEachRanksSum) {
  OpTable ops;
  const int32_t gemm = ops.intern("gemm", OpKind::gemm);
  const int32_t norm = ops.intern("norm", OpKind::norm);
  // Iteration 0 is warm-up; gemm runs in two layers per iteration.
  const std::vector<std::vector<TimelineRecord>> timelines = {
      {row(gemm, 0, 0, true, 0, 999), row(gemm, 0, 1, false, 0, 10), row(gemm, 1, 1, false, 20, 15),
       row(norm, 0, 1, false, 40, 5), row(gemm, 0, 2, false, 100, 12),
       row(gemm, 1, 2, false, 120, 12)},
      {row(gemm, 0, 1, false, 0, 30), row(gemm, 1, 1, false, 40, 1), row(norm, 0, 1, false, 50, 7),
       row(gemm, 0, 2, false, 100, 5), row(gemm, 1, 2, false, 120, 5)}};
  const auto totals = op_totals_per_iteration(ops, timelines);
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals.at("gemm"), (std::vector<double>{31, 24}));
  EXPECT_EQ(totals.at("norm"), (std::vector<double>{7}));
}

// Instances in flight together (data-parallel buckets completed by one wait) count once: the
// union of their intervals, never more than the iteration's span.
TEST(OpTotals, OverlappingInstancesCountOnce) {
  OpTable ops;
  const int32_t bucket = ops.intern("dp_allreduce", OpKind::collective);
  const std::vector<std::vector<TimelineRecord>> timelines = {
      {row(bucket, -1, 1, false, 10, 90), row(bucket, -1, 1, false, 20, 80),
       row(bucket, -1, 1, false, 30, 70), row(bucket, -1, 1, false, 120, 5)}};
  EXPECT_EQ(op_totals_per_iteration(ops, timelines).at("dp_allreduce"),
            (std::vector<double>{90 + 5}));
}

} // namespace
} // namespace ridgeline
