// Unit tests of core: statistics, op table, recorder, profiler ranges, element types, half
// conversions, errors.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <memory>
#include <string>
#include <thread>

#include "collectives/half_types.hpp"
#include "core/checked_math.hpp"
#include "core/checksum.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/gpu_binding.hpp"
#include "core/ranges.hpp"
#include "core/stamped_loop.hpp"
#include "core/stats.hpp"
#include "core/timeline.hpp"
#include "core/watchdog.hpp"
#include "tests/support/range_log.hpp"

namespace ridgeline {
namespace {

TEST(Stats, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2, 5};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3.0);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 5.0);
  EXPECT_DOUBLE_EQ(percentile(v, 95), 4.8); // numpy.percentile([1..5], 95)
  EXPECT_DOUBLE_EQ(percentile({10, 20}, 25), 12.5);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
}

TEST(Stats, SummarizeOrdersPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i)
    v.push_back(i);
  const SeriesStats s = summarize(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.p50, 50.5);
  EXPECT_NEAR(s.p95, 95.05, 1e-9);
  EXPECT_NEAR(s.p99, 99.01, 1e-9);
}

TEST(Stats, WarmupToSteadyFindsFirstSettledIteration) {
  // Iterations 0 and 1 are slow (cold caches, lazy init); from 2 on within 10% of p50 = 100.
  EXPECT_EQ(warmup_to_steady({500, 180, 105, 98, 101}, 100, 0.10), 2u);
  EXPECT_EQ(warmup_to_steady({100, 100}, 100, 0.10), 0u);
  EXPECT_EQ(warmup_to_steady({100, 300}, 100, 0.10), 2u); // never settled
  EXPECT_EQ(warmup_to_steady({}, 100, 0.10), 0u);
}

TEST(Checksum, Fnv1a64MatchesTheReferenceVectors) {
  // Vectors of the FNV reference test suite (64-bit FNV-1a).
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ULL);
  // Continuing a hash equals hashing the concatenation.
  EXPECT_EQ(fnv1a64("bar", 3, fnv1a64("foo", 3)), fnv1a64("foobar", 6));
  const unsigned char le[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
  EXPECT_EQ(fnv1a64_u64(0x0102030405060708ULL, kFnv1a64Offset), fnv1a64(le, 8));
  EXPECT_EQ(checksum_hex(0xaf63dc4c8601ec8cULL), "af63dc4c8601ec8c");
  EXPECT_EQ(checksum_hex(1), "0000000000000001");
}

TEST(OpTable, InternIsStableAndRejectsKindChanges) {
  OpTable t;
  EXPECT_EQ(t.intern("qkv_gemm", OpKind::gemm), 0);
  EXPECT_EQ(t.intern("allreduce", OpKind::collective), 1);
  EXPECT_EQ(t.intern("qkv_gemm", OpKind::gemm), 0);
  EXPECT_EQ(t.find("allreduce"), 1);
  EXPECT_EQ(t.find("missing"), -1);
  EXPECT_EQ(t.kind(1), OpKind::collective);
  EXPECT_THROW(t.intern("qkv_gemm", OpKind::norm), Error);
  EXPECT_EQ(parse_op_kind(op_kind_name(OpKind::attention)), OpKind::attention);
  EXPECT_THROW(parse_op_kind("bogus"), Error);
}

