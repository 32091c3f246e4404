// The run file of the other commands and runs: a `collectives` file, the roofs, and a trace
// run's /serving, each written, read back and validated (test_run_file: a `run` file).
#include <gtest/gtest.h>

#include "run_file_fixture.hpp"

namespace ridgeline {
namespace {

using namespace run_file_test;
namespace fs = std::filesystem;

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
