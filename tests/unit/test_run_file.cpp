// The run file guards the schema: what is written is read back bit for bit, validation finds
// broken files, and failed writes leave nothing behind that looks like a result.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "app/h5.hpp"
#include "app/reporters.hpp"
#include "app/run_file.hpp"
#include "app/summary.hpp"
#include "models/serving.hpp"

namespace ridgeline {
namespace {

namespace fs = std::filesystem;

constexpr int kRanks = 2;
constexpr int kWarmup = 2;
constexpr int kTimed = 3;

// Every test gets its own empty directory, removed afterwards.
class RunFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    m_dir = fs::temp_directory_path() /
            ("ridgeline_test_run_file." + std::to_string(::getpid()) + "." + info->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override {
    // Every HDF5 object a test or the code under test opened must be closed again.
    EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
    fs::remove_all(m_dir);
  }

  std::string file(const std::string& name) const { return (m_dir / name).string(); }
  std::vector<std::string> directory_entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(m_dir))
      names.push_back(entry.path().filename().string());
    return names;
  }

  fs::path m_dir;
};

std::vector<TimelineRecord> make_timeline(int rank, const std::vector<int32_t>& ops, int layers,
                                          int iterations) {
  std::vector<TimelineRecord> rows;
  int64_t t = 1000 * rank;
  for (int it = 0; it < iterations; ++it)
    for (int layer = 0; layer < layers; ++layer)
      for (int32_t op : ops) {
        TimelineRecord row{};
        row.op_id = op;
        row.layer = layer;
        row.microbatch = it % 2;
        row.iteration = it;
        row.lane = static_cast<uint8_t>(op % kLaneCount);
        row.warmup = it < kWarmup ? 1 : 0;
        row.t_start_ns = t;
        t += 97 + op * 13 + it;
        row.t_end_ns = t;
        t += 5;
        row.flops = 1.0 / 3.0 * (op + 1) * 1e12;
        row.hbm_bytes = 0.1 + op;
        row.comm_bytes = op == 3 ? 6.02214076e23 : -0.0;
        rows.push_back(row);
      }
  return rows;
}

// A two-rank run with every part of the file filled, including odd values: attribute orders
// that are not alphabetical, more attributes than HDF5 stores compactly, empty and non-ASCII
// strings, and a timeline longer than one chunk.
RunData make_run() {
  RunData data;
  data.root = {{"schema_version", kSchemaVersion},
               {"ridgeline_version", std::string("0.1.0")},
               {"git_sha", std::string("0123456789ab")},
               {"created_utc", std::string("2025-01-02T03:04:05Z")},
               {"argv", std::string("ridgeline run --tp 2")},
               {"world_size", int64_t{kRanks}}};
  data.stack = {{"mpi_library", std::string("Open MPI v4.1.4")},
                {"hdf5", hdf5_library_version()},
                {"build_type", std::string("Release")},
                {"compiler", std::string("GNU 12.2.0")}};
  data.env = {{"OMPI_MCA_btl", "^openib"}, {"NCCL_DEBUG", ""}, {"UCX_TLS", "rc,sm,self"}};
  data.config = {{"zeta", int64_t{-7}}, {"alpha", 2.5}, {"mid", std::string("µs ✓")}};
  for (int i = 0; i < 20; ++i)
    data.config.emplace_back("opt_" + std::to_string(19 - i), static_cast<int64_t>(i * i));
  data.config.emplace_back("empty", std::string());

  const std::vector<std::pair<std::string, OpKind>> ops = {
      {"ln_attn", OpKind::norm},        {"qkv", OpKind::gemm},
      {"attention", OpKind::attention}, {"allreduce_attn", OpKind::collective},
      {"mlp_up", OpKind::gemm},         {"send", OpKind::p2p}};
  std::vector<int32_t> ids;
  for (const auto& [name, kind] : ops)
    ids.push_back(data.ops.intern(name, kind));

  for (int rank = 0; rank < kRanks; ++rank) {
    data.topology.push_back({{"host", std::string("node" + std::to_string(rank))},
                             {"sm_count", int64_t{132}},
                             {"memory_bytes", 80.5e9 + rank},
                             {"gpu_uuid", std::string(rank == 0 ? "GPU-aaaa" : "")}});
  }
  data.timelines.push_back(make_timeline(0, ids, 2, kWarmup + kTimed));
  data.timelines.push_back(make_timeline(1, ids, 2, 360)); // 4320 rows: two chunks

  RunSummary& summary = data.summary;
  summary.step_ns = {1000.5, 990.25, 1010.0};
  summary.warmup_step_ns = {5000.0, 1200.0};
  summary.step = summarize(summary.step_ns);
  summary.warmup_to_steady = 1;
  summary.attrs = {{"check_passed", int64_t{1}}, {"check_max_rel_error", 3.5e-7}};
  OpAggregate qkv;
  qkv.name = "qkv";
  qkv.kind = "gemm";
  qkv.lane = "compute";
  qkv.count = 6;
  qkv.p50_ns = 110.0;
  qkv.mean_ns = 111.5;
  qkv.per_step_p50_ns = 220.0;
  qkv.share = 0.22;
  qkv.flops = 2.0e12;
  qkv.hbm_bytes = 1.5e9;
  qkv.comm_bytes = 0;
  qkv.achieved_tflops = 18.18;
  qkv.achieved_gbps = 13.6;
  OpAggregate allreduce = qkv;
  allreduce.name = "allreduce_attn";
  allreduce.kind = "collective";
  allreduce.lane = "comm";
  allreduce.comm_bytes = 4.0e6;
  summary.ops = {qkv, allreduce};
  return data;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

void expect_same_attrs(const Attrs& expected, const Attrs& actual, const std::string& where) {
  ASSERT_EQ(expected.size(), actual.size()) << where;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].first, actual[i].first) << where << " attribute " << i;
    EXPECT_EQ(expected[i].second, actual[i].second) << where << " attribute " << expected[i].first;
  }
}

void expect_same_timeline(const std::vector<TimelineRecord>& expected,
                          const std::vector<TimelineRecord>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const TimelineRecord& e = expected[i];
    const TimelineRecord& a = actual[i];
    SCOPED_TRACE("row " + std::to_string(i));
    EXPECT_EQ(e.op_id, a.op_id);
    EXPECT_EQ(e.layer, a.layer);
    EXPECT_EQ(e.microbatch, a.microbatch);
    EXPECT_EQ(e.iteration, a.iteration);
    EXPECT_EQ(e.lane, a.lane);
    EXPECT_EQ(e.warmup, a.warmup);
    EXPECT_EQ(e.t_start_ns, a.t_start_ns);
    EXPECT_EQ(e.t_end_ns, a.t_end_ns);
    EXPECT_TRUE(same_bits(e.flops, a.flops));
    EXPECT_TRUE(same_bits(e.hbm_bytes, a.hbm_bytes));
    EXPECT_TRUE(same_bits(e.comm_bytes, a.comm_bytes));
    if (::testing::Test::HasFailure()) return; // one broken row is enough to read
  }
}

