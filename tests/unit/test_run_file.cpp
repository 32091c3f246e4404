// The run file guards the schema: what is written is read back bit for bit, validation finds
// broken files, and failed writes leave nothing behind that looks like a result.
#include <gtest/gtest.h>

#include "run_file_fixture.hpp"

namespace ridgeline {
namespace {

using namespace run_file_test;
namespace fs = std::filesystem;

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

} // namespace
} // namespace ridgeline
