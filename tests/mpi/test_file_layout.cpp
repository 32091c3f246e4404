// Timelines that never meet on rank 0, under mpiexec -n 2 and 4: rows cross MPI in pieces of
// any size; the distributed summary equals the reduction over every rank's whole timeline; both
// file layouts write each rank's rows where readers and `validate` find them, and validation
// finds a missing or foreign node file.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "app/file_layout.hpp"
#include "app/h5.hpp"
#include "app/run_file.hpp"
#include "app/summary.hpp"
#include "core/mpi_session.hpp"
#include "core/stats.hpp"
#include "tests/support/mpi_world.hpp"

namespace ridgeline {
namespace {

namespace fs = std::filesystem;

OpTable test_ops() {
  OpTable ops;
  ops.intern("norm", OpKind::norm);
  ops.intern("gemm", OpKind::gemm);
  ops.intern("all_reduce", OpKind::collective);
  ops.intern("send", OpKind::p2p);
  ops.intern("never", OpKind::elementwise); // no rank records it: no aggregate
  return ops;
}

// Rank `rank`'s timeline of a pipeline-like job: stages of two layers each (rank % 2 picks the
// stage), two microbatches, 2 warm-up and 5 timed iterations; durations differ by rank, op,
// layer and iteration, and some ops repeat inside one instance (chunks), as chunked overlap does.
std::vector<TimelineRecord> rank_timeline(int rank, int rows_scale = 1) {
  std::vector<TimelineRecord> rows;
  int64_t t = 17 * rank;
  const int stage = rank % 2;
  for (int it = 0; it < 7; ++it)
    for (int mb = 0; mb < 2; ++mb)
      for (int layer = 2 * stage; layer < 2 * stage + 2; ++layer)
        for (int32_t op = 0; op < 4; ++op) {
          if (op == 3 && (stage == 1 || layer != 1)) continue; // stage 0 sends after its last layer
          const int repeats = op == 1 ? 2 * rows_scale : 1;
          for (int c = 0; c < repeats; ++c) {
            TimelineRecord r{};
            r.op_id = op;
            r.layer = layer;
            r.microbatch = mb;
            r.iteration = it;
            r.lane = static_cast<uint8_t>(op >= 2 ? op - 1 : 0);
            r.warmup = it < 2 ? 1 : 0;
            r.t_start_ns = t;
            t += 100 + 37 * op + ((rank * 7 + it * 3 + layer + c) % 11) * (op + 1);
            r.t_end_ns = t;
            t += 3;
            r.flops = 1e6 * (op + 1);
            r.hbm_bytes = 1e3 * (op + 2);
            r.comm_bytes = op >= 2 ? 4096.0 : 0.0;
            rows.push_back(r);
          }
        }
  return rows;
}

bool comm_kind(OpKind k) {
  return k == OpKind::collective || k == OpKind::p2p;
}

// The documented semantics (docs/SCHEMA.md /summary) computed from every rank's whole timeline
// in one process: what the distributed reduction must reproduce exactly.
RunSummary reference(const OpTable& ops,
                     const std::vector<std::vector<TimelineRecord>>& timelines) {
  RunSummary s;
  std::map<int32_t, double> steps[2];
  for (const auto& rank : timelines) {
    std::map<std::pair<bool, int32_t>, std::pair<int64_t, int64_t>> span;
    for (const TimelineRecord& r : rank) {
      auto key = std::make_pair(r.warmup != 0, r.iteration);
      auto it = span.find(key);
      if (it == span.end())
        span[key] = {r.t_start_ns, r.t_end_ns};
      else
        it->second = {std::min(it->second.first, r.t_start_ns),
                      std::max(it->second.second, r.t_end_ns)};
    }
    for (const auto& [key, se] : span) {
      double& step = steps[key.first ? 1 : 0][key.second];
      step = std::max(step, static_cast<double>(se.second - se.first));
    }
  }
  for (const auto& kv : steps[0])
    s.step_ns.push_back(kv.second);
  for (const auto& kv : steps[1])
    s.warmup_step_ns.push_back(kv.second);
  s.step = summarize(s.step_ns);
  s.warmup_to_steady = static_cast<int64_t>(warmup_to_steady(s.warmup_step_ns, s.step.p50, 0.10));
  for (size_t id = 0; id < ops.size(); ++id) {
    const OpKind kind = ops.kind(static_cast<int32_t>(id));
    std::map<std::tuple<int32_t, int32_t, int32_t, int>, double> instance;
    // Per (iteration, rank): the op's intervals, whose union is its time in the step.
    std::map<std::pair<int32_t, int>, std::vector<std::pair<int64_t, int64_t>>> per_step;
    const TimelineRecord* sample = nullptr;
    int ranks_with_op = 0;
    size_t timed = 0;
    for (size_t rank = 0; rank < timelines.size(); ++rank) {
      bool seen = false;
      for (const TimelineRecord& r : timelines[rank]) {
        if (r.warmup || r.op_id != static_cast<int32_t>(id)) continue;
        seen = true;
        sample = &r;
        ++timed;
        const double d = static_cast<double>(r.t_end_ns - r.t_start_ns);
        double& t = instance[{r.layer, r.microbatch, r.iteration,
                              comm_kind(kind) ? -1 : static_cast<int>(rank)}];
        t = std::max(t, d);
        per_step[{r.iteration, static_cast<int>(rank)}].emplace_back(r.t_start_ns, r.t_end_ns);
      }
      ranks_with_op += seen ? 1 : 0;
    }
    if (!sample) continue;
    std::vector<double> inst;
    for (const auto& kv : instance)
      inst.push_back(kv.second);
    std::map<int32_t, double> totals;
    for (auto [k, spans] : per_step) {
      std::sort(spans.begin(), spans.end());
      double covered = 0;
      int64_t begin = spans.front().first, end = spans.front().second;
      for (const auto& [b, e] : spans) {
        if (b > end) {
          covered += static_cast<double>(end - begin);
          begin = b;
        }
        end = std::max(end, e);
      }
      covered += static_cast<double>(end - begin);
      totals[k.first] = std::max(totals[k.first], covered);
    }
    std::vector<double> step_totals;
    for (const auto& kv : totals)
      step_totals.push_back(kv.second);
    OpAggregate a;
    a.name = ops.name(static_cast<int32_t>(id));
    a.lane = lane_name(static_cast<Lane>(sample->lane));
    a.count = static_cast<int64_t>(timed / static_cast<size_t>(ranks_with_op));
    a.p50_ns = percentile(inst, 50);
    a.mean_ns = mean(inst);
    a.per_step_p50_ns = percentile(step_totals, 50);
    a.flops = sample->flops;
    a.comm_bytes = sample->comm_bytes;
    s.ops.push_back(a);
  }
  return s;
}

TEST(Transfer, RowsCrossInPiecesOfAnySize) {
  const int rank = world_rank(), size = world_size();
  std::vector<TimelineRecord> mine = rank_timeline(rank);
  // Pieces of 7 bytes: every row is split across messages.
  if (rank != 0) {
    send_rows(MPI_COMM_WORLD, 0, 11, mine, 7);
    send_rows(MPI_COMM_WORLD, 0, 11, std::vector<TimelineRecord>{}, 7);
    return;
  }
  for (int from = 1; from < size; ++from) {
    const std::vector<TimelineRecord> got = recv_rows<TimelineRecord>(MPI_COMM_WORLD, from, 11, 7);
    const std::vector<TimelineRecord> want = rank_timeline(from);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(TimelineRecord)));
    EXPECT_TRUE(recv_rows<TimelineRecord>(MPI_COMM_WORLD, from, 11, 7).empty());
  }
}