bool contains(const std::vector<std::string>& problems, const std::string& text) {
  for (const std::string& problem : problems)
    if (problem.find(text) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& problems) {
  std::string text;
  for (const std::string& problem : problems)
    text += problem + "\n";
  return text;
}

// Opens a written file for modification, to damage it the way a foreign writer could.
h5::Handle open_for_update(const std::string& path) {
  return h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "H5Fopen", path);
}

TEST_F(RunFileTest, WriteThenReadBackIsIdentical) {
  const RunData data = make_run();
  const std::string path = file("run.h5");
  write_run_file(path, data);
  EXPECT_EQ(directory_entries(), std::vector<std::string>{"run.h5"}); // no temporary left

  const RunData back = read_run_file(path);
  expect_same_attrs(data.root, back.root, "/");
  expect_same_attrs(data.stack, back.stack, "/stack");
  EXPECT_EQ(data.env, back.env);
  expect_same_attrs(data.config, back.config, "/config");
  ASSERT_EQ(back.topology.size(), static_cast<size_t>(kRanks));
  for (int rank = 0; rank < kRanks; ++rank)
    expect_same_attrs(data.topology[rank], back.topology[rank], "/topology rank");

  ASSERT_EQ(back.ops.size(), data.ops.size());
  for (size_t i = 0; i < data.ops.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    EXPECT_EQ(back.ops.name(id), data.ops.name(id));
    EXPECT_EQ(back.ops.kind(id), data.ops.kind(id));
  }
  ASSERT_EQ(back.timelines.size(), static_cast<size_t>(kRanks));
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    expect_same_timeline(data.timelines[rank], back.timelines[rank]);
  }

  const RunSummary& s = data.summary;
  const RunSummary& b = back.summary;
  EXPECT_EQ(s.step_ns, b.step_ns);
  EXPECT_EQ(s.warmup_step_ns, b.warmup_step_ns);
  EXPECT_EQ(s.step.count, b.step.count);
  EXPECT_EQ(s.step.mean, b.step.mean);
  EXPECT_EQ(s.step.min, b.step.min);
  EXPECT_EQ(s.step.max, b.step.max);
  EXPECT_EQ(s.step.p50, b.step.p50);
  EXPECT_EQ(s.step.p95, b.step.p95);
  EXPECT_EQ(s.step.p99, b.step.p99);
  EXPECT_EQ(s.warmup_to_steady, b.warmup_to_steady);
  expect_same_attrs(s.attrs, b.attrs, "/summary");
  ASSERT_EQ(s.ops.size(), b.ops.size());
  for (size_t i = 0; i < s.ops.size(); ++i) {
    SCOPED_TRACE("aggregate " + s.ops[i].name);
    EXPECT_EQ(s.ops[i].name, b.ops[i].name);
    EXPECT_EQ(s.ops[i].kind, b.ops[i].kind);
    EXPECT_EQ(s.ops[i].lane, b.ops[i].lane);
    EXPECT_EQ(s.ops[i].count, b.ops[i].count);
    EXPECT_EQ(s.ops[i].p50_ns, b.ops[i].p50_ns);
    EXPECT_EQ(s.ops[i].mean_ns, b.ops[i].mean_ns);
    EXPECT_EQ(s.ops[i].per_step_p50_ns, b.ops[i].per_step_p50_ns);
    EXPECT_EQ(s.ops[i].share, b.ops[i].share);
    EXPECT_EQ(s.ops[i].flops, b.ops[i].flops);
    EXPECT_EQ(s.ops[i].hbm_bytes, b.ops[i].hbm_bytes);
    EXPECT_EQ(s.ops[i].comm_bytes, b.ops[i].comm_bytes);
    EXPECT_EQ(s.ops[i].achieved_tflops, b.ops[i].achieved_tflops);
    EXPECT_EQ(s.ops[i].achieved_gbps, b.ops[i].achieved_gbps);
  }
}

TEST_F(RunFileTest, WrittenFileHasTheDocumentedLayout) {
  const std::string path = file("run.h5");
  write_run_file(path, make_run());
  h5::Handle f = h5::open_file_read(path);
  EXPECT_EQ(h5::list_children(f.id()),
            (std::vector<std::string>{"stack", "config", "topology", "ops", "ranks", "summary"}));
  h5::Handle ranks = h5::open_group(f.id(), "ranks");
  EXPECT_EQ(h5::list_children(ranks.id()), (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(h5::exists(f.id(), "/ranks/1/timeline"));
  EXPECT_FALSE(h5::exists(f.id(), "/ranks/2/timeline"));
  EXPECT_EQ(h5::read_vector<std::string>(f.id(), "/topology/host"),
            (std::vector<std::string>{"node0", "node1"}));
  EXPECT_EQ(h5::read_vector<int64_t>(f.id(), "/topology/sm_count"),
            (std::vector<int64_t>{132, 132}));
  const h5::Table ops = h5::read_table(f.id(), "/ops");
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].name, "id");
  EXPECT_EQ(std::get<std::vector<std::string>>(ops[2].values)[3], "collective");

  h5::Handle timeline(H5Dopen2(f.id(), "/ranks/1/timeline", H5P_DEFAULT), "H5Dopen2", "timeline");
  h5::Handle plist(H5Dget_create_plist(timeline.id()), "H5Dget_create_plist", "timeline");
  EXPECT_EQ(H5Pget_layout(plist.id()), H5D_CHUNKED);
  EXPECT_GE(H5Pget_nfilters(plist.id()), 1); // deflate (after shuffle)
  hsize_t chunk = 0;
  ASSERT_EQ(H5Pget_chunk(plist.id(), 1, &chunk), 1);
  EXPECT_EQ(chunk, 4096u);
}