TEST(Recorder, RecordsOrderedStampsWithIterationAndCost) {
  OpTable ops;
  HostClock clock;
  Recorder rec(clock, ops);
  const int32_t a = ops.intern("a", OpKind::gemm);
  const int32_t b = ops.intern("b", OpKind::collective);
  clock.start_epoch();
  rec.set_iteration(0, true);
  { ScopedOp s(rec, a, 3, Lane::compute, OpCost{10, 20, 0}, Lane::compute); }
  rec.set_iteration(1, false);
  rec.set_microbatch(2);
  const size_t h = rec.begin(b, 4, Lane::comm, OpCost{0, 0, 64}, Lane::compute);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  rec.end(h);
  rec.set_enabled(false);
  { ScopedOp s(rec, a, 5, Lane::compute, OpCost{}, Lane::compute); } // not recorded
  rec.flush();
  ASSERT_EQ(rec.records().size(), 2u);
  const TimelineRecord& r0 = rec.records()[0];
  const TimelineRecord& r1 = rec.records()[1];
  EXPECT_EQ(r0.op_id, a);
  EXPECT_EQ(r0.layer, 3);
  EXPECT_EQ(r0.warmup, 1);
  EXPECT_DOUBLE_EQ(r0.flops, 10);
  EXPECT_EQ(r1.op_id, b);
  EXPECT_EQ(r1.iteration, 1);
  EXPECT_EQ(r1.microbatch, 2);
  EXPECT_EQ(r1.warmup, 0);
  EXPECT_EQ(r1.lane, static_cast<uint8_t>(Lane::comm));
  EXPECT_DOUBLE_EQ(r1.comm_bytes, 64);
  EXPECT_GE(r0.t_start_ns, 0);
  EXPECT_LE(r0.t_end_ns, r1.t_start_ns);
  EXPECT_GE(r1.t_end_ns - r1.t_start_ns, 2'000'000);
}

TEST(Recorder, FlushRejectsOpsThatNeverEnded) {
  OpTable ops;
  HostClock clock;
  Recorder rec(clock, ops);
  clock.start_epoch();
  rec.begin(ops.intern("x", OpKind::other), 0, Lane::compute, OpCost{});
  EXPECT_THROW(rec.flush(), Error);
}

// A clock whose n-th stamp since the epoch reads 10 n + the lane (exact arithmetic, no time).
class CountingClock final : public Clock {
public:
  void start_epoch() override { m_stamps.clear(); }
  size_t stamp(Lane lane) override {
    m_stamps.push_back(10 * m_next++ + static_cast<int64_t>(lane));
    return m_stamps.size() - 1;
  }
  std::vector<int64_t> collect() override {
    std::vector<int64_t> out;
    out.swap(m_stamps);
    return out;
  }
  const char* name() const override { return "counting"; }

private:
  int64_t m_next = 0;
  std::vector<int64_t> m_stamps;
};

// The one timed loop: every call once and in order, the samples cut as the protocol's
// sub-batches are (sample j ends after call (j + 1) x calls / samples - 1), one mark between two
// samples (or, paired, two), each sample's time over its calls; marks on the given queue, also
// while the Recorder is disabled; no sample without a call.
TEST(StampedLoop, CutsTheCallsIntoContiguousSamples) {
  CountingClock clock;
  OpTable ops;
  Recorder rec(clock, ops);
  rec.set_enabled(false);
  std::vector<int> seen;
  std::vector<StampedSample> samples;
  stamped_loop(
      rec, Lane::comm, 7, 3,
      [&](int i) {
        seen.push_back(i);
        clock.stamp(Lane::compute); // a stamp of the call's own
      },
      samples);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].calls, 2);
  EXPECT_EQ(samples[1].calls, 2);
  EXPECT_EQ(samples[2].calls, 3);
  EXPECT_EQ(samples[0].end, samples[1].begin);
  EXPECT_EQ(samples[1].end, samples[2].begin);
  rec.flush();
  // Stamps: mark 0, calls 0 and 1 (1, 2), mark 3, calls 2 and 3 (4, 5), mark 6, calls 4, 5 and 6
  // (7, 8, 9), mark 10; the marks on the comm queue read 10 n + 1.
  EXPECT_EQ(rec.mark_ns(samples[0].begin), 1);
  EXPECT_EQ(rec.mark_ns(samples[2].end), 101);
  EXPECT_EQ(ns_per_call(rec, samples), (std::vector<double>{15.0, 15.0, 40.0 / 3.0}));
  EXPECT_EQ(samples[2].ns(rec), 40.0);
  // Paired: a mark of its own before each sample (stamps 11 to 16: mark, call, mark, mark,
  // call, mark).
  std::vector<StampedSample> paired;
  stamped_loop(
      rec, Lane::compute, 2, 2, [&](int) { clock.stamp(Lane::comm); }, paired, SampleMarks::paired);
  ASSERT_EQ(paired.size(), 2u);
  EXPECT_NE(paired[0].end, paired[1].begin);
  rec.flush();
  EXPECT_EQ(rec.mark_ns(paired[0].begin), 110);
  EXPECT_EQ(rec.mark_ns(paired[1].begin), 140);
  EXPECT_EQ(ns_per_call(rec, paired), (std::vector<double>{20.0, 20.0}));
  std::vector<StampedSample> none;
  EXPECT_THROW(stamped_loop(
                   rec, Lane::compute, 2, 3, [](int) {}, none),
               Error);
  EXPECT_THROW(stamped_loop(
                   rec, Lane::compute, 0, 0, [](int) {}, none),
               Error);
  EXPECT_TRUE(none.empty());
}