TEST(Summary, SelectsEveryOrderStatisticOfASpreadSet) {
  const int rank = world_rank(), size = world_size();
  // Rank r holds r, r + size, r + 2 size, ... with duplicates: the union is 0..n-1 twice.
  std::vector<std::vector<int64_t>> sets(2);
  for (int64_t v = rank; v < 50; v += size)
    sets[0].insert(sets[0].end(), {v, v});
  if (rank == size - 1) sets[1] = {-5, 3, 1LL << 40};
  std::vector<std::pair<size_t, int64_t>> queries;
  for (int64_t k = 0; k < 100; ++k)
    queries.emplace_back(0, k);
  for (int64_t k = 0; k < 3; ++k)
    queries.emplace_back(1, k);
  const std::vector<int64_t> got = select_kth(MPI_COMM_WORLD, sets, queries);
  for (int64_t k = 0; k < 100; ++k)
    EXPECT_EQ(got[static_cast<size_t>(k)], k / 2) << "k = " << k;
  EXPECT_EQ(got[100], -5);
  EXPECT_EQ(got[101], 3);
  EXPECT_EQ(got[102], 1LL << 40);
}

TEST(Summary, DistributedEqualsTheReductionOverWholeTimelines) {
  const int rank = world_rank(), size = world_size();
  const OpTable ops = test_ops();
  std::vector<std::vector<TimelineRecord>> all;
  for (int r = 0; r < size; ++r)
    all.push_back(rank_timeline(r));
  const RunSummary want = reference(ops, all);
  const RunSummary got = summarize_run(MPI_COMM_WORLD, ops, all[static_cast<size_t>(rank)]);
  EXPECT_EQ(got.step_ns, want.step_ns);
  EXPECT_EQ(got.warmup_step_ns, want.warmup_step_ns);
  EXPECT_EQ(got.step.p99, want.step.p99);
  EXPECT_EQ(got.warmup_to_steady, want.warmup_to_steady);
  ASSERT_EQ(got.ops.size(), want.ops.size());
  ASSERT_EQ(got.ops.size(), 4u); // "never" has no row
  for (size_t i = 0; i < want.ops.size(); ++i) {
    SCOPED_TRACE(want.ops[i].name);
    EXPECT_EQ(got.ops[i].name, want.ops[i].name);
    EXPECT_EQ(got.ops[i].lane, want.ops[i].lane);
    EXPECT_EQ(got.ops[i].count, want.ops[i].count);
    EXPECT_EQ(got.ops[i].p50_ns, want.ops[i].p50_ns);
    EXPECT_DOUBLE_EQ(got.ops[i].mean_ns, want.ops[i].mean_ns);
    EXPECT_EQ(got.ops[i].per_step_p50_ns, want.ops[i].per_step_p50_ns);
    EXPECT_EQ(got.ops[i].flops, want.ops[i].flops);
    EXPECT_EQ(got.ops[i].comm_bytes, want.ops[i].comm_bytes);
  }
}