TEST_F(RunFileTest, ValidFileHasNoProblems) {
  const std::string path = file("run.h5");
  write_run_file(path, make_run());
  const std::vector<std::string> problems = validate_run_file(path);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// Two ranks of one host, each with its rank -> GPU entry: `gpus` their GPU UUIDs.
RunData with_gpu_map(const std::vector<std::string>& gpus, const std::vector<int64_t>& shared_by,
                     int64_t allow_shared) {
  RunData data = make_run();
  for (int rank = 0; rank < kRanks; ++rank) {
    Attrs& t = data.topology[static_cast<size_t>(rank)];
    t = {{"rank", int64_t{rank}},
         {"host", std::string("node0")},
         {"local_rank", int64_t{rank}},
         {"local_size", int64_t{kRanks}},
         {"device", int64_t{rank}},
         {"gpus_visible", int64_t{2}},
         {"gpu_uuid", gpus[static_cast<size_t>(rank)]},
         {"gpu_pci_bus_id", std::string("0000:1" + std::to_string(rank) + ":00.0")},
         {"gpu_shared_by", shared_by[static_cast<size_t>(rank)]}};
  }
  data.config.emplace_back("allow_shared_gpu", allow_shared);
  return data;
}

TEST_F(RunFileTest, ValidationChecksTheRankToGpuMap) {
  const std::string path = file("gpus.h5");
  write_run_file(path, with_gpu_map({"GPU-a", "GPU-b"}, {1, 1}, 0));
  EXPECT_TRUE(validate_run_file(path).empty()) << joined(validate_run_file(path));

  // Two ranks on one GPU: valid only where the job allowed it, and counted right.
  write_run_file(path, with_gpu_map({"GPU-a", "GPU-a"}, {2, 2}, 1));
  EXPECT_TRUE(validate_run_file(path).empty()) << joined(validate_run_file(path));
  write_run_file(path, with_gpu_map({"GPU-a", "GPU-a"}, {2, 2}, 0));
  std::vector<std::string> problems = validate_run_file(path);
  EXPECT_TRUE(contains(
      problems, "ranks 0, 1 of host node0 share GPU GPU-a but /config allow_shared_gpu is 0"))
      << joined(problems);
  write_run_file(path, with_gpu_map({"GPU-a", "GPU-a"}, {1, 1}, 1));
  problems = validate_run_file(path);
  EXPECT_TRUE(contains(problems,
                       "rank 0 says 1 ranks share its GPU GPU-a but 2 ranks of host node0 use it"))
      << joined(problems);

  // The map itself: rank order, one rank per local seat, a device the rank could see.
  RunData bad = with_gpu_map({"GPU-a", "GPU-b"}, {1, 1}, 0);
  bad.topology[1][0].second = int64_t{0}; // rank
  bad.topology[1][2].second = int64_t{0}; // local_rank
  bad.topology[1][4].second = int64_t{2}; // device
  write_run_file(path, bad);
  problems = validate_run_file(path);
  EXPECT_TRUE(contains(problems, "/topology/rank: element 1 is 0")) << joined(problems);
  EXPECT_TRUE(contains(problems, "ranks 0 and 1 are both local rank 0 of host node0"))
      << joined(problems);
  EXPECT_TRUE(contains(problems, "rank 1 uses device 2 but saw 2 GPUs")) << joined(problems);
}

TEST_F(RunFileTest, GpuSamplesRoundTripAndAreValidated) {
  RunData data = make_run();
  const Table samples = {{"t_ns", std::vector<int64_t>{-5000000, 15000000, 35000000}},
                         {"sm_clock_mhz", std::vector<int64_t>{1980, 1755, 1710}},
                         {"mem_clock_mhz", std::vector<int64_t>{3201, 3201, 3201}},
                         {"power_w", std::vector<double>{120.5, 690.0, 699.8}},
                         {"power_avg_w", std::vector<double>{100.0, 650.0, 698.0}},
                         {"temp_c", std::vector<double>{35, 48, 52}},
                         {"clock_event_reasons", std::vector<int64_t>{0, 4, 4}}};
  data.tables.push_back({"/ranks/1/samples", samples, {{"period_ms", int64_t{20}}}});
  const std::string path = file("samples.h5");
  write_run_file(path, data);
  EXPECT_TRUE(validate_run_file(path).empty()) << joined(validate_run_file(path));
  const RunData back = read_run_file(path);
  const NamedTable* got = nullptr;
  for (const NamedTable& t : back.tables)
    if (t.path == "/ranks/1/samples") got = &t;
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(std::get<std::vector<int64_t>>(h5::find_column(got->table, "sm_clock_mhz")->values)[2],
            1710);
  EXPECT_EQ(std::get<std::vector<double>>(h5::find_column(got->table, "power_w")->values)[1],
            690.0);

  // Times out of order and a missing field are both reported.
  RunData bad = make_run();
  Table shuffled = samples;
  std::get<std::vector<int64_t>>(shuffled[0].values) = {3, 2, 1};
  shuffled.pop_back();
  bad.tables.push_back({"/ranks/0/samples", shuffled, {}});
  const std::string bad_path = file("bad_samples.h5");
  write_run_file(bad_path, bad);
  const std::vector<std::string> problems = validate_run_file(bad_path);
  EXPECT_TRUE(contains(problems, "/ranks/0/samples: t_ns decreases at row 1")) << joined(problems);
  EXPECT_TRUE(contains(problems, "/ranks/0/samples: missing field clock_event_reasons"))
      << joined(problems);
}

TEST(Report, RatesInGflopsUntilAnOpReachesATflop) {
  RunData data = make_run();
  ASSERT_EQ(data.summary.ops.size(), 2u);
  OpAggregate up = data.summary.ops[0];
  up.name = "mlp_up";
  data.summary.ops.push_back(up);
  for (OpAggregate& op : data.summary.ops)
    op.achieved_tflops = 0.0625;
  std::ostringstream cpu;
  print_report(cpu, data);
  EXPECT_NE(cpu.str().find("GFLOP/s"), std::string::npos) << cpu.str();
  EXPECT_NE(cpu.str().find(" 62.500 "), std::string::npos) << cpu.str();
  // A collective's rate is its GB/s: a TFLOP/s figure of it would be its reduction's adds.
  data.summary.ops[1].achieved_tflops = 790.5;
  std::ostringstream comm;
  print_report(comm, data);
  EXPECT_NE(comm.str().find("GFLOP/s"), std::string::npos) << comm.str();
  EXPECT_EQ(comm.str().find("790"), std::string::npos) << comm.str();
  data.summary.ops[0].achieved_tflops = 790.5;
  std::ostringstream gpu;
  print_report(gpu, data);
  EXPECT_NE(gpu.str().find("TFLOP/s"), std::string::npos) << gpu.str();
  EXPECT_NE(gpu.str().find(" 790.500 "), std::string::npos) << gpu.str();
  EXPECT_NE(gpu.str().find(" 0.062 "), std::string::npos) << gpu.str();
}

// An op without FLOPs or bytes has no rate, rather than a rate of 0; the table says what its
// share is.
TEST(Report, NoRateWithoutWorkAndTheShareExplained) {
  RunData data = make_run();
  OpAggregate wait = data.summary.ops[1];
  wait.name = "pp_wait";
  wait.kind = "p2p";
  wait.lane = "p2p";
  wait.flops = wait.hbm_bytes = wait.comm_bytes = 0;
  wait.achieved_tflops = wait.achieved_gbps = 0;
  data.summary.ops = {wait};
  std::ostringstream out;
  print_report(out, data);
  const std::string text = out.str();
  const size_t row = text.find("\npp_wait ");
  ASSERT_NE(row, std::string::npos) << text;
  const std::string line = text.substr(row + 1, text.find('\n', row + 1) - row - 1);
  EXPECT_NE(line.find("%          -          -"), std::string::npos) << line;
  EXPECT_NE(text.find("\nshare: the op's time in a step (the union of its instances' intervals"),
            std::string::npos)
      << text;
}

TEST_F(RunFileTest, ValidationFindsBadTimelineRows) {
  RunData data = make_run();
  TimelineRecord& reversed = data.timelines[1][17];
  reversed.t_end_ns = reversed.t_start_ns - 1;
  data.timelines[0][3].op_id = static_cast<int32_t>(data.ops.size());
  data.timelines[0][4].lane = 3;
  data.timelines[1][5].warmup = 2;
  const std::string path = file("bad_rows.h5");
  write_run_file(path, data);
  const std::vector<std::string> problems = validate_run_file(path);
  EXPECT_EQ(problems.size(), 4u) << joined(problems);
  EXPECT_TRUE(contains(problems, "/ranks/1/timeline: row 17: t_end_ns < t_start_ns"))
      << joined(problems);
  EXPECT_TRUE(contains(problems, "/ranks/0/timeline: row 3: op_id 6 outside [0, 6)"))
      << joined(problems);
  EXPECT_TRUE(contains(problems, "/ranks/0/timeline: row 4: lane 3")) << joined(problems);
  EXPECT_TRUE(contains(problems, "/ranks/1/timeline: row 5: warmup 2")) << joined(problems);
}

TEST_F(RunFileTest, ValidationCapsRowProblemsPerTimeline) {
  RunData data = make_run();
  for (TimelineRecord& row : data.timelines[1])
    row.t_end_ns = row.t_start_ns - 1;
  const std::string path = file("many_bad_rows.h5");
  write_run_file(path, data);
  const std::vector<std::string> problems = validate_run_file(path);
  ASSERT_EQ(problems.size(), 11u) << joined(problems);
  EXPECT_EQ(problems.back(), "/ranks/1/timeline: " + std::to_string(data.timelines[1].size() - 10) +
                                 " more row problems");
}

TEST_F(RunFileTest, ValidationFindsSummaryProblems) {
  RunData data = make_run();
  data.summary.step_ns = {1000.0, 0.0};
  data.summary.step.p95 = data.summary.step.p50 - 1;
  const std::string path = file("bad_summary.h5");
  write_run_file(path, data);
  const std::vector<std::string> problems = validate_run_file(path);
  EXPECT_EQ(problems.size(), 2u) << joined(problems);
  EXPECT_TRUE(contains(problems, "/summary/step_time_ns: value 1 is 0, expected > 0"))
      << joined(problems);
  EXPECT_TRUE(contains(problems, "/summary: expected p50_ns <= p95_ns <= p99_ns"))
      << joined(problems);
}

TEST_F(RunFileTest, ValidationFindsMissingGroupAndAttributes) {
  const std::string good = file("run.h5");
  write_run_file(good, make_run());
  const std::string damaged = file("damaged.h5");
  fs::copy_file(good, damaged);
  {
    h5::Handle f = open_for_update(damaged);
    h5::check_status(H5Ldelete(f.id(), "/summary", H5P_DEFAULT), "H5Ldelete", "/summary");
    h5::check_status(H5Ldelete(f.id(), "/ranks/1", H5P_DEFAULT), "H5Ldelete", "/ranks/1");
    h5::check_status(H5Adelete(f.id(), "git_sha"), "H5Adelete", "git_sha");
    h5::Handle stack = h5::open_group(f.id(), "stack");
    h5::check_status(H5Adelete(stack.id(), "hdf5"), "H5Adelete", "hdf5");
    h5::Handle topology = h5::open_group(f.id(), "topology");
    h5::write_dataset(topology.id(), "extra", std::vector<double>{1.0, 2.0, 3.0});
    f.close();
  }
  const std::vector<std::string> problems = validate_run_file(damaged);
  EXPECT_EQ(problems.size(), 5u) << joined(problems);
  EXPECT_TRUE(contains(problems, "/summary: missing group")) << joined(problems);
  EXPECT_TRUE(contains(problems, "/ranks/1: missing group")) << joined(problems);
  EXPECT_TRUE(contains(problems, "/: missing attribute 'git_sha'")) << joined(problems);
  EXPECT_TRUE(contains(problems, "/stack: missing attribute 'hdf5'")) << joined(problems);
  EXPECT_TRUE(contains(problems, "/topology/extra: 3 values, expected world_size 2"))
      << joined(problems);
  EXPECT_THROW(read_run_file(damaged), UsageError);
}

TEST_F(RunFileTest, ValidationStopsAtAnotherMajorVersion) {
  const std::string path = file("future.h5");
  write_run_file(path, make_run());
  {
    h5::Handle f = open_for_update(path);
    h5::check_status(H5Adelete(f.id(), "schema_version"), "H5Adelete", "schema_version");
    h5::write_attr(f.id(), "schema_version", int64_t{2});
    f.close();
  }
  EXPECT_EQ(validate_run_file(path),
            std::vector<std::string>{"/: schema_version 2 is not supported (this build reads 1)"});
  EXPECT_THROW(read_run_file(path), UsageError);
}

TEST_F(RunFileTest, ValidationReportsMissingTimelineField) {
  const std::string path = file("run.h5");
  write_run_file(path, make_run());
  {
    h5::Handle f = open_for_update(path);
    h5::check_status(H5Ldelete(f.id(), "/ranks/0/timeline", H5P_DEFAULT), "H5Ldelete", "tl");
    h5::Handle rank = h5::open_group(f.id(), "/ranks/0");
    h5::write_table(rank.id(), "timeline", {{"op_id", std::vector<int64_t>{0}}}, false);
    f.close();
  }
  const std::vector<std::string> problems = validate_run_file(path);
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_EQ(problems[0], "/ranks/0/timeline: field 'layer' missing");
}

TEST_F(RunFileTest, ValidationReportsFilesThatCannotBeOpened) {
  const std::string text = file("notes.txt");
  std::ofstream(text) << "not an HDF5 file\n";
  EXPECT_EQ(validate_run_file(text), std::vector<std::string>{text + ": not an HDF5 file"});
  EXPECT_THROW(read_run_file(text), UsageError);

  const std::string missing = file("missing.h5");
  EXPECT_EQ(validate_run_file(missing), std::vector<std::string>{missing + ": no such file"});
  EXPECT_THROW(read_run_file(missing), UsageError);
}

TEST_F(RunFileTest, WriteIntoMissingDirectoryThrowsAndCreatesNothing) {
  const fs::path directory = m_dir / "no_such_dir";
  const std::string path = (directory / "run.h5").string();
  EXPECT_THROW(write_run_file(path, make_run()), UsageError);
  EXPECT_FALSE(fs::exists(directory));
  EXPECT_TRUE(directory_entries().empty());
}

TEST_F(RunFileTest, FailedWriteLeavesNeitherTargetNorTemporary) {
  RunData data = make_run();
  data.topology[1].back().first = "gpu_serial"; // rank 1 has another key than rank 0
  const std::string path = file("run.h5");
  try {
    write_run_file(path, data);
    FAIL() << "write_run_file accepted topologies with different keys";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 has no 'gpu_uuid'"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(directory_entries().empty());
}

TEST_F(RunFileTest, FailedWriteKeepsThePreviousFile) {
  const std::string path = file("run.h5");
  write_run_file(path, make_run());
  const auto size = fs::file_size(path);
  RunData bad = make_run();
  bad.summary.attrs.emplace_back("p50_ns", 1.0); // duplicates a step attribute: HDF5 refuses
  EXPECT_THROW(write_run_file(path, bad), Error);
  EXPECT_EQ(directory_entries(), std::vector<std::string>{"run.h5"});
  EXPECT_EQ(fs::file_size(path), size);
  EXPECT_TRUE(validate_run_file(path).empty());
}

TEST_F(RunFileTest, WriteRejectsInconsistentShapes) {
  RunData data = make_run();
  data.root[0].second = int64_t{2};
  EXPECT_THROW(write_run_file(file("a.h5"), data), Error);
  data = make_run();
  data.timelines.pop_back();
  EXPECT_THROW(write_run_file(file("b.h5"), data), Error);
  data = make_run();
  data.topology.pop_back();
  EXPECT_THROW(write_run_file(file("c.h5"), data), Error);
  EXPECT_TRUE(directory_entries().empty());
}

TEST_F(RunFileTest, TablesRoundTripAndRejectUnequalColumns) {
  const std::string path = file("tables.h5");
  h5::Handle f = h5::create_file(path);
  const h5::Table table = {{"size_bytes", std::vector<int64_t>{8, 1 << 20, INT64_MIN}},
                           {"busbw_gbps", std::vector<double>{0.5, 1e-300, -2.0}},
                           {"transport", std::vector<std::string>{"nvlink", "", "pcie ✓"}}};
  h5::write_table(f.id(), "compressed", table, true);
  h5::write_table(f.id(), "plain", table, false);
  h5::write_table(f.id(), "empty",
                  {{"a", std::vector<int64_t>{}}, {"b", std::vector<std::string>{}}}, true);
  EXPECT_THROW(h5::write_table(f.id(), "unequal",
                               {{"a", std::vector<int64_t>{1, 2}}, {"b", std::vector<double>{1}}},
                               false),
               Error);
  EXPECT_THROW(h5::write_table(f.id(), "none", {}, false), Error);
  for (const char* name : {"compressed", "plain"}) {
    const h5::Table back = h5::read_table(f.id(), name);
    ASSERT_EQ(back.size(), table.size()) << name;
    for (size_t c = 0; c < table.size(); ++c) {
      EXPECT_EQ(back[c].name, table[c].name) << name;
      EXPECT_EQ(back[c].values, table[c].values) << name << " column " << table[c].name;
    }
  }
  const h5::Table empty = h5::read_table(f.id(), "empty");
  ASSERT_EQ(empty.size(), 2u);
  EXPECT_EQ(h5::column_size(empty[1].values), 0u);
  EXPECT_TRUE(std::holds_alternative<std::vector<std::string>>(empty[1].values));

  h5::write_timeline(f.id(), "no_rows", {});
  EXPECT_TRUE(h5::read_timeline(f.id(), "no_rows").empty());
}

TEST_F(RunFileTest, ReadsAttributesAndStringsOfOtherWriters) {
  // h5py and other tools write fixed-length strings, 32-bit integers and floats.
  const std::string path = file("foreign.h5");
  h5::Handle f = h5::create_file(path);
  h5::Handle space(H5Screate(H5S_SCALAR), "H5Screate", "scalar");
  h5::Handle fixed(H5Tcopy(H5T_C_S1), "H5Tcopy", "fixed");
  h5::check_status(H5Tset_size(fixed.id(), 8), "H5Tset_size", "fixed");
  {
    h5::Handle attr(H5Acreate2(f.id(), "fixed", fixed.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT),
                    "H5Acreate2", "fixed");
    const char text[8] = {'a', 'b', 'c', '\0', 'x', 'x', 'x', 'x'};
    h5::check_status(H5Awrite(attr.id(), fixed.id(), text), "H5Awrite", "fixed");
  }
  {
    h5::Handle attr(
        H5Acreate2(f.id(), "int32", H5T_STD_I32BE, space.id(), H5P_DEFAULT, H5P_DEFAULT),
        "H5Acreate2", "int32");
    const int32_t value = -42;
    h5::check_status(H5Awrite(attr.id(), H5T_NATIVE_INT32, &value), "H5Awrite", "int32");
  }
  {
    h5::Handle attr(
        H5Acreate2(f.id(), "float32", H5T_IEEE_F32LE, space.id(), H5P_DEFAULT, H5P_DEFAULT),
        "H5Acreate2", "float32");
    const float value = 0.5f;
    h5::check_status(H5Awrite(attr.id(), H5T_NATIVE_FLOAT, &value), "H5Awrite", "float32");
  }
  const Attrs expected = {{"fixed", std::string("abc")}, {"int32", int64_t{-42}}, {"float32", 0.5}};
  expect_same_attrs(expected, h5::read_attrs(f.id()), "/");

  h5::write_dataset(f.id(), "texts", std::vector<std::string>{"a", "", "ü"});
  EXPECT_EQ(h5::read_vector<std::string>(f.id(), "texts"),
            (std::vector<std::string>{"a", "", "ü"}));
  h5::write_dataset(f.id(), "doubles", std::vector<double>{});
  EXPECT_TRUE(h5::read_vector<double>(f.id(), "doubles").empty());
  EXPECT_THROW(h5::read_vector<int64_t>(f.id(), "doubles"), Error);
}

TEST_F(RunFileTest, ChildrenComeBackInCreationOrder) {
  h5::Handle f = h5::create_file(file("order.h5"));
  h5::Handle ranks = h5::create_group(f.id(), "ranks");
  std::vector<std::string> names;
  for (int rank = 0; rank < 12; ++rank) {
    names.push_back(std::to_string(rank));
    h5::create_group(ranks.id(), names.back());
  }
  EXPECT_EQ(h5::list_children(ranks.id()), names); // name order would put "10" before "2"
  EXPECT_TRUE(h5::exists(f.id(), "ranks/11"));
  EXPECT_FALSE(h5::exists(f.id(), "ranks/12"));
  EXPECT_FALSE(h5::exists(f.id(), "missing/11"));
}

TEST_F(RunFileTest, ErrorsNameTheCallAndThePath) {
  h5::Handle f = h5::create_file(file("errors.h5"));
  h5::Handle summary = h5::create_group(f.id(), "summary");
  try {
    h5::open_group(summary.id(), "ops");
    FAIL() << "opening a missing group succeeded";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("H5Gopen2"), std::string::npos) << message;
    EXPECT_NE(message.find("/summary/ops"), std::string::npos) << message;
  }
  h5::write_attr(summary.id(), "count", int64_t{1});
  try {
    h5::write_attr(summary.id(), "count", int64_t{2});
    FAIL() << "writing an attribute twice succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/summary@count"), std::string::npos) << e.what();
  }
}

