// The run configuration: presets and command-line overrides through CLI11, the embedded
// defaults, and the validation matrix (every problem reported at once, none for good input).
// Strict parsing of every command's options and config files: test_config_options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "app/command_support.hpp"
#include "app/config.hpp"
#include "app/config_file.hpp"
#include "app/point.hpp"
#include "app/point_common.hpp"
#include "app/point_spec.hpp"
#include "app/tp_point.hpp"
#include "config_test_parse.hpp"
#include "models/work_model.hpp"

namespace ridgeline {
namespace {

using namespace config_test;

TEST(RunConfig, PresetsLoadAndTheCommandLineOverridesThem) {
  const RunConfig c =
      parse({"--config", kModels + "/llama3-70b.toml", "--layers", "2", "--tp", "4"});
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

// The MoE presets load into the model spec and are valid for run (at --tp 1) and for model.
TEST(RunConfig, MoePresetsLoadIntoTheModelSpec) {
  struct Preset {
    const char* name;
    int64_t hidden, experts, top_k, expert_ffn, shared;
    GatingKind gating;
  };
  for (const Preset& e : {Preset{"mixtral-8x7b", 4096, 8, 2, 14336, 0, GatingKind::softmax},
                          Preset{"qwen3-moe", 2048, 128, 8, 768, 0, GatingKind::softmax},
                          Preset{"deepseek-v3", 7168, 256, 8, 2048, 1, GatingKind::sigmoid}}) {
    RunConfig c = parse({"--config", kModels + "/" + e.name + ".toml"});
    apply_defaults(c, "cuda");
    const ModelSpec m = model_spec(c);
    EXPECT_EQ(m.name, e.name);
    EXPECT_EQ(m.hidden, e.hidden) << e.name;
    EXPECT_TRUE(m.moe()) << e.name;
    EXPECT_EQ(m.experts, e.experts) << e.name;
    EXPECT_EQ(m.top_k, e.top_k) << e.name;
    EXPECT_EQ(m.expert_ffn_hidden, e.expert_ffn) << e.name;
    EXPECT_EQ(m.shared_experts, e.shared) << e.name;
    EXPECT_EQ(m.gating, e.gating) << e.name;
    EXPECT_EQ(m.mlp, MlpKind::swiglu) << e.name;
    EXPECT_EQ(m.hidden % m.heads, 0) << e.name;
    EXPECT_TRUE(validate(c, 1).empty()) << e.name << joined(validate(c, 1));
    EXPECT_TRUE(validate(c, 1, false).empty()) << e.name << joined(validate(c, 1, false));
    // Expert parallelism over two data-parallel replicas.
    c.dp = 2;
    c.ep = 2;
    EXPECT_TRUE(validate(c, 2).empty()) << e.name << joined(validate(c, 2));
  }
  // Dense: no experts, and the spec as before.
  const ModelSpec dense = model_spec(host_defaults({"--config", kModels + "/llama3-8b.toml"}));
  EXPECT_FALSE(dense.moe());
  EXPECT_EQ(dense.top_k, 0);
  EXPECT_EQ(dense.ffn_hidden, 14336);
}

// A bad MoE option is the one problem named: what the MoE executor does not run is said of
// valid models only.
TEST(RunConfig, ABadMoeOptionIsTheOneProblem) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--top-k", "9"},
        std::vector<std::string>{"--top-k", "2", "--ep", "3"}}) {
    std::vector<std::string> all = {"--mlp", "swiglu", "--experts", "8", "--expert-ffn-hidden",
                                    "64"};
    all.insert(all.end(), args.begin(), args.end());
    const std::vector<std::string> problems = validate(host_defaults(all), 1);
    all.insert(all.end(), {"--phase", "train"});
    const std::vector<std::string> train = validate(host_defaults(all), 1);
    EXPECT_EQ(problems.size(), 1u) << joined(problems);
    EXPECT_EQ(train, problems) << joined(train);
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
  EXPECT_EQ(mentions(problems, c.expected), 1)
      << "expected '" << c.expected << "' in" << joined(problems);
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, RunConfigRejects,
    ::testing::Values(
        BadCase{"grid", {"--tp", "2"}, 3, "tp * pp * dp = 2 but 3 ranks"},
        BadCase{"grid_pp_dp", {"--tp", "2", "--pp", "2", "--dp", "2"}, 4, "tp * pp * dp = 8"},
        BadCase{"heads_tp",
                {"--heads", "12", "--hidden", "768", "--tp", "8"},
                8,
                "--heads 12 is not divisible by --tp 8"},
        BadCase{"kv_heads_tp",
                {"--heads", "12", "--kv-heads", "6", "--hidden", "768", "--tp", "4"},
                4,
                "--kv-heads 6 and --tp 4"},
        BadCase{"hidden_heads",
                {"--hidden", "1000", "--heads", "16"},
                1,
                "--hidden 1000 is not divisible by --heads 16"},
        BadCase{"heads_kv",
                {"--heads", "16", "--kv-heads", "5"},
                1,
                "--heads 16 is not a multiple of --kv-heads 5"},
        BadCase{"layers_pp",
                {"--layers", "3", "--pp", "2"},
                2,
                "--layers 3 is not divisible by --pp 2"},
        BadCase{"ffn_tp", {"--ffn-hidden", "1001", "--tp", "2"}, 2, "--ffn-hidden 1001"},
        BadCase{"moe_top_k_above_experts",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "9", "--expert-ffn-hidden", "64"},
                1,
                "--top-k 9 is above --experts 8"},
        BadCase{"moe_top_k_missing",
                {"--mlp", "swiglu", "--experts", "8", "--expert-ffn-hidden", "64"},
                1,
                "--top-k must be at least 1 with --experts 8 (got 0)"},
        BadCase{"moe_expert_ffn_missing",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2"},
                1,
                "--expert-ffn-hidden must be positive with --experts 8"},
        BadCase{"moe_experts_ep",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--ep", "3"},
                1,
                "--experts 8 is not divisible by --ep 3"},
        BadCase{"moe_a2a_host",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--dp", "2", "--ep", "2", "--a2a", "ipc"},
                1,
                "--a2a ipc moves an MoE layer's rows between the GPUs"},
        BadCase{"moe_a2a_name",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--a2a", "mpi"},
                1,
                "--a2a must be one of nccl, ipc"},
        BadCase{"moe_a2a_dense", {"--a2a", "ipc"}, 1, "--a2a ipc needs --experts"},
        BadCase{"moe_gelu",
                {"--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64"},
                1,
                "the experts are SwiGLU MLPs (got --mlp gelu)"},
        BadCase{"moe_gating",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--gating", "relu"},
                1,
                "--gating must be one of softmax, sigmoid"},
        BadCase{"moe_top_k_dense", {"--top-k", "2"}, 1, "--top-k 2 needs --experts"},
        BadCase{"moe_ep_dense", {"--ep", "2"}, 1, "--ep 2 needs --experts"},
        BadCase{"moe_gating_dense", {"--gating", "sigmoid"}, 1, "--gating sigmoid needs --experts"},
        BadCase{
            "moe_routing_dense", {"--routing", "uniform"}, 1, "--routing uniform needs --experts"},
        BadCase{"moe_routing",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--routing", "zipf:-1"},
                1,
                "--routing must be router, uniform or zipf:S with S >= 0 (got 'zipf:-1')"},
        BadCase{"moe_ep_ranks",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--dp", "3", "--ep", "2"},
                3,
                "--ep 2 does not divide the 3 ranks (tp 1 x dp 3)"},
        BadCase{"moe_train",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--phase", "train"},
                1,
                "--phase train is not executed for MoE models"},
        BadCase{"moe_tp_tokens",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--tp", "2", "--seq", "3", "--batch", "1"},
                2,
                "at --tp 2 each rank routes a block of tokens / tp, but 3 tokens"},
        BadCase{"moe_tp_microbatch_tokens",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--tp", "2", "--seq", "3", "--batch", "2", "--microbatches", "2"},
                2,
                "but 3 tokens (--batch x --seq / --microbatches) do not divide by 2"},
        BadCase{"moe_tp_overlap",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--tp", "2", "--overlap", "split:2"},
                2,
                "--overlap split:2: an MoE point runs --overlap none or async"},
        BadCase{"moe_ep_tp_ranks",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--tp", "2", "--dp", "1", "--ep", "4"},
                2,
                "--ep 4 does not divide the 2 ranks (tp 2 x dp 1)"},
        BadCase{"moe_graphs",
                {"--mlp", "swiglu", "--experts", "8", "--top-k", "2", "--expert-ffn-hidden", "64",
                 "--graphs"},
                1,
                "--graphs captures a step"},
        BadCase{"sp_tokens",
                {"--tp", "4", "--sequence-parallel", "--seq", "6", "--batch", "1"},
                4,
                "do not divide into 4 equal row blocks"},
        BadCase{"sp_needs_tp", {"--sequence-parallel"}, 1, "--sequence-parallel needs --tp 2"},
        BadCase{"chunks",
                {"--overlap", "chunked:3", "--seq", "64", "--batch", "1"},
                1,
                "do not divide into 3 equal row blocks"},
        BadCase{
            "split_batch", {"--overlap", "split:2", "--batch", "3"}, 1, "split:2 splits the batch"},
        BadCase{"microbatches",
                {"--batch", "3", "--microbatches", "2"},
                1,
                "--batch 3 is not divisible by --microbatches 2"},
        BadCase{"overflow_activations",
                {"--hidden", "65536", "--heads", "64", "--seq", "65536"},
                1,
                "activations (tokens x hidden) would hold"},
        BadCase{"overflow_kv",
                {"--phase", "decode", "--batch", "4096", "--context", "1000000"},
                1,
                "KV cache"},
        BadCase{"decode_steps_prefill",
                {"--decode-steps", "4"},
                1,
                "--decode-steps 4 generates tokens: it needs --phase decode"},
        BadCase{"decode_steps_iters",
                {"--phase", "decode", "--decode-steps", "4", "--iters", "6"},
                1,
                "--iters 6 is not a multiple of --decode-steps 4"},
        BadCase{"decode_steps_overflow_kv",
                {"--phase", "decode", "--batch", "4096", "--context", "1000", "--decode-steps",
                 "999000", "--iters", "999000"},
                1,
                "KV cache rows (batch x (context + decode steps))"},
        BadCase{"gemm_algo", {"--gemm-algo", "fastest"}, 1, "--gemm-algo must be one of"},
        BadCase{"grouped_gemm", {"--grouped-gemm", "fused"}, 1, "--grouped-gemm must be one of"},
        BadCase{"allreduce_name", {"--allreduce", "ring"}, 1, "--allreduce must be one of"},
        BadCase{"allreduce_host",
                {"--allreduce", "oneshot", "--tp", "2"},
                1,
                "--allreduce oneshot: the custom all-reduce runs on GPUs (needs the cuda backend)"},
        BadCase{"allreduce_auto_without_table",
                {"--allreduce", "auto", "--tp", "2"},
                1,
                "--allreduce auto chooses from measured times: give --allreduce-table FILE"},
        // A list (one file per group size) names the file that cannot be read, not the list.
        BadCase{"allreduce_table_list_missing",
                {"--allreduce", "auto", "--tp", "2", "--allreduce-table",
                 kModels + "/tiny.toml,no-such-table.h5"},
                2,
                "--allreduce-table: 'no-such-table.h5' is not a readable file"},
        BadCase{"allreduce_table_without_auto",
                {"--allreduce-table", "x.h5"},
                1,
                "--allreduce-table is read by --allreduce auto (got --allreduce nccl)"},
        BadCase{"allreduce_tp1",
                {"--allreduce", "twoshot"},
                1,
                "--allreduce twoshot: the custom all-reduce replaces the tensor-parallel "
                "all-reduce: needs --tp 2 or more"},
        BadCase{"gemm_search_host",
                {"--gemm-algo", "search"},
                1,
                "--gemm-algo search chooses among GPU kernels (cuBLASLt's and the project's): "
                "needs the cuda backend"},
        BadCase{"gemm_skinny_host",
                {"--gemm-algo", "skinny"},
                1,
                "--gemm-algo skinny chooses among GPU kernels (cuBLASLt's and the project's): "
                "needs the cuda backend"},
        BadCase{"host_dtype", {"--dtype", "bf16"}, 1, "the host backend computes in fp32"},
        BadCase{"graphs_host", {"--graphs"}, 1, "--graphs needs the cuda backend"},
        BadCase{"ce_ring_graphs",
                {"--graphs", "--tp", "2", "--overlap", "none,ce-ring"},
                2,
                "--overlap ce-ring numbers its puts on the host"},
        BadCase{"ce_ring_sub_graphs",
                {"--graphs", "--tp", "2", "--overlap", "ce-ring:2"},
                2,
                "--overlap ce-ring:2 numbers its puts on the host"},
        BadCase{"ce_ring_sub_sp",
                {"--tp", "2", "--sequence-parallel", "--phase", "decode", "--batch", "2",
                 "--overlap", "none,ce-ring:2"},
                2,
                "ce-ring:2: the 2 tokens per microbatch do not divide into 4 sub-pieces"},
        BadCase{"ce_ring_pieces",
                {"--tp", "2", "--phase", "decode", "--batch", "3", "--overlap", "ce-ring"},
                2,
                "ce-ring: the 3 tokens per microbatch do not divide into 2 pieces"},
        BadCase{"cudnn_host",
                {"--attention", "fused,cudnn"},
                1,
                "--attention cudnn needs the cuda backend"},
        BadCase{"nccl_ctas_host", {"--nccl-max-ctas", "8"}, 1, "need the cuda backend (NCCL)"},
        BadCase{"nccl_cta_policy_host",
                {"--nccl-cta-policy", "zero"},
                1,
                "--nccl-cta-policy needs the cuda backend (NCCL)"},
        BadCase{"ce_ring_train_pieces",
                {"--tp", "2", "--phase", "train", "--overlap", "none,ce-ring:2", "--seq", "3",
                 "--batch", "2", "--microbatches", "2"},
                2,
                "--overlap ce-ring:2: the 3 tokens per microbatch do not divide into 4 sub-pieces"},
        BadCase{"gemm_sms_host",
                {"--overlap-gemm-sms", "100"},
                1,
                "--overlap-gemm-sms needs the cuda backend"},
        BadCase{
            "phase", {"--phase", "pretrain"}, 1, "--phase must be one of prefill, decode, train"},
        BadCase{"train_sequence_parallel_rows",
                {"--phase", "train", "--tp", "2", "--sequence-parallel", "--seq", "3", "--batch",
                 "2", "--microbatches", "2"},
                2,
                "--sequence-parallel: the 3 tokens per microbatch do not divide into --tp 2"},
        BadCase{"train_split_tokens",
                {"--phase", "train", "--tp", "2", "--overlap", "split:2", "--batch", "2",
                 "--microbatches", "2"},
                2,
                "split:2 splits the batch: 1 sequences per microbatch do not divide into 2 parts "
                "(the train stage, which runs the train phase and scheduled prefill, splits whole "
                "sequences only"},
        BadCase{"train_chunked_rows",
                {"--phase", "train", "--tp", "2", "--sequence-parallel", "--overlap", "chunked:4",
                 "--seq", "6", "--batch", "2", "--microbatches", "2"},
                2,
                "chunked:4 with sequence parallelism: the 6 tokens per microbatch do not divide "
                "into 8 equal row blocks"},
        BadCase{"zb_recompute",
                {"--phase", "train", "--schedule", "zb-h1", "--recompute", "full"},
                1,
                "--schedule zb-h1 defers weight gradients"},
        BadCase{"scheduled_prefill_graphs",
                {"--schedule", "gpipe", "--graphs", "--backend", "cuda", "--dtype", "bf16"},
                1,
                "--graphs captures forward stages: not a scheduled prefill (--schedule)"},
        BadCase{"scheduled_prefill_sequence_parallel_rows",
                {"--schedule", "gpipe", "--tp", "2", "--sequence-parallel", "--seq", "5", "--batch",
                 "1"},
                2,
                "--sequence-parallel: the 5 tokens per microbatch do not divide into --tp 2"},
        BadCase{"recompute_prefill", {"--recompute", "full"}, 1, "--recompute needs --phase train"},
        BadCase{"bad_schedule", {"--phase", "train", "--schedule", "2f2b"}, 1, "--schedule: "},
        BadCase{"decode_schedule",
                {"--phase", "decode", "--schedule", "gpipe"},
                1,
                "--schedule pipelines prefill or train, not decode"},
        BadCase{"out_dir",
                {"--out", "/nonexistent-dir/x.h5"},
                1,
                "directory '/nonexistent-dir' does not exist"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

// --decode-steps N: the timed iterations default to N, the cache and the work model follow it.
TEST(RunConfig, DecodeStepsSetTheIterationsAndTheCache) {
  RunConfig c = host_defaults({"--phase", "decode", "--context", "100", "--decode-steps", "8"});
  EXPECT_EQ(c.iters, 8);
  EXPECT_TRUE(validate(c, 1).empty()) << joined(validate(c, 1));
  const LayerShape s = layer_shape(c);
  EXPECT_EQ(s.decode_steps, 8);
  EXPECT_EQ(s.cache_rows(), 108);
  EXPECT_DOUBLE_EQ(s.mean_kv_len(), 100 + 4.5); // keys 101 .. 108
  RunConfig one = host_defaults({"--phase", "decode", "--context", "100"});
  EXPECT_EQ(one.iters, 10);
  EXPECT_EQ(layer_shape(one).cache_rows(), 101);
  // The memory check counts the grown cache: 7 more rows per sequence, K and V, every layer.
  const ModelSpec m = model_spec(c);
  const double row = 2.0 * static_cast<double>(c.batch) * static_cast<double>(m.hidden) * 4.0;
  EXPECT_DOUBLE_EQ(stage_memory_bytes(m, s, c.layers) -
                       stage_memory_bytes(m, layer_shape(one), c.layers),
                   7.0 * row * static_cast<double>(c.layers));
  RunConfig explicit_iters =
      host_defaults({"--phase", "decode", "--decode-steps", "8", "--iters", "24"});
  EXPECT_EQ(explicit_iters.iters, 24);
  EXPECT_TRUE(validate(explicit_iters, 1).empty());
}

TEST(RunConfig, MemoryCheckCountsTheOverlapBuffers) {
  // tiny on the host (fp32): 128 tokens of hidden 256, so a full buffer is 128 KiB and, under
  // sequence parallelism at tp 2, a rank's stream 64 KiB.
  const std::string tiny = kModels + "/tiny.toml";
  auto bytes = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--config", tiny});
    return overlap_memory_bytes(point_spec(host_defaults(args)));
  };
  const double full = 128.0 * 1024, stream = 64.0 * 1024;
  EXPECT_EQ(bytes({"--tp", "2", "--overlap", "none,chunked:2"}), 0.0);
  EXPECT_EQ(bytes({"--overlap", "ce-ring,symm:chunked:2"}), 0.0); // tp 1: no collective
  // ce-ring: five windows of a full buffer, two of which hold proj_full and fc2_full (and,
  // under sequence parallelism, a third the gathered norm output).
  EXPECT_EQ(bytes({"--tp", "2", "--overlap", "none,ce-ring"}), 3 * full);
  EXPECT_EQ(bytes({"--tp", "2", "--sequence-parallel", "--overlap", "ce-ring"}), 2 * full);
  // symm: every collective buffer a second time, in the symmetric block.
  EXPECT_EQ(bytes({"--tp", "2", "--overlap", "symm:none"}), 3 * full);
  EXPECT_EQ(bytes({"--tp", "2", "--sequence-parallel", "--overlap", "symm:async"}),
            3 * full + 3 * stream);
  EXPECT_EQ(bytes({"--tp", "2", "--sequence-parallel", "--overlap", "ce-ring,symm:chunked:2"}),
            2 * full + 3 * full + 3 * stream);
}

TEST(RunConfig, MemoryCheckOfAScheduledPointCountsItsSymmetricBlock) {
  const std::string tiny = kModels + "/tiny.toml";
  auto bytes = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--config", tiny, "--phase", "train", "--microbatches", "1"});
    return scheduled_overlap_bytes(point_spec(host_defaults(args)));
  };
  // tiny: 128 tokens of hidden 256 in fp32; the train stage's shared collective buffers
  // (TrainStage::collective_buffers) once more in the symmetric block.
  const double full = 128.0 * 1024, stream = 64.0 * 1024;
  EXPECT_EQ(bytes({"--tp", "2", "--overlap", "none,chunked:2"}), 0.0);
  EXPECT_EQ(bytes({"--overlap", "symm:none"}), 0.0); // tp 1: no collective
  EXPECT_EQ(bytes({"--tp", "2", "--overlap", "symm:none"}), 3 * full);
  EXPECT_EQ(bytes({"--tp", "2", "--sequence-parallel", "--overlap", "async,symm:chunked:2"}),
            5 * full + 2 * stream);
  // ce-ring: two windows of a full buffer (the partial pieces and the gathered rows).
  EXPECT_EQ(bytes({"--overlap", "ce-ring"}), 0.0);
  EXPECT_EQ(bytes({"--tp", "2", "--overlap", "ce-ring:2"}), 2 * full);
  EXPECT_EQ(bytes({"--tp", "2", "--overlap", "ce-ring,symm:none"}), 2 * full + 3 * full);
}

TEST(RunConfig, EveryProblemIsReportedAtOnce) {
  const std::vector<std::string> problems =
      validate(host_defaults({"--tp", "3", "--hidden", "1000", "--heads", "16", "--rotary", "maybe",
                              "--graphs"}),
               2);
  EXPECT_EQ(mentions(problems, "tp * pp * dp = 3 but 2 ranks"), 1) << joined(problems);
  EXPECT_EQ(mentions(problems, "--hidden 1000 is not divisible by --heads 16"), 1)
      << joined(problems);
  EXPECT_EQ(mentions(problems, "--heads 16 is not divisible by --tp 3"), 1) << joined(problems);
  EXPECT_EQ(mentions(problems, "--rotary must be one of on, off"), 1) << joined(problems);
  EXPECT_EQ(mentions(problems, "--graphs needs the cuda backend"), 1) << joined(problems);
}

TEST(RunConfig, GoodShapesPass) {
  const std::vector<std::vector<std::string>> good = {
      {"--tp", "2"},
      {"--tp", "2", "--sequence-parallel", "--overlap", "none,async,chunked:2"},
      {"--heads", "16", "--kv-heads", "2", "--tp", "4"}, // KV heads replicated across ranks
      {"--phase", "decode", "--context", "100", "--overlap", "split:2"},
      {"--pp", "2", "--microbatches", "2", "--batch", "2"},
      {"--attention", "fused,naive", "--overlap", "none,async"},
      // The train stage runs every strategy, forward and backward.
      {"--phase", "train", "--tp", "2", "--sequence-parallel", "--batch", "4", "--microbatches",
       "2", "--overlap",
       "none,async,chunked:2,split:2,ce-ring,ce-ring:2,symm:none,symm:async,symm:chunked:2"},
      {"--schedule", "1f1b", "--pp", "2", "--batch", "4", "--microbatches", "2", "--overlap",
       "split:2,symm:chunked:2"}};
  const int ranks[] = {2, 2, 4, 1, 2, 1, 2, 2};
  for (size_t i = 0; i < good.size(); ++i) {
    const std::vector<std::string> problems = validate(host_defaults(good[i]), ranks[i]);
    EXPECT_TRUE(problems.empty()) << "case " << i << joined(problems);
  }
}

} // namespace
} // namespace ridgeline
