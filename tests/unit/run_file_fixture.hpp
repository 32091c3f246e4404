// The run-file tests' fixture: a directory of its own per test, a two-rank run with every part
// of the file filled, and bit-exact comparisons. Shared by test_run_file and test_run_file_kinds.
#pragma once

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

namespace ridgeline::run_file_test {

namespace fs = std::filesystem;

inline constexpr int kRanks = 2;
inline constexpr int kWarmup = 2;
inline constexpr int kTimed = 3;

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

inline std::vector<TimelineRecord> make_timeline(int rank, const std::vector<int32_t>& ops,
                                                 int layers, int iterations) {
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
inline RunData make_run() {
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

inline bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(double)) == 0;
}

inline void expect_same_attrs(const Attrs& expected, const Attrs& actual,
                              const std::string& where) {
  ASSERT_EQ(expected.size(), actual.size()) << where;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].first, actual[i].first) << where << " attribute " << i;
    EXPECT_EQ(expected[i].second, actual[i].second) << where << " attribute " << expected[i].first;
  }
}

inline void expect_same_timeline(const std::vector<TimelineRecord>& expected,
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

inline bool contains(const std::vector<std::string>& problems, const std::string& text) {
  for (const std::string& problem : problems)
    if (problem.find(text) != std::string::npos) return true;
  return false;
}

inline std::string joined(const std::vector<std::string>& problems) {
  std::string text;
  for (const std::string& problem : problems)
    text += problem + "\n";
  return text;
}

// Opens a written file for modification, to damage it the way a foreign writer could.
inline h5::Handle open_for_update(const std::string& path) {
  return h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), "H5Fopen", path);
}

} // namespace ridgeline::run_file_test