TEST_F(RunFileTest, LibraryVersionIsDotted) {
  const std::string version = hdf5_library_version();
  EXPECT_EQ(version.rfind("1.", 0), 0u) << version;
  EXPECT_EQ(std::count(version.begin(), version.end(), '.'), 2) << version;
}

// A `ridgeline collectives` file: no timelines, /collectives tables and the interconnect roof.
TEST_F(RunFileTest, CollectivesFileRoundTripsAndValidates) {
  RunData data = make_run();
  data.root.emplace_back("command", std::string("collectives"));
  data.root.emplace_back("check", std::string("passed"));
  data.ops = OpTable();
  data.timelines.clear();
  data.summary = RunSummary();
  const Table result = {{"size_bytes", std::vector<int64_t>{8, 16}},
                        {"count", std::vector<int64_t>{2, 4}},
                        {"time_mean_ns", std::vector<double>{1500, 1600}},
                        {"time_p50_ns", std::vector<double>{1400, 1500}},
                        {"time_p95_ns", std::vector<double>{1800, 1900}},
                        {"time_p99_ns", std::vector<double>{1900, 2000}},
                        {"time_min_ns", std::vector<double>{1300, 1400}},
                        {"algbw_gbps", std::vector<double>{0.005, 0.01}},
                        {"busbw_gbps", std::vector<double>{0.005, 0.01}},
                        {"busbw_p50_gbps", std::vector<double>{0.006, 0.011}},
                        {"wrong", std::vector<int64_t>{0, 0}},
                        {"iters", std::vector<int64_t>{20, 20}}};
  data.tables.push_back({"/collectives/all_reduce", result, {{"group_size", int64_t{2}}}});
  data.tables.push_back({"/collectives/all_reduce_samples_ns",
                         {{"size_index", std::vector<int64_t>{0, 0, 1}},
                          {"iteration", std::vector<int64_t>{0, 1, 0}},
                          {"time_ns", std::vector<double>{1400, 1600, 1500}}},
                         {}});
  data.tables.push_back({"/roofs/interconnect",
                         {{"collective", std::vector<std::string>{"all_reduce"}},
                          {"group_size", std::vector<int64_t>{2}},
                          {"dtype", std::vector<std::string>{"fp32"}},
                          {"transport", std::vector<std::string>{"auto"}},
                          {"alpha_us", std::vector<double>{1.3}},
                          {"beta_gbps", std::vector<double>{2.5}},
                          {"floor_alpha_us", std::vector<double>{1.5}},
                          {"floor_beta_gbps", std::vector<double>{2.8}},
                          {"fit_min_bytes", std::vector<int64_t>{8}},
                          {"fit_max_bytes", std::vector<int64_t>{16}}},
                         {}});
  const std::string path = file("coll.h5");
  write_run_file(path, data);
  EXPECT_TRUE(validate_run_file(path).empty()) << joined(validate_run_file(path));
  const RunData back = read_run_file(path);
  EXPECT_TRUE(back.timelines.empty());
  ASSERT_EQ(back.tables.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.tables[i].path, data.tables[i].path);
    ASSERT_EQ(back.tables[i].table.size(), data.tables[i].table.size());
    for (size_t c = 0; c < data.tables[i].table.size(); ++c) {
      EXPECT_EQ(back.tables[i].table[c].name, data.tables[i].table[c].name);
      EXPECT_EQ(back.tables[i].table[c].values, data.tables[i].table[c].values);
    }
    EXPECT_EQ(back.tables[i].attrs, data.tables[i].attrs);
  }

  // A run file keeps its layout and gains the tables (outside /roofs, whose tables are checked
  // as a set in run files).
  RunData run = make_run();
  run.tables.push_back(data.tables.back());
  run.tables.back().path = "/extra/interconnect";
  write_run_file(file("run.h5"), run);
  EXPECT_TRUE(validate_run_file(file("run.h5")).empty());
  EXPECT_EQ(read_run_file(file("run.h5")).tables.size(), 1u);

  // Broken: a missing column, unordered percentiles, no roof.
  RunData bad = data;
  bad.tables[0].table.pop_back();
  std::get<std::vector<double>>(bad.tables[0].table[4].values)[1] = 100;
  bad.tables.pop_back();
  write_run_file(file("bad.h5"), bad);
  const std::vector<std::string> problems = validate_run_file(file("bad.h5"));
  EXPECT_TRUE(contains(problems, "/collectives/all_reduce: missing field 'iters'"))
      << joined(problems);
  EXPECT_TRUE(contains(problems, "/roofs: missing group")) << joined(problems);

  bad = data;
  std::get<std::vector<double>>(bad.tables[0].table[4].values)[1] = 100;
  write_run_file(file("bad2.h5"), bad);
  EXPECT_TRUE(contains(validate_run_file(file("bad2.h5")), "/collectives/all_reduce: row 1"));

  // A sweep on symmetric buffers names its window; without the attribute it is refused.
  RunData symm = data;
  symm.tables.insert(symm.tables.begin() + 1, symm.tables[0]);
  symm.tables[1].path = "/collectives/all_reduce_symm";
  symm.tables[1].attrs.emplace_back("buffers",
                                    std::string("ncclMemAlloc + ncclCommWindowRegister"));
  write_run_file(file("symm.h5"), symm);
  EXPECT_TRUE(validate_run_file(file("symm.h5")).empty())
      << joined(validate_run_file(file("symm.h5")));
  symm.tables[1].attrs.back().second = std::string("ordinary");
  write_run_file(file("symm_bad.h5"), symm);
  EXPECT_TRUE(contains(validate_run_file(file("symm_bad.h5")),
                       "/collectives/all_reduce_symm: a _symm sweep needs the attribute buffers"));
  bad.tables.clear();
  EXPECT_THROW(write_run_file(file("bad3.h5"), bad), Error);
}

} // namespace
} // namespace ridgeline