TEST(Ranges, ScopesPushAndPopInPairsEvenWhenAnExceptionLeavesThem) {
  RangeLog log;
  try {
    const ranges::Scope outer("outer");
    const ranges::Scope inner(std::string("inner"));
    throw Error("op failed");
  } catch (const Error&) {
  }
  {
    const ranges::Scope lazy([] { return std::string("built ") + "lazily"; });
  }
  ASSERT_EQ(log.ranges().size(), 3u);
  EXPECT_EQ(log.ranges()[1].name, "inner");
  EXPECT_EQ(log.ranges()[1].parent, "outer");
  EXPECT_EQ(log.ranges()[2].name, "built lazily");
  EXPECT_EQ(log.ranges()[2].depth, 0u);
  EXPECT_EQ(log.pushes(), log.pops());
  EXPECT_EQ(log.unmatched_pops(), 0u);
  EXPECT_TRUE(log.open().empty());
}

TEST(Ranges, InactiveScopesBuildNoNameAndARangePopsWhereItPushed) {
  if (ranges::nvtx_enabled()) GTEST_SKIP() << "NVTX is on in this process";
  EXPECT_FALSE(ranges::active());
  bool built = false;
  {
    const ranges::Scope unseen([&] {
      built = true;
      return std::string("unseen");
    });
  }
  EXPECT_FALSE(built);
  // A sink installed while a range is open gets no pop for the push it never saw.
  std::unique_ptr<RangeLog> late;
  {
    const ranges::Scope opened_before("opened before the sink");
    late = std::make_unique<RangeLog>();
  }
  EXPECT_EQ(late->pushes(), 0u);
  EXPECT_EQ(late->pops(), 0u);
}

TEST(Recorder, ScopedOpOpensARangeNamedAsTheOpTable) {
  OpTable ops;
  const int32_t recv = ops.intern("pp_recv", OpKind::p2p);
  HostClock clock;
  clock.start_epoch();
  Recorder rec(clock, ops);
  RangeLog log;
  { ScopedOp s(rec, recv, 0, Lane::p2p, OpCost{}, Lane::compute); }
  rec.set_enabled(false);
  { ScopedOp s(rec, recv, 0, Lane::p2p, OpCost{}, Lane::compute); } // ranges also when not recorded
  ASSERT_EQ(log.ranges().size(), 2u);
  EXPECT_EQ(log.ranges()[0].name, "pp_recv");
  EXPECT_EQ(log.pops(), 2u);
}

TEST(GpuPlacement, DeviceIsTheLocalRankModuloTheVisibleGpus) {
  EXPECT_EQ(device_for_local_rank(0, 4), 0);
  EXPECT_EQ(device_for_local_rank(5, 4), 1);
  EXPECT_EQ(device_for_local_rank(3, 1), 0); // a launcher gave the rank its own GPU
  EXPECT_EQ(device_for_local_rank(0, 0), -1);
}