TEST(Summary, RefusesRanksWithDifferentOpTables) {
  if (world_size() < 2) GTEST_SKIP() << "one rank cannot disagree with itself";
  OpTable ops = test_ops();
  if (world_rank() == world_size() - 1) ops.intern("extra", OpKind::other);
  EXPECT_THROW(summarize_run(MPI_COMM_WORLD, ops, {}), Error);
}

// A run file of this job (rank 0's view) for two strategies: the root's /ranks links to
// /points/0/ranks.
RunData run_data(const OpTable& ops) {
  const int size = world_size();
  RunData data;
  data.root = {{"schema_version", kSchemaVersion},
               {"ridgeline_version", std::string("0.1.0")},
               {"git_sha", std::string("test")},
               {"created_utc", std::string("2026-11-23T00:00:00Z")},
               {"argv", std::string("test_file_layout")},
               {"world_size", int64_t{size}}};
  data.stack = {{"mpi_library", std::string("test")},
                {"hdf5", hdf5_library_version()},
                {"build_type", std::string("Release")}};
  data.config = {{"tp", int64_t{1}}};
  for (int r = 0; r < size; ++r)
    data.topology.push_back({{"rank", int64_t{r}}});
  data.ops = ops;
  std::vector<std::vector<TimelineRecord>> all;
  for (int r = 0; r < size; ++r)
    all.push_back(rank_timeline(r));
  data.summary = reference(ops, all);
  for (int k = 0; k < 2; ++k) {
    RunData::Point p;
    p.config = data.config;
    p.ops = ops;
    p.summary = data.summary;
    data.points.push_back(p);
  }
  return data;
}

class FileLayoutTest : public ::testing::Test {
protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name = broadcast_string(
        MPI_COMM_WORLD,
        (fs::temp_directory_path() /
         ("ridgeline_test_file_layout." + std::to_string(::getpid()) + "." + info->name()))
            .string(),
        0);
    m_dir = name;
    if (world_rank() == 0) {
      fs::remove_all(m_dir);
      fs::create_directories(m_dir);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
    if (world_rank() == 0) fs::remove_all(m_dir);
  }