namespace ridgeline {
namespace {

Roofs sample_roofs() {
  Roofs r;
  r.backend = "cuda";
  r.source = "measured by ridgeline roofs";
  r.gemm.push_back({"bf16", "square", 8192, 8192, 8192, 20, 1.38e6, 1.39e6, 797.0, 1980.0});
  r.gemm.push_back({"bf16", "fc1_gemm", 4096, 32768, 8192, 20, 2.94e6, 3.1e6, 747.7, 1555.0});
  r.memory.push_back({"copy", int64_t{4} << 30, 10, 996830.0, 1002240.0, 4308.6, 1440.0});
  r.memory.push_back({"read", int64_t{4} << 30, 10, 959360.0, 961040.0, 4476.9, -1});
  r.launch.push_back({"eager", 1000, 4352.0, -1});
  r.launch.push_back({"graph_node", 1000, 687.0, -1});
  r.interconnect.push_back({"all_reduce", 2, "bf16", "nvlink", 8.1, 343.0, 7.3, 360.0, 8, 1 << 30});
  return r;
}

TEST_F(RunFileTest, RoofsRoundTripAndValidate) {
  RunData data = make_run();
  const Roofs roofs = sample_roofs();
  add_roofs(data, roofs, {{"transport", std::string("nvlink")}});
  write_run_file(file("roofs.h5"), data);
  EXPECT_TRUE(validate_run_file(file("roofs.h5")).empty());
  const Roofs back = read_roofs(file("roofs.h5"));
  EXPECT_EQ(back.backend, "cuda");
  EXPECT_NE(back.source.find(file("roofs.h5")), std::string::npos); // names the file it came from
  ASSERT_EQ(back.gemm.size(), 2u);
  EXPECT_EQ(back.gemm[1].label, "fc1_gemm");
  EXPECT_EQ(back.gemm[1].n, 32768);
  EXPECT_DOUBLE_EQ(back.peak_tflops(DType::bf16), 797.0);
  EXPECT_DOUBLE_EQ(back.hbm_gbps(), 4308.6);
  EXPECT_DOUBLE_EQ(back.launch_floor_ns(), 687.0);
  ASSERT_EQ(back.interconnect.size(), 1u);
  EXPECT_DOUBLE_EQ(back.interconnect[0].floor_beta_gbps, 360.0);
  const RunData read = read_run_file(file("roofs.h5"));
  ASSERT_FALSE(read.group_attrs.empty());
  EXPECT_EQ(attr_to_string(*find_attr(read.group_attrs.front().second, "gemm_peak_tflops.bf16")),
            "797");

  // A roof that is not a rate, and a file without roofs.
  RunData bad = make_run();
  Roofs broken = roofs;
  broken.memory[0].gbps = 0;
  add_roofs(bad, broken, {});
  write_run_file(file("bad.h5"), bad);
  const std::vector<std::string> problems = validate_run_file(file("bad.h5"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("/roofs/memory: row 0: gbps must be > 0"), std::string::npos)
      << problems[0];
  write_run_file(file("plain.h5"), make_run());
  EXPECT_THROW(read_roofs(file("plain.h5")), UsageError);
  EXPECT_THROW(read_roofs(file("missing.h5")), UsageError);
}

} // namespace
} // namespace ridgeline

namespace ridgeline {
namespace {

// A trace run's /serving: three requests (arrivals 0, 1 and 2 ms; prompts 40, 10, 20; outputs
// 3, 1, 2) in four steps, as models/serving.cpp's scheduler runs them under a budget of 64
// tokens, chunks of 32 and 4 sequences: step 0 prefills a chunk of request 0, step 1 the rest of
// it and the prompts of requests 1 and 2 (each one's first token), step 2 decodes requests 0 and
// 2 (contexts 40 and 20, finishing 2), step 3 request 0 (41, finishing it).
struct ServingParts {
  Attrs attrs;
  Table steps, requests;
};

ServingParts serving_parts() {
  const std::vector<double> step_ns = {2e6, 3e6, 1e6, 1e6};
  std::vector<double> start, end;
  double now = 0;
  for (double ns : step_ns) {
    start.push_back(now);
    now += ns / 1e9;
    end.push_back(now);
  }
  ServingParts p;
  p.steps = {{"step", std::vector<int64_t>{0, 1, 2, 3}},
             {"start_s", start},
             {"end_s", end},
             {"step_ns", step_ns},
             {"prepare_ns", std::vector<double>{1500, 1501, 1502, 1503}},
             {"prefill_tokens", std::vector<int64_t>{32, 38, 0, 0}},
             {"decode_tokens", std::vector<int64_t>{0, 0, 2, 1}},
             {"prefill_sequences", std::vector<int64_t>{1, 3, 0, 0}},
             {"decode_sequences", std::vector<int64_t>{0, 0, 2, 1}},
             {"context_min", std::vector<int64_t>{0, 0, 20, 41}},
             {"context_max", std::vector<int64_t>{0, 0, 40, 41}},
             {"context_mean", std::vector<double>{0, 0, 30, 41}},
             {"check_rel_error", std::vector<double>{1e-7, 3e-7, 2e-7, 1e-7}}};
  const std::vector<double> arrival = {0, 0.001, 0.002};
  const std::vector<double> first = {end[1], end[1], end[1]};
  const std::vector<double> finish = {end[3], end[1], end[2]};
  std::vector<double> ttft, e2e;
  for (size_t i = 0; i < arrival.size(); ++i) {
    ttft.push_back(first[i] - arrival[i]);
    e2e.push_back(finish[i] - arrival[i]);
  }
  const std::vector<double> tpot = {(finish[0] - first[0]) / 2, std::nan(""), finish[2] - first[2]};
  p.requests = {{"request", std::vector<int64_t>{0, 1, 2}},
                {"arrival_s", arrival},
                {"prompt_tokens", std::vector<int64_t>{40, 10, 20}},
                {"output_tokens", std::vector<int64_t>{3, 1, 2}},
                {"first_token_s", first},
                {"finish_s", finish},
                {"ttft_s", ttft},
                {"e2e_s", e2e},
                {"tpot_s", tpot}};
  const double span = end[3];
  p.attrs = {{"source", std::string("--trace-gen rate=1000,requests=3")},
             {"requests", int64_t{3}},
             {"steps", int64_t{4}},
             {"token_budget", int64_t{64}},
             {"chunk", int64_t{32}},
             {"max_batch", int64_t{4}},
             {"kv_capacity_tokens", int64_t{1024}},
             {"duration_s", 0.0},
             {"warmup_passes", int64_t{1}},
             {"slo_ttft_s", 0.0},
             {"slo_tpot_s", 0.0}};
  const std::pair<const char*, Percentiles> metrics[] = {{"ttft", percentiles(ttft)},
                                                         {"tpot", percentiles({tpot[0], tpot[2]})},
                                                         {"e2e", percentiles(e2e)}};
  for (const auto& [name, q] : metrics) {
    p.attrs.emplace_back(std::string(name) + "_p50_s", q.p50);
    p.attrs.emplace_back(std::string(name) + "_p95_s", q.p95);
    p.attrs.emplace_back(std::string(name) + "_p99_s", q.p99);
  }
  p.attrs.emplace_back("good", int64_t{3});
  p.attrs.emplace_back("span_s", span);
  p.attrs.emplace_back("goodput_per_s", 3 / span);
  p.attrs.emplace_back("throughput_per_s", 3 / span);
  p.attrs.emplace_back("step_time", std::string("the slowest rank's forward of the step"));
  p.attrs.emplace_back("check", std::string("passed"));
  p.attrs.emplace_back("check_steps", int64_t{4});
  p.attrs.emplace_back("check_max_rel_error", 3e-7);
  p.attrs.emplace_back("check_tolerance", 1e-4);
  return p;
}

// make_run() as a trace run holding `p` (no /serving where `with_group` is false).
RunData trace_run(const ServingParts& p, bool with_group = true) {
  RunData data = make_run();
  data.config.emplace_back("trace", std::string());
  data.config.emplace_back("trace_gen", std::string("rate=1000,requests=3"));
  if (!with_group) return data;
  data.tables.push_back({"/serving/steps", p.steps, {}});
  data.tables.push_back({"/serving/requests", p.requests, {}});
  data.group_attrs.emplace_back("/serving", p.attrs);
  return data;
}

template <class T> T& cell(Table& table, const std::string& name, size_t row) {
  for (Column& column : table)
    if (column.name == name) return std::get<std::vector<T>>(column.values).at(row);
  throw Error("no column " + name);
}

void set_attr(Attrs& attrs, const std::string& key, const AttrValue& value) {
  for (auto& [name, old] : attrs)
    if (name == key) old = value;
}

TEST_F(RunFileTest, ValidationChecksATraceRun) {
  write_run_file(file("trace.h5"), trace_run(serving_parts()));
  EXPECT_TRUE(validate_run_file(file("trace.h5")).empty())
      << joined(validate_run_file(file("trace.h5")));
  // Trace options given, /serving missing.
  write_run_file(file("bare.h5"), trace_run(serving_parts(), false));
  EXPECT_EQ(validate_run_file(file("bare.h5")),
            std::vector<std::string>{"/serving: missing group (a trace run)"});

  // Each rule broken once: the problem it gives.
  const std::pair<std::function<void(ServingParts&)>, std::string> damages[] = {
      {[](ServingParts& p) { set_attr(p.attrs, "steps", int64_t{5}); },
       "/serving/steps: 4 rows but /serving steps is 5"},
      {[](ServingParts& p) { cell<int64_t>(p.steps, "step", 2) = 5; },
       "/serving/steps: row 2: step 5, expected 2"},
      {[](ServingParts& p) { cell<double>(p.steps, "step_ns", 0) = 2.5e6; },
       "/serving/steps: row 0: end_s - start_s is 0.002 s but step_ns is 2.5e+06"},
      {[](ServingParts& p) { set_attr(p.attrs, "max_batch", int64_t{2}); },
       "/serving/steps: row 1: prefill_sequences + decode_sequences 3 is more than max_batch 2"},
      {[](ServingParts& p) { cell<double>(p.steps, "context_mean", 2) = 50; },
       "/serving/steps: row 2: expected context_min <= context_mean <= context_max, found 20, "
       "50, 40"},
      {[](ServingParts& p) { cell<double>(p.requests, "tpot_s", 1) = 0; },
       "/serving/requests: row 1: tpot_s must be NaN for one output token, found 0"},
      {[](ServingParts& p) { cell<double>(p.requests, "arrival_s", 2) = 0.0005; },
       "/serving/requests: row 2: arrival_s 0.0005 is before the previous request's 0.001"},
      {[](ServingParts& p) { cell<int64_t>(p.steps, "prefill_tokens", 1) = 39; },
       "/serving/steps: the steps prefill 71 tokens but the requests' prompts hold 70"},
      {[](ServingParts& p) {
         cell<int64_t>(p.steps, "decode_tokens", 3) = 2;
         cell<int64_t>(p.steps, "decode_sequences", 3) = 2;
       },
       "/serving/steps: the steps decode 4 tokens but the requests' output tokens after their "
       "first are 3"},
      {[](ServingParts& p) { set_attr(p.attrs, "ttft_p95_s", 0.006); },
       "/serving: ttft_p95_s is 0.006, but /serving/requests ttft_s gives 0.0049"},
      {[](ServingParts& p) { set_attr(p.attrs, "throughput_per_s", 1.0); },
       "/serving: throughput_per_s is 1, expected requests / span_s = 428.571"},
      {[](ServingParts& p) { set_attr(p.attrs, "check", std::string("fine")); },
       "/serving: check is \"fine\", expected passed, failed or skipped: <why>"},
      {[](ServingParts& p) { set_attr(p.attrs, "check_steps", int64_t{3}); },
       "/serving: check_steps is 3, expected steps 4"},
      {[](ServingParts& p) { set_attr(p.attrs, "check_max_rel_error", 0.5); },
       "/serving: check is passed but check_max_rel_error 0.5 against check_tolerance 0.0001"},
      {[](ServingParts& p) { cell<double>(p.steps, "check_rel_error", 1) = std::nan(""); },
       "/serving/steps: check_rel_error is NaN in 1 step(s) but /serving check compared every "
       "step"},
      {[](ServingParts& p) { cell<double>(p.steps, "check_rel_error", 2) = 4e-7; },
       "/serving/steps: the largest check_rel_error is 4e-07 but /serving check_max_rel_error is "
       "3e-07"},
      {[](ServingParts& p) {
         cell<double>(p.steps, "check_rel_error", 2) = std::numeric_limits<double>::infinity();
       },
       "/serving/steps: the largest check_rel_error is inf but /serving check_max_rel_error is "
       "3e-07"},
      {[](ServingParts& p) {
         set_attr(p.attrs, "check", std::string("skipped: --check off"));
         set_attr(p.attrs, "check_steps", int64_t{0});
       },
       "/serving/steps: check_rel_error holds 4 compared step(s) but /serving check is skipped"},
  };
  int k = 0;
  for (const auto& [damage, expected] : damages) {
    ServingParts p = serving_parts();
    damage(p);
    const std::string path = file("damaged" + std::to_string(k++) + ".h5");
    write_run_file(path, trace_run(p));
    const std::vector<std::string> problems = validate_run_file(path);
    EXPECT_TRUE(std::find(problems.begin(), problems.end(), expected) != problems.end())
        << expected << "\nfound:\n"
        << joined(problems);
  }
}

} // namespace
} // namespace ridgeline