TEST(GpuPlacement, MoreRanksThanGpusIsRefusedUnlessAllowed) {
  const GpuPlacement refused = decide_gpu_placement(8, 4, false, "n1");
  EXPECT_TRUE(refused.shared);
  EXPECT_TRUE(refused.refused);
  EXPECT_EQ(refused.ranks_per_gpu, 2);
  EXPECT_NE(refused.problem.find("8 ranks on host n1 share 4 GPUs"), std::string::npos)
      << refused.problem;
  EXPECT_NE(refused.problem.find("--allow-shared-gpu"), std::string::npos);

  const GpuPlacement allowed = decide_gpu_placement(3, 2, true, "n1");
  EXPECT_TRUE(allowed.shared);
  EXPECT_FALSE(allowed.refused);
  EXPECT_EQ(allowed.ranks_per_gpu, 2);
  EXPECT_TRUE(allowed.problem.empty());

  EXPECT_TRUE(decide_gpu_placement(2, 1, false, "n1").refused);
}

TEST(GpuPlacement, OneRankPerGpuOrNoGpuIsFine) {
  for (const auto& [ranks, gpus] :
       std::vector<std::pair<int, int>>{{4, 4}, {2, 8}, {1, 1}, {4, 0}, {0, 0}}) {
    const GpuPlacement p = decide_gpu_placement(ranks, gpus, false, "n1");
    EXPECT_FALSE(p.shared) << ranks << " ranks, " << gpus << " GPUs";
    EXPECT_FALSE(p.refused);
    EXPECT_EQ(p.ranks_per_gpu, 1);
  }
}

TEST(DType, NamesRoundTrip) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_THROW(parse_dtype("fp8"), UsageError);
}

TEST(HalfTypes, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.01171875f), 0x3f82); // halfway 0x3f81/0x3f82 -> even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-3.5f)), -3.5f);
}

TEST(HalfTypes, F16CoversNormalsSubnormalsAndOverflow) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(float_to_f16(-2.5f)), -2.5f);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(70000.0f), 0x7c00); // inf
  const float tiny = std::ldexp(1.0f, -24);  // smallest fp16 subnormal
  EXPECT_EQ(float_to_f16(tiny), 0x0001);
  EXPECT_EQ(f16_to_float(0x0001), tiny);
  EXPECT_EQ(f16_to_float(float_to_f16(std::ldexp(3.0f, -20))), std::ldexp(3.0f, -20));
  for (uint16_t h = 0; h < 0x7c00; h += 7)
    EXPECT_EQ(float_to_f16(f16_to_float(h)), h) << h;
}

TEST(Error, CheckNamesCallAndLocation) {
  try {
    throw_error("dir/file.cpp", 42, "do_thing()", "it broke");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "file.cpp:42: do_thing(): it broke");
  }
  EXPECT_NO_THROW(check(0, "MPI_Foo()", __FILE__, __LINE__));
  EXPECT_THROW(check(1, "MPI_Foo()", __FILE__, __LINE__), Error);
}

} // namespace
} // namespace ridgeline

namespace ridgeline {
namespace {

// The watchdog tests hold to one rule: a stall the watchdog must not see is far shorter than
// its timeout, and one it must see far longer, so that a loaded machine (a thread that wakes a
// few hundred milliseconds late) changes neither outcome. Only a failing death test waits out
// the whole sleep.
constexpr std::chrono::seconds kLongerThanAnyStall{60};
constexpr double kKeepAliveTimeoutS = 1.5;
constexpr std::chrono::milliseconds kKeepAliveStep{50};

TEST(WatchdogDeathTest, ExitsWhenAPhaseOverruns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w(0.2, "waiting for a peer");
        std::this_thread::sleep_for(kLongerThanAnyStall);
      },
      ::testing::ExitedWithCode(124), "timed out after 0 s: waiting for a peer");
}