  // Writes the two-strategy file in `layout`; each strategy's rows differ (scale 1 and 2).
  FilesWritten write(FileLayout layout, int ranks_per_file) {
    const OpTable ops = test_ops();
    m_rows = {rank_timeline(world_rank(), 1), rank_timeline(world_rank(), 2)};
    RankRows mine;
    mine.groups = {"/points/0", "/points/1"};
    mine.timelines = {&m_rows[0], &m_rows[1]};
    const RunData data = world_rank() == 0 ? run_data(ops) : RunData{};
    return write_run_files(MPI_COMM_WORLD, path(), data, mine, {layout, ranks_per_file});
  }

  // Rank 0 reads the file back: every rank's timeline of both strategies, under /ranks too.
  void expect_read_back() {
    if (world_rank() != 0) return;
    const std::vector<std::string> problems = validate_run_file(path());
    EXPECT_TRUE(problems.empty()) << problems.front();
    const RunData back = read_run_file(path());
    ASSERT_EQ(back.timelines.size(), static_cast<size_t>(world_size()));
    h5::Handle file = h5::open_file_read(path());
    for (int r = 0; r < world_size(); ++r) {
      for (int scale = 1; scale <= 2; ++scale) {
        const std::vector<TimelineRecord> want = rank_timeline(r, scale);
        const std::vector<TimelineRecord> got =
            h5::read_timeline(file.id(), "/points/" + std::to_string(scale - 1) + "/ranks/" +
                                             std::to_string(r) + "/timeline");
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(TimelineRecord)));
      }
      EXPECT_EQ(back.timelines[static_cast<size_t>(r)].size(), rank_timeline(r, 1).size());
    }
    const Attrs root = h5::read_attrs(file.id());
    EXPECT_NE(find_attr(root, "write_seconds"), nullptr);
  }

  std::string path() const { return (m_dir / "run.h5").string(); }
  fs::path m_dir;
  std::vector<std::vector<TimelineRecord>> m_rows;
};

TEST_F(FileLayoutTest, SingleFileHoldsEveryRanksRows) {
  if (!h5::parallel_library()) GTEST_SKIP() << "serial HDF5: the single-file layout is refused";
  const FilesWritten written = write(FileLayout::single, 0);
  EXPECT_EQ(written.node_files, 0);
  EXPECT_GT(written.write_seconds, 0);
  expect_read_back();
  if (world_rank() == 0) {
    EXPECT_EQ(fs::directory_iterator(m_dir)->path().filename(), "run.h5");
    h5::Handle file = h5::open_file_read(path());
    EXPECT_EQ(attr_to_string(*find_attr(h5::read_attrs(file.id()), "file_layout")), "single");
  }
}

TEST_F(FileLayoutTest, NodeFilesJoinedByTheMasterFile) {
  const FilesWritten written = write(FileLayout::per_node, 1); // a node file per rank
  EXPECT_EQ(written.node_files, world_size());
  expect_read_back();
  if (world_rank() != 0) return;
  for (int f = 0; f < world_size(); ++f)
    EXPECT_TRUE(fs::exists(node_file_path(path(), f)));
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(m_dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
    ++files;
  }
  EXPECT_EQ(files, static_cast<size_t>(world_size()) + 1);

  // A node file gone: validate names it; one from another write of the same names: likewise.
  const std::string last = node_file_path(path(), world_size() - 1);
  const std::string kept = last + ".kept";
  fs::rename(last, kept);
  std::vector<std::string> problems = validate_run_file(path());
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(
      problems.front().find("run.node" + std::to_string(world_size() - 1) + ".h5' does not exist"),
      std::string::npos)
      << problems.front();
  EXPECT_THROW(read_run_file(path()), UsageError);
  fs::copy_file(kept, last);
  EXPECT_TRUE(validate_run_file(path()).empty());
  {
    h5::Handle file = h5::open_file_write(last);
    H5Adelete(file.id(), "file_set");
    h5::write_attr(file.id(), "file_set", std::string("another"));
  }
  problems = validate_run_file(path());
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems.front().find("belongs to another write"), std::string::npos)
      << problems.front();
}

TEST_F(FileLayoutTest, ANodeFileOfTheWholeNode) {
  const FilesWritten written = write(FileLayout::per_node, 0);
  EXPECT_EQ(written.node_files, 1); // every rank of this test runs on one host
  expect_read_back();
}

} // namespace
} // namespace ridgeline
