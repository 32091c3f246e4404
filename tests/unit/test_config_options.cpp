// Strict input for every command: every given value is checked while parsing (never replaced
// by a default), config files refuse unknown keys and tables and malformed lines (naming file
// and line), lists refuse empty and repeated items, and a PointSpec resolves every option once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/config.hpp"
#include "app/config_file.hpp"
#include "app/point.hpp"
#include "app/point_common.hpp"
#include "app/point_spec.hpp"
#include "config_test_parse.hpp"
#include "models/work_model.hpp"

namespace ridgeline {
namespace {

using namespace config_test;

// ---- Given values are checked while parsing, never replaced by a default ----

// The message of the ParseError that parsing `args` with `parser` throws ("" if none).
template <typename Parser>
std::string parse_error(Parser parser, const std::vector<std::string>& args) {
  try {
    parser(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

std::string run_parse_error(const std::vector<std::string>& args) {
  return parse_error([](const std::vector<std::string>& a) { parse(a); }, args);
}

// The whole CLI of the binary (every command), parsed without running anything.
void parse_cli(std::vector<std::string> args) {
  CLI::App app;
  CommandAction action;
  build_cli(app, action);
  std::reverse(args.begin(), args.end());
  app.parse(args);
}

std::string cli_parse_error(const std::vector<std::string>& args) {
  return parse_error(parse_cli, args);
}

struct RefusedCase {
  const char* name;
  std::vector<std::string> args;
  const char* expected; ///< in the ParseError's message
};

std::string case_name(const ::testing::TestParamInfo<RefusedCase>& info) {
  return info.param.name;
}

class RunOptionRefuses : public ::testing::TestWithParam<RefusedCase> {};

// 0, a negative context or an empty string once stood for "unset" and were replaced by the
// embedded default (a file labelled with the preset's name holding another model).
TEST_P(RunOptionRefuses, WhileParsingInsteadOfUsingTheDefault) {
  const RefusedCase& c = GetParam();
  const std::string error = run_parse_error(c.args);
  EXPECT_NE(error.find(c.expected), std::string::npos)
      << "expected '" << c.expected << "', got '" << error << "'";
}

INSTANTIATE_TEST_SUITE_P(
    EveryNumericOption, RunOptionRefuses,
    ::testing::Values(
        RefusedCase{"seq_0", {"--seq", "0"}, "--seq: expected an integer >= 1, got '0'"},
        RefusedCase{"batch_0", {"--batch", "0"}, "--batch: expected an integer >= 1"},
        RefusedCase{
            "batch_negative", {"--batch", "-2"}, "--batch: expected an integer >= 1, got '-2'"},
        RefusedCase{"layers_0", {"--layers", "0"}, "--layers: expected an integer >= 1"},
        RefusedCase{"layers_0_over_preset",
                    {"--config", kModels + "/tiny.toml", "--layers", "0"},
                    "--layers"},
        RefusedCase{
            "ffn_hidden_0", {"--ffn-hidden", "0"}, "--ffn-hidden: expected an integer >= 1"},
        RefusedCase{"hidden_0", {"--hidden", "0"}, "--hidden: expected an integer >= 1"},
        RefusedCase{"hidden_negative",
                    {"--config", kModels + "/llama3-8b.toml", "--hidden", "-256"},
                    "--hidden"},
        RefusedCase{"heads_0", {"--heads", "0"}, "--heads: expected an integer >= 1"},
        RefusedCase{"kv_heads_0", {"--kv-heads", "0"}, "--kv-heads: expected an integer >= 1"},
        RefusedCase{
            "microbatches_0", {"--microbatches", "0"}, "--microbatches: expected an integer >= 1"},
        RefusedCase{"tp_0", {"--tp", "0"}, "--tp: expected an integer from 1"},
        RefusedCase{"pp_negative", {"--pp", "-1"}, "--pp: expected an integer from 1"},
        RefusedCase{"dp_0", {"--dp", "0"}, "--dp: expected an integer from 1"},
        RefusedCase{"context_negative",
                    {"--phase", "decode", "--context", "-5"},
                    "--context: expected an integer >= 0"},
        RefusedCase{"warmup_negative", {"--warmup", "-1"}, "--warmup: expected an integer from 0"},
        RefusedCase{"iters_0", {"--iters", "0"}, "--iters: expected an integer from 1"},
        RefusedCase{"timeout_0", {"--timeout", "0"}, "--timeout: expected a number > 0"},
        RefusedCase{"timeout_nan", {"--timeout", "nan"}, "--timeout: expected a number > 0"},
        RefusedCase{
            "sample_ms_negative", {"--sample-ms", "-1"}, "--sample-ms: expected an integer from 0"},
        RefusedCase{"rope_theta_0", {"--rope-theta", "0"}, "--rope-theta: expected a number > 0"},
        RefusedCase{
            "norm_eps_negative", {"--norm-eps", "-1e-5"}, "--norm-eps: expected a number > 0"},
        RefusedCase{"nccl_max_ctas_0", {"--nccl-max-ctas", "0"}, "--nccl-max-ctas: expected -1"},
        RefusedCase{"symm_split",
                    {"--overlap", "none,symm:split:2"},
                    "overlap strategy 'symm:split:2' is not one of"},
        RefusedCase{"nccl_cta_policy_bad",
                    {"--nccl-cta-policy", "fast"},
                    "--nccl-cta-policy: expected default, efficiency or zero, got 'fast'"},
        RefusedCase{
            "nccl_min_ctas_negative", {"--nccl-min-ctas", "-2"}, "--nccl-min-ctas: expected -1"},
        RefusedCase{"gemm_sms_negative",
                    {"--overlap-gemm-sms", "-1"},
                    "--overlap-gemm-sms: expected an integer from 0"},
        RefusedCase{"seed_negative", {"--seed", "-1"}, "--seed: expected an integer >= 0"},
        RefusedCase{"model_empty", {"--model", ""}, "--model: empty value"},
        RefusedCase{
            "mlp_empty", {"--config", kModels + "/tiny.toml", "--mlp", ""}, "--mlp: empty value"},
        RefusedCase{"out_empty", {"--out", ""}, "--out: empty value"},
        RefusedCase{"config_empty", {"--config", ""}, "--config: empty value"},
        RefusedCase{"overlap_twice", {"--overlap", "none,none"}, "--overlap: 'none' given twice"},
        RefusedCase{"overlap_same_strategy",
                    {"--overlap", "chunked:2,chunked:02"},
                    "'chunked:02' repeats 'chunked:2'"},
        RefusedCase{"overlap_trailing_comma", {"--overlap", "async,"}, "--overlap: empty item"},
        RefusedCase{"overlap_empty_item", {"--overlap", "none,,async"}, "--overlap: empty item"},
        RefusedCase{"overlap_name", {"--overlap", "none,sideways"}, "overlap strategy 'sideways'"},
        RefusedCase{
            "attention_twice", {"--attention", "naive,naive"}, "--attention: 'naive' given twice"},
        RefusedCase{"attention_name",
                    {"--attention", "fused,flash"},
                    "unknown attention implementation 'flash'"},
        RefusedCase{"attention_empty_item", {"--attention", "fused,"}, "--attention: empty item"}),
    case_name);

TEST(RunConfig, AttentionListsRunEveryOverlapWithEveryImplementation) {
  const auto names = [](const std::vector<std::string>& args) {
    std::vector<std::string> out;
    for (const Variant& v : point_variants(point_spec(host_defaults(args))))
      out.push_back(v.name + "=" + v.overlap.name() + "/" + attention_name(v.attention));
    return out;
  };
  EXPECT_EQ(names({}), (std::vector<std::string>{"none=none/fused"}));
  EXPECT_EQ(names({"--attention", "naive,fused"}),
            (std::vector<std::string>{"naive=none/naive", "fused=none/fused"}));
  EXPECT_EQ(names({"--overlap", "none,async", "--attention", "naive"}),
            (std::vector<std::string>{"none=none/naive", "async=async/naive"}));
  EXPECT_EQ(names({"--overlap", "none,async", "--attention", "fused,naive"}),
            (std::vector<std::string>{"none+fused=none/fused", "none+naive=none/naive",
                                      "async+fused=async/fused", "async+naive=async/naive"}));
}

TEST(RunConfig, DefaultsFillOnlyTheOptionsNotGiven) {
  // A preset's dimensions stay; only what neither the preset nor the command line gave is filled.
  const RunConfig c = host_defaults({"--config", kModels + "/llama3-8b.toml", "--layers", "1",
                                     "--phase", "decode", "--context", "0", "--batch", "3"});
  EXPECT_EQ(c.model, "llama3-8b");
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.layers, 1);
  EXPECT_EQ(c.context, 0) << "a given context of 0 (an empty KV cache) is kept";
  EXPECT_EQ(c.batch, 3);
  // A given value that reads as "unset" is refused, not filled (it once ran host-default
  // dimensions in a file labelled llama3-8b).
  EXPECT_THROW(parse({"--config", kModels + "/llama3-8b.toml", "--hidden", "0"}),
               CLI::ValidationError);
  EXPECT_THROW(parse({"--phase", "decode", "--context", "-1"}), CLI::ValidationError);
}

TEST(RunConfig, TpAutoIsTheOnlyWordTpTakes) {
  EXPECT_EQ(parse({"--tp", "auto"}).tp, 0) << "0 stands for auto until the nodes are known";
  EXPECT_EQ(parse({"--tp", "4"}).tp, 4);
  for (const char* bad : {"0", "-2", "Auto", "node", "2.5"})
    EXPECT_THROW(parse({"--tp", bad}), CLI::ValidationError) << bad;
}

TEST(RunConfig, OverlapListRefusesEmptyAndRepeatedItems) {
  // validate() holds the same rule for configurations built without the command line.
  for (const char* overlap : {"none,none", "async,", ",", "split:2,split:2"}) {
    RunConfig c = host_defaults();
    c.overlap = overlap;
    const std::vector<std::string> problems = validate(c, 1);
    EXPECT_EQ(mentions(problems, "--overlap: "), 1) << overlap << joined(problems);
  }
}

// ---- Config files: strict, with the file and the line in every error ----

class ConfigFile : public ::testing::Test {
protected:
  // Writes `text` to a file of this test and returns its path.
  std::string write(const std::string& text) {
    char path[] = "/tmp/ridgeline-test-config-XXXXXX";
    const int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    close(fd);
    std::ofstream(path) << text;
    m_paths.emplace_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& p : m_paths)
      std::remove(p.c_str());
  }
  // The ParseError of `ridgeline COMMAND --config FILE` ("" if none).
  std::string error_of(const std::string& command, const std::string& text) {
    return cli_parse_error({command, "--config", write(text)});
  }

private:
  std::vector<std::string> m_paths;
};

struct BadFile {
  const char* name;
  const char* text;
  int line;
  const char* expected;
};

// A number of 30,000 digits: the regex that once scanned numbers overflowed the stack on it.
const std::string kLongLine = "[run]\nlayers = " + std::string(30000, '9') + "\n";
// The longest number a line holds: scanned, then refused by the option.
const std::string kLongNumber = "[run]\nlayers = " + std::string(4000, '9') + "\n";

class ConfigFileRefuses : public ConfigFile, public ::testing::WithParamInterface<BadFile> {};

TEST_P(ConfigFileRefuses, NamingTheFileAndTheLine) {
  const BadFile& b = GetParam();
  const std::string path = write(b.text);
  const std::string error = cli_parse_error({"run", "--config", path});
  const std::string where = path + ":" + std::to_string(b.line) + ": ";
  EXPECT_NE(error.find(where), std::string::npos)
      << "expected '" << where << "' in '" << error << "'";
  EXPECT_NE(error.find(b.expected), std::string::npos)
      << "expected '" << b.expected << "' in '" << error << "'";
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, ConfigFileRefuses,
    ::testing::Values(
        BadFile{"misspelled_key", "[run]\nhidden = 256\nkv_heads = 4\n", 3,
                "unknown key 'kv_heads' in [run] (did you mean 'kv-heads'?)"},
        BadFile{"unknown_key", "# preset\n[run]\nlayerz = 2\n", 3, "unknown key 'layerz' in [run]"},
        BadFile{"unknown_table", "[runn]\nlayers = 2\n", 1, "unknown table [runn]"},
        BadFile{"junk_table", "[run]\nlayers = 2\n[[[[\n", 3, "malformed line '[[[['"},
        BadFile{"array_table", "[[run]]\nlayers = 2\n", 1, "malformed line"},
        BadFile{"junk_line", "[run]\nlayers = 2\nhello\n", 3, "malformed line 'hello'"},
        BadFile{"bare_word", "[run]\nmlp = swiglu\n", 2,
                "the value 'swiglu' is not a \"quoted string\""},
        BadFile{"trailing_text", "[run]\nlayers = 2 4\n", 2, "more text after the value"},
        BadFile{"open_string", "[run]\nmodel = \"tiny\n", 2, "a string without its closing quote"},
        BadFile{"no_value", "[run]\nlayers =\n", 2, "no value after '='"},
        BadFile{"outside_table", "layers = 2\n[run]\n", 1, "'layers' is outside a table"},
        BadFile{"key_twice", "[run]\nlayers = 2\nheads = 4\nlayers = 3\n", 4,
                "'layers' given twice in [run] (first on line 2)"},
        BadFile{"table_twice", "[run]\nlayers = 2\n[run]\nheads = 4\n", 3,
                "table [run] given twice"},
        BadFile{"value_refused", "[run]\nlayers = 0\n", 2, "layers = 0: expected an integer >= 1"},
        BadFile{"flag_value", "[run]\ngraphs = 1\n", 2,
                "'graphs' is a flag: expected true or false"},
        BadFile{"list_refused", "[run]\noverlap = [\"none\", \"none\"]\n", 2, "'none' given twice"},
        BadFile{"other_command_key", "[run]\nlayers = 2\n[collectives]\nlayers = 2\n", 4,
                "unknown key 'layers' in [collectives]"},
        BadFile{"quoted_integer", "[run]\nbatch = \"4\"\n", 2,
                "'batch' takes a number: give it unquoted (batch = 4)"},
        BadFile{"quoted_float", "[run]\nrope-theta = \"1e4\"\n", 2, "'rope-theta' takes a number"},
        BadFile{"quoted_flag", "[run]\ngraphs = \"true\"\n", 2, "'graphs' is a flag"},
        BadFile{"long_line", kLongLine.c_str(), 2, "a line of 30009 characters (at most 4096)"},
        BadFile{"long_number", kLongNumber.c_str(), 2, "expected an integer >= 1"}),
    [](const ::testing::TestParamInfo<BadFile>& info) { return info.param.name; });

TEST_F(ConfigFile, ACommandReadsItsOwnTablesAndRefusesAFileWithoutOne) {
  const std::string text = "[run]\nlayers = 2\n[sweep]\ntp = \"1,2\"\n[collectives]\niters = "
                           "5\ncollectives = [\"all_reduce\"]\n";
  EXPECT_EQ(error_of("run", text), "");
  EXPECT_EQ(error_of("sweep", text), "");
  EXPECT_EQ(error_of("collectives", text), "");
  const std::string error = error_of("run", "[roofs]\nquick = true\n");
  EXPECT_NE(error.find("holds no [run] table"), std::string::npos) << error;
  // A preset is for run and sweep: the other commands would ignore it.
  const std::string roofs = error_of("roofs", "[run]\nlayers = 2\n");
  EXPECT_NE(roofs.find("holds no [roofs] table"), std::string::npos) << roofs;
}

TEST_F(ConfigFile, AGoodFileSetsItsOptionsAndTheCommandLineWins) {
  const std::string path = write("# a user's file\n"
                                 "[run]\n"
                                 "  model = 'mine'   # literal string\n"
                                 "hidden = 1_024\n"
                                 "heads = 16\n"
                                 "rope-theta = 5e5\n"
                                 "overlap = [\"none\", \"async\"]\n"
                                 "sequence-parallel = true\n"
                                 "\n");
  const RunConfig c = parse({"--config", path, "--heads", "8"});
  EXPECT_EQ(c.model, "mine");
  EXPECT_EQ(c.hidden, 1024);
  EXPECT_EQ(c.heads, 8);
  EXPECT_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.overlap, "none,async");
  EXPECT_TRUE(c.sequence_parallel);
}

TEST_F(ConfigFile, SweepReadsTheRunTableStrictlyToo) {
  const std::string error = cli_parse_error({"sweep", "--config", write("[run]\nlayerz = 2\n")});
  EXPECT_NE(error.find("unknown key 'layerz' in [run]"), std::string::npos) << error;
  const std::string dp = cli_parse_error({"sweep", "--config", write("[run]\ndp = 2\n")});
  EXPECT_NE(dp.find("--dp: a sweep runs each point"), std::string::npos) << dp;
}

// ---- Every other command: given values and lists ----

class CommandOptionRefuses : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(CommandOptionRefuses, WhileParsing) {
  const RefusedCase& c = GetParam();
  const std::string error = cli_parse_error(c.args);
  EXPECT_NE(error.find(c.expected), std::string::npos)
      << "expected '" << c.expected << "', got '" << error << "'";
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, CommandOptionRefuses,
    ::testing::Values(
        RefusedCase{"sweep_tp_0", {"sweep", "--tp", "1,0"}, "--tp: expected an integer from 1"},
        RefusedCase{
            "sweep_batch_0", {"sweep", "--batch", "0,4"}, "--batch: expected an integer >= 1"},
        RefusedCase{
            "sweep_seq_negative", {"sweep", "--seq", "-1"}, "--seq: expected an integer >= 1"},
        RefusedCase{
            "sweep_hidden_0", {"sweep", "--hidden", "0"}, "--hidden: expected an integer >= 1"},
        RefusedCase{"sweep_context_negative",
                    {"sweep", "--context", "16,-5"},
                    "--context: expected an integer >= 0"},
        RefusedCase{"sweep_same_number", {"sweep", "--tp", "1,01"}, "--tp: '01' repeats '1'"},
        RefusedCase{"sweep_overlap_twice",
                    {"sweep", "--overlap", "none,none"},
                    "--overlap: 'none' given twice"},
        RefusedCase{"sweep_phase",
                    {"sweep", "--phase", "prefill,pretrain"},
                    "--phase: unknown phase 'pretrain'"},
        RefusedCase{"sweep_transport",
                    {"sweep", "--transport", "auto,pigeon"},
                    "--transport: unknown transport 'pigeon'"},
        RefusedCase{"sweep_dtype_alias",
                    {"sweep", "--dtype", "fp32,float"},
                    "--dtype: unknown data type 'float' (expected auto, fp32, bf16 or fp16)"},
        // Each command's refusal names exactly the element types it takes.
        RefusedCase{"run_dtype_fp8",
                    {"run", "--dtype", "fp8"},
                    "--dtype: unknown data type 'fp8' (expected auto, fp32, bf16 or fp16)"},
        RefusedCase{"run_dtype_int32",
                    {"run", "--dtype", "int32"},
                    "--dtype: unknown data type 'int32' (expected auto, fp32, bf16 or fp16)"},
        RefusedCase{"sweep_dtype_int32",
                    {"sweep", "--dtype", "fp32,int32"},
                    "--dtype: unknown data type 'int32' (expected auto, fp32, bf16 or fp16)"},
        RefusedCase{"model_dtype_fp8",
                    {"model", "--dtype", "fp8"},
                    "--dtype: unknown data type 'fp8' (expected auto, fp32, bf16 or fp16)"},
        RefusedCase{"collectives_dtype_fp8",
                    {"collectives", "--dtype", "fp8"},
                    "--dtype: unknown data type 'fp8' (expected bf16, fp16, fp32 or int32)"},
        RefusedCase{"roofs_dtypes_int32",
                    {"roofs", "--dtypes", "fp32,int32"},
                    "--dtypes: unknown data type 'int32' (expected fp32, bf16 or fp16)"},
        RefusedCase{"sweep_dp", {"sweep", "--dp", "2"}, "--dp: a sweep runs each point"},
        RefusedCase{"model_attention_list",
                    {"model", "--attention", "fused,naive"},
                    "--attention: a prediction is of one implementation: give one"},
        RefusedCase{
            "sweep_layers_0", {"sweep", "--layers", "0"}, "--layers: expected an integer >= 1"},
        RefusedCase{
            "sweep_iters_0", {"sweep", "--iters", "0"}, "--iters: expected an integer from 1"},
        RefusedCase{"collectives_group_0",
                    {"collectives", "--group-size", "0"},
                    "--group-size: expected an integer from 1"},
        RefusedCase{"collectives_trailing_comma",
                    {"collectives", "--collectives", "all_reduce,"},
                    "--collectives: empty item"},
        RefusedCase{"collectives_twice",
                    {"collectives", "--collectives", "all_reduce,all_gather,all_reduce"},
                    "--collectives: 'all_reduce' given twice"},
        RefusedCase{"collectives_all_in_list",
                    {"collectives", "--collectives", "all,sendrecv"},
                    "'all' stands alone"},
        RefusedCase{"collectives_iters_0",
                    {"collectives", "--iters", "0"},
                    "--iters: expected an integer from 1"},
        RefusedCase{"collectives_warmup_negative",
                    {"collectives", "-w", "-1"},
                    "--warmup: expected an integer from 0"},
        RefusedCase{"collectives_root_negative",
                    {"collectives", "--root", "-1"},
                    "--root: expected an integer from 0"},
        RefusedCase{"collectives_timeout_0",
                    {"collectives", "--timeout", "0"},
                    "--timeout: expected a number > 0"},
        RefusedCase{"collectives_step_1",
                    {"collectives", "--step-factor", "1"},
                    "--step-factor: expected a number > 1"},
        RefusedCase{"collectives_ctas",
                    {"collectives", "--nccl-max-ctas", "-5"},
                    "--nccl-max-ctas: expected -1"},
        RefusedCase{"collectives_buffers",
                    {"collectives", "--buffers", "ordinary,pinned"},
                    "unknown buffers 'pinned' (expected ordinary or symmetric)"},
        RefusedCase{"collectives_min_bytes_0",
                    {"collectives", "--min-bytes", "0"},
                    "--min-bytes: must be > 0"},
        RefusedCase{"collectives_max_bytes_empty",
                    {"collectives", "--max-bytes", ""},
                    "--max-bytes: expected a byte count"},
        RefusedCase{
            "collectives_dtype_empty", {"collectives", "--dtype", ""}, "--dtype: empty value"},
        RefusedCase{"roofs_dtypes_twice",
                    {"roofs", "--dtypes", "fp32,fp32"},
                    "--dtypes: 'fp32' given twice"},
        RefusedCase{
            "roofs_dtypes_empty_item", {"roofs", "--dtypes", "fp32,"}, "--dtypes: empty item"},
        RefusedCase{"roofs_dtypes_empty", {"roofs", "--dtypes", ""}, "--dtypes: empty"},
        RefusedCase{"roofs_sizes_twice",
                    {"roofs", "--gemm-sizes", "128,256,128"},
                    "--gemm-sizes: '128' given twice"},
        RefusedCase{"roofs_shapes_twice",
                    {"roofs", "--gemm-shapes", "1x2x3,1x2x3"},
                    "--gemm-shapes: '1x2x3' given twice"},
        RefusedCase{"roofs_collectives_twice",
                    {"roofs", "--collectives", "sendrecv,sendrecv"},
                    "--collectives: 'sendrecv' given twice"},
        RefusedCase{"roofs_collectives_empty_item",
                    {"roofs", "--collectives", "all_reduce,"},
                    "--collectives: empty item"},
        RefusedCase{"roofs_sample_ms_negative",
                    {"roofs", "--sample-ms", "-1"},
                    "--sample-ms: expected an integer from 0"},
        RefusedCase{
            "roofs_timeout_0", {"roofs", "--timeout", "0"}, "--timeout: expected a number > 0"},
        RefusedCase{"roofs_memory_0",
                    {"roofs", "--memory-max-bytes", "0"},
                    "--memory-max-bytes: must be > 0"},
        RefusedCase{"report_twice", {"report", "a.h5", "a.h5"}, "files: 'a.h5' given twice"},
        RefusedCase{"compare_fail_above_negative",
                    {"compare", "--fail-above", "-1", "a.h5", "b.h5"},
                    "--fail-above: expected a number > 0"}),
    case_name);

TEST(CommandOptions, ListsRefuseOnlyEmptyRepeatedAndBadItems) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> good_bad = {
      {{"sweep", "--tp", "1,2", "--context", "0,16", "--overlap", "none,chunked:2"},
       {"sweep", "--tp", "1,2,2"}},
      {{"collectives", "--collectives", "all_reduce,sendrecv", "--group-size", "2"},
       {"collectives", "--collectives", "sendrecv,"}},
      {{"collectives", "--collectives", "all"}, {"collectives", "--collectives", ",all_reduce"}},
      {{"roofs", "--dtypes", "fp32", "--gemm-sizes", "128,256", "--gemm-shapes", "1x2x3,3x2x1"},
       {"roofs", "--gemm-sizes", "128,256,0128"}},
      {{"compare", "a.h5", "a.h5", "--fail-above", "5"},
       {"compare", "a.h5", "b.h5", "--fail-above", "0"}}};
  for (const auto& [good, bad] : good_bad) {
    EXPECT_EQ(cli_parse_error(good), "") << good.front();
    EXPECT_NE(cli_parse_error(bad), "") << bad.front() << " " << bad.back();
  }
}

TEST(PointSpec, ResolvesEveryOptionOnceIntoTypes) {
  const PointSpec train = point_spec(host_defaults(
      {"--phase",     "train", "--tp",         "2",          "--pp",           "2",
       "--dp",        "2",     "--batch",      "8",          "--microbatches", "2",
       "--recompute", "full",  "--overlap",    "async,none", "--attention",    "naive",
       "--check",     "off",   "--dp-overlap", "off",        "--bucket-mb",    "4"}));
  EXPECT_EQ(train.phase, RunPhase::train);
  ASSERT_TRUE(train.scheduled()); // train runs 1f1b unless a schedule is given
  EXPECT_EQ(train.schedule->kind, ScheduleKind::one_f_one_b);
  EXPECT_EQ(train.shape.batch, 2); // the global batch 8 over 2 replicas of 2 microbatches
  EXPECT_EQ(train.stage_layers(), train.model.layers / 2);
  EXPECT_TRUE(train.recompute);
  EXPECT_FALSE(train.dp_overlap);
  EXPECT_EQ(train.bucket_mb, 4.0);
  EXPECT_EQ(train.check, CheckMode::off);
  ASSERT_EQ(train.overlaps.size(), 2u);
  EXPECT_EQ(train.overlaps[0].kind, Overlap::Kind::async);
  EXPECT_EQ(train.overlaps[1].kind, Overlap::Kind::none);
  EXPECT_EQ(train.attentions, std::vector<AttentionImpl>{AttentionImpl::naive});
  EXPECT_FALSE(train.cuda);
  EXPECT_EQ(train.dtype, DType::f32);

  const PointSpec decode =
      point_spec(host_defaults({"--phase", "decode", "--context", "64", "--decode-steps", "4",
                                "--tp", "2", "--overlap", "symm:chunked:2,ce-ring:2"}));
  EXPECT_EQ(decode.phase, RunPhase::decode);
  EXPECT_FALSE(decode.scheduled());
  EXPECT_EQ(decode.shape.context, 64);
  EXPECT_EQ(decode.shape.decode_steps, 4);
  EXPECT_EQ(decode.check, CheckMode::automatic);
  ASSERT_EQ(decode.overlaps.size(), 2u);
  EXPECT_TRUE(decode.overlaps[0].symmetric);
  EXPECT_EQ(decode.overlaps[0].chunks(), 2);
  EXPECT_EQ(decode.overlaps[1].ring_subpieces(), 2);

  const PointSpec scheduled = point_spec(
      host_defaults({"--pp", "2", "--schedule", "gpipe", "--microbatches", "2", "--batch", "2"}));
  EXPECT_EQ(scheduled.phase, RunPhase::prefill);
  ASSERT_TRUE(scheduled.scheduled());
  EXPECT_EQ(scheduled.schedule->kind, ScheduleKind::gpipe);
  EXPECT_EQ(std::string(check_mode_name(CheckMode::automatic)), "auto");
  EXPECT_EQ(std::string(run_phase_name(RunPhase::train)), "train");
  // A configuration validation refuses has no typed point: its first problem is the error.
  EXPECT_THROW(point_spec(host_defaults(
                   {"--pp", "2", "--schedule", "gpipe", "--microbatches", "2", "--batch", "1"})),
               UsageError);
  EXPECT_FALSE(validate_point(host_defaults({"--tp", "2"}), 3).problems.empty());
}

// --allreduce-table takes one file per group size: each is an input no output may overwrite.
TEST(InputFiles, NameEveryAllReduceTableOfAList) {
  RunConfig c;
  c.roofs = "roofs.h5";
  c.allreduce_table = "g2.h5,g4.h5";
  const std::vector<NamedFile> files = input_files(c);
  std::vector<std::string> tables;
  for (const NamedFile& f : files)
    if (f.option == "--allreduce-table") tables.push_back(f.path);
  EXPECT_EQ(tables, (std::vector<std::string>{"g2.h5", "g4.h5"}));
  EXPECT_EQ(files.front().path, "roofs.h5");
}

} // namespace
} // namespace ridgeline