TEST(WatchdogDeathTest, NamesTheIterationItStoppedAt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w(0.3, "recorded iterations of none");
        for (int it = 0; it < 4; ++it)
          w.iteration(it);
        std::this_thread::sleep_for(kLongerThanAnyStall);
      },
      ::testing::ExitedWithCode(124),
      "timed out after 0 s: recorded iterations of none, iteration 3");
}

// A timeout beyond what the clock's nanosecond count holds means never: the deadline saturates
// at the clock's end instead of wrapping into the past (which fired the watchdog at once).
TEST(Watchdog, HugeTimeoutsSaturate) {
  using clock = std::chrono::steady_clock;
  const clock::time_point now = clock::now();
  for (double seconds : {1e9, 1e10, 1e300, HUGE_VAL, std::nan("")}) {
    EXPECT_EQ(timeout_duration(seconds), clock::duration::max()) << seconds;
    EXPECT_EQ(time_after(now, timeout_duration(seconds)), clock::time_point::max()) << seconds;
  }
  EXPECT_EQ(timeout_duration(2.5), std::chrono::milliseconds(2500));
  EXPECT_EQ(time_after(now, std::chrono::seconds(1)), now + std::chrono::seconds(1));
  EXPECT_EQ(whole_seconds(1e10), INT_MAX);
  EXPECT_EQ(whole_seconds(HUGE_VAL), INT_MAX);
  EXPECT_EQ(whole_seconds(299.2), 300);
}

// Size products refuse to wrap: 2^32 x 2^32 once became 0 and a buffer of 0 bytes was written.
TEST(CheckedMul, RefusesProductsBeyond64Bits) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31, "n"), int64_t{1} << 62);
  EXPECT_EQ(checked_mul(0, INT64_MAX, "n"), 0);
  EXPECT_THROW(checked_mul(int64_t{1} << 32, int64_t{1} << 32, "gemm"), UsageError);
  EXPECT_THROW(checked_mul(INT64_MAX, 2, "n"), UsageError);
  EXPECT_THROW(checked_mul(-1, 2, "n"), UsageError);
  Tensor t;
  t.rows = int64_t{1} << 32;
  t.cols = int64_t{1} << 32;
  EXPECT_THROW(t.elements(), UsageError);
  t.cols = int64_t{1} << 30;
  EXPECT_THROW(t.bytes(), UsageError); // 2^62 elements of 4 bytes
}

// iteration() alone (atomic stores, no lock) restarts the countdown: a loop of many short
// iterations outlasts the timeout. The loop runs until more than the timeout has passed, not
// for a count of iterations, and each iteration is a small part of the timeout.
TEST(Watchdog, IterationsKeepTheProcessAlive) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto outlast = std::chrono::duration<double>(4.0 / 3.0 * kKeepAliveTimeoutS);
  Watchdog w(kKeepAliveTimeoutS, "a long loop");
  int it = 0;
  for (; clock::now() - start < outlast; ++it) {
    std::this_thread::sleep_for(kKeepAliveStep);
    w.iteration(it);
  }
  EXPECT_EQ(progress::phase(), "a long loop");
  EXPECT_EQ(progress::position().second, it - 1);
}

// Each rearm restarts the countdown: four phases, each a third of the timeout, outlast it.
TEST(Watchdog, RearmAndDisarmKeepTheProcessAlive) {
  const auto phase = std::chrono::duration<double>(kKeepAliveTimeoutS / 3);
  Watchdog w(kKeepAliveTimeoutS, "phase 0");
  for (int k = 1; k <= 4; ++k) {
    std::this_thread::sleep_for(phase);
    w.rearm("phase " + std::to_string(k));
  }
  EXPECT_EQ(progress::phase(), "phase 4");
}

} // namespace
} // namespace ridgeline
