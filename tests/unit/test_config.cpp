// The run configuration: presets and command-line overrides through CLI11, the embedded
// defaults, and the validation matrix (every problem reported at once, none for good input).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "app/config.hpp"

namespace ridgeline {
namespace {

// The preset directory of the source tree (set by CMake).
const std::string kModels = RIDGELINE_MODELS_DIR;

RunConfig parse(std::vector<std::string> args) {
  RunConfig cfg;
  CLI::App app;
  // As build_cli does: --config on the top level, reachable after the subcommand.
  app.set_config("--config");
  app.fallthrough();
  CLI::App* run = app.add_subcommand("run");
  bind_run_options(*run, cfg);
  args.insert(args.begin(), "run");
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed argument vector
  app.parse(args);
  return cfg;
}

RunConfig host_defaults(std::vector<std::string> args = {}) {
  RunConfig cfg = parse(std::move(args));
  apply_defaults(cfg, "host");
  return cfg;
}

// How many of `problems` contain `text`.
int mentions(const std::vector<std::string>& problems, const std::string& text) {
  int n = 0;
  for (const std::string& p : problems) n += p.find(text) != std::string::npos ? 1 : 0;
  return n;
}

std::string joined(const std::vector<std::string>& problems) {
  std::string s;
  for (const std::string& p : problems) s += "\n  " + p;
  return s;
}

TEST(RunConfig, PresetsLoadAndTheCommandLineOverridesThem) {
  const RunConfig c = parse({"--config", kModels + "/llama3-70b.toml", "--layers", "2", "--tp", "4"});
  EXPECT_EQ(c.model, "llama3-70b");
  EXPECT_EQ(c.hidden, 8192);
  EXPECT_EQ(c.heads, 64);
  EXPECT_EQ(c.kv_heads, 8);
  EXPECT_EQ(c.ffn_hidden, 28672);
  EXPECT_EQ(c.mlp, "swiglu");
  EXPECT_EQ(c.norm, "rmsnorm");
  EXPECT_EQ(c.rotary, "on");
  EXPECT_EQ(c.layers, 2) << "the command line wins over the preset";
  EXPECT_EQ(c.tp, 4);
  for (const char* preset : {"tiny", "gpt-h8192", "gpt3-175b", "llama3-8b", "llama3-405b"}) {
    RunConfig p = parse({"--config", kModels + "/" + preset + ".toml"});
    EXPECT_GT(p.hidden, 0) << preset;
    apply_defaults(p, "cuda");
    EXPECT_TRUE(validate(p, 1).empty()) << preset << joined(validate(p, 1));
  }
}

TEST(RunConfig, EmbeddedDefaultsAreValidOnBothBackends) {
  RunConfig host = parse({});
  apply_defaults(host, "host");
  EXPECT_EQ(host.backend, "host");
  EXPECT_EQ(host.dtype, "fp32");
  EXPECT_TRUE(validate(host, 1).empty()) << joined(validate(host, 1));
  RunConfig gpu = parse({});
  apply_defaults(gpu, "cuda");
  EXPECT_EQ(gpu.hidden, 8192);
  EXPECT_EQ(gpu.dtype, "bf16");
  EXPECT_TRUE(validate(gpu, 1).empty()) << joined(validate(gpu, 1));
}

struct BadCase {
  const char* name;
  std::vector<std::string> args;
  int ranks;
  const char* expected;
};

class RunConfigRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(RunConfigRejects, WithAMessageNamingTheProblem) {
  const BadCase& c = GetParam();
  const std::vector<std::string> problems = validate(host_defaults(c.args), c.ranks);
  EXPECT_EQ(mentions(problems, c.expected), 1) << "expected '" << c.expected << "' in" << joined(problems);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, RunConfigRejects,
    ::testing::Values(
        BadCase{"grid", {"--tp", "2"}, 3, "tp * pp * dp = 2 but 3 ranks"},
        BadCase{"grid_pp_dp", {"--tp", "2", "--pp", "2", "--dp", "2"}, 4, "tp * pp * dp = 8"},
        BadCase{"heads_tp", {"--heads", "12", "--hidden", "768", "--tp", "8"}, 8,
                "--heads 12 is not divisible by --tp 8"},
        BadCase{"kv_heads_tp", {"--heads", "12", "--kv-heads", "6", "--hidden", "768", "--tp", "4"}, 4,
                "--kv-heads 6 and --tp 4"},
        BadCase{"hidden_heads", {"--hidden", "1000", "--heads", "16"}, 1,
                "--hidden 1000 is not divisible by --heads 16"},
        BadCase{"heads_kv", {"--heads", "16", "--kv-heads", "5"}, 1,
                "--heads 16 is not a multiple of --kv-heads 5"},
        BadCase{"layers_pp", {"--layers", "3", "--pp", "2"}, 2, "--layers 3 is not divisible by --pp 2"},
        BadCase{"ffn_tp", {"--ffn-hidden", "1001", "--tp", "2"}, 2, "--ffn-hidden 1001"},
        BadCase{"sp_tokens", {"--tp", "4", "--sequence-parallel", "--seq", "6", "--batch", "1"}, 4,
                "do not divide into 4 equal row blocks"},
        BadCase{"sp_needs_tp", {"--sequence-parallel"}, 1, "--sequence-parallel needs --tp 2"},
        BadCase{"chunks", {"--overlap", "chunked:3", "--seq", "64", "--batch", "1"}, 1,
                "do not divide into 3 equal row blocks"},
        BadCase{"split_batch", {"--overlap", "split:2", "--batch", "3"}, 1, "split:2 splits the batch"},
        BadCase{"overlap_name", {"--overlap", "none,sideways"}, 1, "overlap strategy 'sideways'"},
        BadCase{"negative_batch", {"--batch", "-2"}, 1, "--batch must be positive"},
        BadCase{"negative_seq", {"--seq", "-4"}, 1, "--seq must be positive"},
        BadCase{"zero_tp", {"--tp", "0"}, 1, "--tp must be positive"},
        BadCase{"iters", {"--iters", "0"}, 1, "--iters must be >= 1"},
        BadCase{"microbatches", {"--batch", "3", "--microbatches", "2"}, 1,
                "--batch 3 is not divisible by --microbatches 2"},
        BadCase{"overflow_activations", {"--hidden", "65536", "--heads", "64", "--seq", "65536"}, 1,
                "activations (tokens x hidden) would hold"},
        BadCase{"overflow_kv", {"--phase", "decode", "--batch", "4096", "--context", "1000000"}, 1,
                "KV cache"},
        BadCase{"host_dtype", {"--dtype", "bf16"}, 1, "the host backend computes in fp32"},
        BadCase{"graphs_host", {"--graphs"}, 1, "--graphs needs the cuda backend"},
        BadCase{"nccl_ctas_host", {"--nccl-max-ctas", "8"}, 1, "need the cuda backend (NCCL)"},
        BadCase{"gemm_sms_host", {"--overlap-gemm-sms", "100"}, 1, "--overlap-gemm-sms needs the cuda backend"},
        BadCase{"gemm_sms_negative", {"--overlap-gemm-sms", "-1"}, 1, "--overlap-gemm-sms must be >= 0"},
        BadCase{"phase", {"--phase", "train"}, 1, "--phase must be one of prefill, decode"},
        BadCase{"out_dir", {"--out", "/nonexistent-dir/x.h5"}, 1, "directory '/nonexistent-dir' does not exist"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(RunConfig, EveryProblemIsReportedAtOnce) {
  const std::vector<std::string> problems =
      validate(host_defaults({"--tp", "3", "--hidden", "1000", "--heads", "16", "--iters", "0",
                              "--graphs"}),
               2);
  EXPECT_EQ(mentions(problems, "tp * pp * dp = 3 but 2 ranks"), 1) << joined(problems);
  EXPECT_EQ(mentions(problems, "--hidden 1000 is not divisible by --heads 16"), 1) << joined(problems);
  EXPECT_EQ(mentions(problems, "--heads 16 is not divisible by --tp 3"), 1) << joined(problems);
  EXPECT_EQ(mentions(problems, "--iters must be >= 1"), 1) << joined(problems);
  EXPECT_EQ(mentions(problems, "--graphs needs the cuda backend"), 1) << joined(problems);
}

TEST(RunConfig, GoodShapesPass) {
  const std::vector<std::vector<std::string>> good = {
      {"--tp", "2"},
      {"--tp", "2", "--sequence-parallel", "--overlap", "none,async,chunked:2"},
      {"--heads", "16", "--kv-heads", "2", "--tp", "4"},  // KV heads replicated across ranks
      {"--phase", "decode", "--context", "100", "--overlap", "split:2"},
      {"--pp", "2", "--microbatches", "2", "--batch", "2"}};
  const int ranks[] = {2, 2, 4, 1, 2};
  for (size_t i = 0; i < good.size(); ++i) {
    const std::vector<std::string> problems = validate(host_defaults(good[i]), ranks[i]);
    EXPECT_TRUE(problems.empty()) << "case " << i << joined(problems);
  }
}

}  // namespace
}  // namespace ridgeline
