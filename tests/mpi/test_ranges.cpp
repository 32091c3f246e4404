// Profiler ranges on the real path: a point run by run_point (the protocol's loops, the stage's
// ops, pipeline transfers) with a recording sink installed. Every range is pushed and popped in
// pairs, ops nest directly in an iteration, op ranges carry the op table's names, and the
// instrumented iterations open exactly one op range per timeline row. Built twice: on the host
// backend (label mpi; NVTX must stay off), and on the CUDA backend (label gpu; NVTX on, and a
// static NVTX injection must see the same ranges as the sink).
#include <gtest/gtest.h>
#include <mpi.h>

#include <map>
#include <set>
#include <string>

#include "app/commands.hpp"
#include "app/config.hpp"
#include "app/job.hpp"
#include "app/point.hpp"
#include "core/mpi_session.hpp"
#include "core/ranges.hpp"
#include "models/cuda_backend.hpp"
#include "models/work_model.hpp"
#include "tests/support/range_log.hpp"
#include "tests/support/test_session.hpp"
#if RIDGELINE_TEST_NVTX
#include "tests/support/nvtx_capture.hpp"
#endif

namespace ridgeline {
namespace {

#if RIDGELINE_TEST_CUDA
constexpr const char* kBackend = "cuda";
#else
constexpr const char* kBackend = "host";
#endif

bool is_iteration(const std::string& name) {
  return name.find(": iteration ") != std::string::npos ||
         name.find(": warm-up ") != std::string::npos;
}

TEST(Ranges, EveryOpAndIterationOfAPointIsARangeInPairs) {
  MpiSession& mpi = test_session();
#if RIDGELINE_TEST_CUDA
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  if (cuda_device_count() < mpi.local_size()) GTEST_SKIP() << "fewer GPUs than ranks on this node";
#endif
  CommandContext ctx{mpi, {"test_ranges"}, {}};
  JobContext job(ctx, kBackend);
  RunConfig cfg;
  cfg.backend = kBackend;
  cfg.hidden = 256; // head_dim 64: the fused attention kernel's smallest on GPUs
  cfg.heads = 4;
  cfg.kv_heads = 2;
  cfg.ffn_hidden = 256;
  cfg.layers = 2;
  cfg.batch = 2;
  cfg.seq = 16;
  cfg.rotary = "on";
  // Every rank in one TP group (two pipeline stages on four ranks): collectives, and with
  // four ranks pipeline transfers too.
  cfg.pp = mpi.size() >= 4 ? 2 : 1;
  cfg.tp = mpi.size() / cfg.pp;
  cfg.microbatches = cfg.pp;
  cfg.overlap = cfg.tp > 1 ? "none,async,chunked:2,split:2" : "none";
  cfg.warmup = 1;
  cfg.iters = 2;
  cfg.sample_ms = 0;
  const ResolvedPoint resolved = resolve_point(job, cfg);
  ASSERT_TRUE(resolved.ok()) << resolved.problems.front();

#if RIDGELINE_TEST_NVTX
  nvtx_capture::clear();
#endif
  RangeLog log;
  Watchdog watchdog(120, "the ranges test's point");
  const PointResult point = run_point(job, resolved.spec, Roofs{}, watchdog);
  ASSERT_TRUE(point.ok()) << point.status;

  // In pairs and properly nested: every pop closed an open range, none is left open.
  EXPECT_EQ(log.unmatched_pops(), 0u);
  EXPECT_TRUE(log.open().empty());
  EXPECT_EQ(log.pushes(), log.pops());

  const size_t strategies = point.strategies.size();
  const int rounds = strategies > 1 ? 5 : 1;
  const int modes = 3;
  size_t iterations = 0, instrumented_ops = 0;
  std::set<std::string> op_names;
  for (const RangeLog::Range& r : log.ranges()) {
    if (r.name == kReferenceRange) {
      EXPECT_EQ(r.depth, 0u);
      continue;
    }
    if (is_iteration(r.name)) {
      EXPECT_EQ(r.depth, 0u) << r.name;
      ++iterations;
      continue;
    }
    // Anything else is an op, directly inside an iteration (or the check's TP=1 reference),
    // named as in the op table.
    EXPECT_TRUE(is_iteration(r.parent) || r.parent == kReferenceRange)
        << r.name << " inside '" << r.parent << "'";
    if (r.parent == kReferenceRange) continue;
    EXPECT_GE(point.ops.find(r.name), 0) << r.name << " is not in the op table";
    op_names.insert(r.name);
    if (r.parent.find(" step: ") == std::string::npos &&
        r.parent.find(" compute_only: ") == std::string::npos &&
        r.parent.find(" comm_only: ") == std::string::npos)
      ++instrumented_ops;
  }
  EXPECT_EQ(iterations, strategies * static_cast<size_t>((cfg.warmup + cfg.iters) +
                                                         rounds * modes * cfg.iters));
  // Every op this rank runs has a range: the table less the transfer its stage does not make.
  int pp_rank = 0;
  for (const auto& [key, value] : point.coords)
    if (key == "pp_rank") pp_rank = static_cast<int>(std::get<int64_t>(value));
  for (size_t id = 0; id < point.ops.size(); ++id) {
    const std::string& name = point.ops.name(static_cast<int32_t>(id));
    if ((name == op::recv_act && pp_rank == 0) || (name == op::send_act && pp_rank == cfg.pp - 1))
      continue;
    EXPECT_TRUE(op_names.count(name)) << "no range for op " << name;
  }
  // One op range per row of this rank's timeline of the instrumented loops.
  size_t rows = 0;
  for (const StrategyResult& s : point.strategies)
    rows += s.rows.size();
  EXPECT_EQ(instrumented_ops, rows);

#if RIDGELINE_TEST_CUDA
  EXPECT_TRUE(ranges::nvtx_enabled());
#else
  EXPECT_FALSE(ranges::nvtx_enabled()) << "the host backend turned NVTX on";
#endif
#if RIDGELINE_TEST_NVTX
  // What a profiler sees: on the CUDA backend the sink's ranges in domain "ridgeline", on the
  // host backend nothing at all.
  const std::vector<nvtx_capture::Event> seen = nvtx_capture::events();
  if (std::string(kBackend) == "cuda") {
    ASSERT_TRUE(nvtx_capture::attached());
    std::vector<std::string> pushed;
    size_t pops = 0;
    for (const nvtx_capture::Event& e : seen) {
      EXPECT_EQ(e.domain, "ridgeline");
      if (e.push)
        pushed.push_back(e.name);
      else
        ++pops;
    }
    ASSERT_EQ(pushed.size(), log.ranges().size());
    for (size_t i = 0; i < pushed.size(); ++i)
      ASSERT_EQ(pushed[i], log.ranges()[i].name) << "range " << i;
    EXPECT_EQ(pops, log.pops());
  } else {
    EXPECT_TRUE(seen.empty()) << seen.size() << " NVTX events on the host backend";
  }
#endif
}

} // namespace
} // namespace ridgeline
