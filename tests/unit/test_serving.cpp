// Serving traces and the continuous-batching scheduler on hand-checked cases: the batches of a
// small trace step by step, the percentiles' arithmetic (numpy's linear method), the trace
// formats' round trip, every refused trace with its message, the generator's bits, and a mixed
// step's work against the work model's own prefill and decode layers.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "models/serving.hpp"

namespace ridgeline {
namespace {

std::vector<Request> small_trace() {
  return {{0, 0.0, 6, 3}, {1, 0.5, 3, 1}, {2, 1.0, 2, 2}, {3, 5.0, 10, 2}};
}

// Every step lasts 1 s whatever it runs.
double one_second(const StepMix&) {
  return 1e9;
}

// One step's entries as text: "request:kind tokens@context ...".
std::string entries(const ScheduledStep& s) {
  std::string text;
  for (const StepEntry& e : s.mix.entries)
    text += (text.empty() ? "" : " ") + std::to_string(e.request) + ":" + entry_kind_name(e.kind) +
            " " + std::to_string(e.tokens) + "@" + std::to_string(e.context);
  return text;
}

SchedulerConfig small_config(int64_t kv_capacity) {
  SchedulerConfig c;
  c.token_budget = 8;
  c.chunk = 4;
  c.max_batch = 3;
  c.kv_capacity_tokens = kv_capacity;
  return c;
}

TEST(Scheduler, BatchesOfASmallTrace) {
  const ServingSchedule s = schedule_requests(small_trace(), small_config(20), one_second);
  // t=0: 0 starts, a chunk of 4. t=1: 0's last 2 prompt tokens, 1's 3 and 2's 2 (the budget's 8
  // less 7 leaves 1, and the batch is full). t=2: 0 and 2 decode (1 finished with its only
  // token); t=3: 0's last token. Nothing runs until 3 arrives at 5: chunks 4, 4, 2, a decode.
  const std::vector<std::string> expected = {"0:prefill 4@0",
                                             "0:prefill 2@4 1:prefill 3@0 2:prefill 2@0",
                                             "0:decode 1@6 2:decode 1@2",
                                             "0:decode 1@7",
                                             "3:prefill 4@0",
                                             "3:prefill 4@4",
                                             "3:prefill 2@8",
                                             "3:decode 1@10"};
  ASSERT_EQ(s.steps.size(), expected.size());
  const double starts[] = {0, 1, 2, 3, 5, 6, 7, 8};
  for (size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(entries(s.steps[k]), expected[k]) << "step " << k;
    EXPECT_EQ(s.steps[k].start_s, starts[k]) << "step " << k;
    EXPECT_EQ(s.steps[k].end_s, starts[k] + 1) << "step " << k;
  }
  EXPECT_EQ(s.steps[1].mix.prefill_tokens, 7);
  EXPECT_EQ(s.steps[1].mix.prefill_sequences, 3);
  EXPECT_EQ(s.steps[2].mix.decode_tokens, 2);
  // First token and finish of each request.
  const double first[] = {2, 2, 2, 8}, finish[] = {4, 2, 3, 9};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(s.requests[k].first_token_s, first[k]) << "request " << k;
    EXPECT_EQ(s.requests[k].finish_s, finish[k]) << "request " << k;
  }
}

TEST(Scheduler, BatchesOfASeededTrace) {
  // Arrivals 0, 0.036625, 0.250289, 0.373974 s; prompts 175, 190, 101, 183; outputs 16, 32, 16,
  // 8 (Generator.SameBitsOnEveryPlatform). Steps of 1 s: all but the first arrived by t=1.
  const std::vector<Request> r = generate_trace(
      parse_trace_generator("rate=4,requests=4,prompt=100:200,output=8/16/32,seed=42"));
  SchedulerConfig c;
  c.token_budget = 256, c.chunk = 128, c.max_batch = 4, c.kv_capacity_tokens = 4096;
  const ServingSchedule s = schedule_requests(r, c, one_second);
  const std::vector<std::string> expected = {
      "0:prefill 128@0",
      // 47 + 128 tokens, and 81 of request 2's 101 fill the budget of 256.
      "0:prefill 47@128 1:prefill 128@0 2:prefill 81@0",
      "0:decode 1@175 1:prefill 62@128 2:prefill 20@81 3:prefill 128@0",
      "0:decode 1@176 1:decode 1@190 2:decode 1@101 3:prefill 55@128",
      "0:decode 1@177 1:decode 1@191 2:decode 1@102 3:decode 1@183"};
  ASSERT_EQ(s.steps.size(), 34u);
  for (size_t k = 0; k < expected.size(); ++k)
    EXPECT_EQ(entries(s.steps[k]), expected[k]) << "step " << k;
  // First tokens at the end of the step finishing each prompt, then a token a step.
  const double first[] = {2, 3, 3, 4}, finish[] = {17, 34, 18, 11};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(s.requests[k].first_token_s, first[k]) << "request " << k;
    EXPECT_EQ(s.requests[k].finish_s, finish[k]) << "request " << k;
  }
}

TEST(Scheduler, EveryStepFitsTheCapacityMix) {
  // A trace run's stage is built at serving_capacity_mix(): n - 1 decode tokens at the longest
  // context and one chunk of the budget left. Every step of a trace within `longest` fits it.
  SchedulerConfig c;
  c.token_budget = 96, c.chunk = 40, c.max_batch = 5, c.kv_capacity_tokens = 1000;
  const StepMix cap = serving_capacity_mix(c, 230);
  EXPECT_EQ(entries({0, 0, cap}), "0:decode 1@229 1:decode 1@229 2:decode 1@229 3:decode 1@229 "
                                  "4:prefill 92@0");
  EXPECT_EQ(cap.tokens(), 96);
  EXPECT_EQ(mix_cache_rows(cap), 230);
  const std::vector<Request> r =
      generate_trace(parse_trace_generator("rate=50,requests=40,prompt=1:200,output=1:30,seed=9"));
  const ServingSchedule s = schedule_requests(r, c, one_second);
  for (const ScheduledStep& step : s.steps) {
    EXPECT_LE(step.mix.tokens(), cap.tokens());
    EXPECT_LE(step.mix.entries.size(), cap.entries.size());
    EXPECT_LE(mix_cache_rows(step.mix), mix_cache_rows(cap));
  }
  // A budget below the batch: as many sequences as tokens, the chunk a token.
  c.token_budget = 3;
  EXPECT_EQ(entries({0, 0, serving_capacity_mix(c, 10)}),
            "0:decode 1@9 1:decode 1@9 2:prefill 1@0");
}

TEST(Scheduler, AQueuedRequestWaitsForRoomInTheCache) {
  // 16 tokens: 0 holds 9 and 1 holds 4, so 2 (4 more) waits until 1 finishes at t=2.
  const ServingSchedule s = schedule_requests(small_trace(), small_config(16), one_second);
  ASSERT_GE(s.steps.size(), 4u);
  EXPECT_EQ(entries(s.steps[1]), "0:prefill 2@4 1:prefill 3@0");
  EXPECT_EQ(entries(s.steps[2]), "0:decode 1@6 2:prefill 2@0");
  EXPECT_EQ(entries(s.steps[3]), "0:decode 1@7 2:decode 1@2");
  EXPECT_EQ(s.requests[2].first_token_s, 3);
  EXPECT_EQ(s.requests[2].finish_s, 4);
}

TEST(Scheduler, DecodeComesFirstAndTheBatchIsCapped) {
  // Two sequences decoding take the whole batch of 2: the third request waits for a seat.
  SchedulerConfig c = small_config(100);
  c.max_batch = 2;
  const std::vector<Request> r = {{0, 0, 1, 3}, {1, 0, 1, 3}, {2, 0, 1, 1}};
  const ServingSchedule s = schedule_requests(r, c, one_second);
  ASSERT_GE(s.steps.size(), 4u);
  EXPECT_EQ(entries(s.steps[0]), "0:prefill 1@0 1:prefill 1@0");
  EXPECT_EQ(entries(s.steps[1]), "0:decode 1@1 1:decode 1@1");
  EXPECT_EQ(entries(s.steps[2]), "0:decode 1@2 1:decode 1@2");
  EXPECT_EQ(entries(s.steps[3]), "2:prefill 1@0");
}

TEST(Percentiles, NumpyLinearOnHandData) {
  // numpy.percentile([1, 2, 3, 4], [50, 95, 99]) = 2.5, 3.85, 3.97.
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 95), 3.85);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  // numpy.percentile([15, 20, 35, 40, 50], 40) = 29: rank 1.6, 20 + 0.6 x 15.
  EXPECT_DOUBLE_EQ(percentile({15, 20, 35, 40, 50}, 40), 29);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_EQ(percentiles({}).count, 0);
}

TEST(Percentiles, LatenciesAndGoodputOfTheSmallTrace) {
  const ServingSchedule s = schedule_requests(small_trace(), small_config(20), one_second);
  const ServingMetrics m = serving_metrics(s, 2.0, 1.0);
  // TTFT 2, 1.5, 1, 3; E2E 4, 1.5, 2, 4; TPOT 1, 1, 1 (request 1 has one output token).
  EXPECT_DOUBLE_EQ(m.ttft_s.p50, 1.75);
  EXPECT_DOUBLE_EQ(m.ttft_s.p95, 2.85);
  EXPECT_DOUBLE_EQ(m.ttft_s.p99, 2.97);
  EXPECT_EQ(m.tpot_s.count, 3);
  EXPECT_DOUBLE_EQ(m.tpot_s.p99, 1.0);
  EXPECT_DOUBLE_EQ(m.e2e_s.p50, 3.0);
  // Request 3's TTFT of 3 s misses the 2 s target: 3 good over the 9 s from 0 to the last finish.
  EXPECT_EQ(m.good, 3);
  EXPECT_DOUBLE_EQ(m.span_s, 9);
  EXPECT_DOUBLE_EQ(m.goodput_per_s, 3.0 / 9.0);
  EXPECT_EQ(serving_metrics(s, 0, 0).good, 4);
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "ridgeline_serving_" + name;
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

TEST(Trace, CsvAndJsonlRoundTrip) {
  std::vector<Request> r = small_trace();
  r[1].arrival_s = 0.1;
  r[2].arrival_s = 1.0 / 3.0;
  for (const char* name : {"trip.csv", "trip.jsonl"}) {
    const std::string path = temp_path(name);
    write_trace(path, r, trace_format_of(path));
    const std::vector<Request> back = read_trace(path, 1000);
    ASSERT_EQ(back.size(), r.size()) << name;
    for (size_t k = 0; k < r.size(); ++k) {
      EXPECT_EQ(back[k].id, static_cast<int64_t>(k));
      EXPECT_EQ(back[k].arrival_s, r[k].arrival_s) << name;
      EXPECT_EQ(back[k].prompt_tokens, r[k].prompt_tokens) << name;
      EXPECT_EQ(back[k].output_tokens, r[k].output_tokens) << name;
    }
    std::remove(path.c_str());
  }
  EXPECT_EQ(trace_format_of("a.jsonl"), TraceFormat::jsonl);
  EXPECT_EQ(trace_format_of("a.csv"), TraceFormat::csv);
}

TEST(Trace, ReadsCommentsAndKeysInAnyOrder) {
  const std::string csv = write("comments.csv", "# two requests\n\narrival_s,prompt_tokens,"
                                                "output_tokens\n0,5,2\n# a gap\n1.5,7,1\n");
  EXPECT_EQ(read_trace(csv, 100).size(), 2u);
  const std::string jsonl = write("keys.jsonl", "{\"output_tokens\": 2, \"arrival_s\": 0.25, "
                                                "\"prompt_tokens\": 9}\n\n");
  const std::vector<Request> r = read_trace(jsonl, 100);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].arrival_s, 0.25);
  EXPECT_EQ(r[0].prompt_tokens, 9);
  EXPECT_EQ(r[0].output_tokens, 2);
}

// The message read_trace refuses `text` (in a file named `name`) with.
std::string refusal(const std::string& name, const std::string& text) {
  const std::string path = write(name, text);
  try {
    read_trace(path, 100);
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(path + ":", 0), 0u) << message;
    return message.substr(path.size());
  }
  return "accepted";
}

TEST(Trace, BadTracesAreRefusedWithOneMessage) {
  const std::string head = "arrival_s,prompt_tokens,output_tokens\n";
  EXPECT_EQ(refusal("unsorted.csv", head + "1,5,2\n0.5,5,2\n"),
            ":3: arrival_s 0.5 is before the previous request's 1 (arrival times must be sorted)");
  EXPECT_EQ(refusal("negative.csv", head + "0,-5,2\n"), ":2: prompt_tokens -5 is not at least 1");
  EXPECT_EQ(refusal("zero.csv", head + "0,5,0\n"), ":2: output_tokens 0 is not at least 1");
  EXPECT_EQ(refusal("word.csv", head + "soon,5,2\n"), ":2: arrival_s 'soon' is not a number");
  EXPECT_EQ(refusal("fraction.csv", head + "0,5.5,2\n"),
            ":2: prompt_tokens '5.5' is not a whole number");
  EXPECT_EQ(refusal("long.csv", head + "0,90,11\n"),
            ":2: prompt_tokens 90 + output_tokens 11 exceed the KV cache capacity of 100 tokens");
  EXPECT_EQ(refusal("header.csv", "arrival,prompt,output\n0,5,2\n"),
            ":1: expected the header 'arrival_s,prompt_tokens,output_tokens', got "
            "'arrival,prompt,output'");
  EXPECT_EQ(refusal("fields.csv", head + "0,5\n"),
            ":2: 2 field(s), expected 3 (arrival_s,prompt_tokens,output_tokens)");
  EXPECT_EQ(refusal("empty.csv", head), ": holds no request");
  EXPECT_EQ(refusal("unsorted.jsonl", "{\"arrival_s\": 2, \"prompt_tokens\": 5, "
                                      "\"output_tokens\": 2}\n{\"arrival_s\": 1, "
                                      "\"prompt_tokens\": 5, \"output_tokens\": 2}\n"),
            ":2: arrival_s 1 is before the previous request's 2 (arrival times must be sorted)");
  EXPECT_EQ(refusal("missing.jsonl", "{\"arrival_s\": 0, \"prompt_tokens\": 5}\n"),
            ":1: missing key 'output_tokens'");
  EXPECT_EQ(refusal("unknown.jsonl", "{\"arrival\": 0}\n"),
            ":1: unknown key 'arrival' (expected arrival_s, prompt_tokens, output_tokens)");
  EXPECT_EQ(refusal("string.jsonl",
                    "{\"arrival_s\": \"0\", \"prompt_tokens\": 5, \"output_tokens\": 2}\n"),
            ":1: arrival_s '\"0\"' is not a number");
  EXPECT_THROW(check_trace({{0, 0, 99, 2}}, 100, "--trace-gen"), UsageError);
}

TEST(Generator, SameBitsOnEveryPlatform) {
  // The standard fixes mt19937_64's 10000th output from its default seed.
  std::mt19937_64 rng;
  rng.discard(9999);
  EXPECT_EQ(rng(), 9981545732273789042ull);
  // Expected values from an independent mt19937_64 written from the standard's definition.
  const TraceGenerator g = parse_trace_generator("rate=4,requests=4,prompt=100:200,"
                                                 "output=8/16/32,seed=42");
  const std::vector<Request> r = generate_trace(g);
  ASSERT_EQ(r.size(), 4u);
  const double arrival_s[] = {0, 0.036625, 0.250289, 0.373974};
  const int64_t prompt[] = {175, 190, 101, 183}, output[] = {16, 32, 16, 8};
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(r[k].arrival_s, arrival_s[k]) << k;
    EXPECT_EQ(r[k].prompt_tokens, prompt[k]) << k;
    EXPECT_EQ(r[k].output_tokens, output[k]) << k;
  }
  EXPECT_EQ(generate_trace(parse_trace_generator("seed=1,rate=2,requests=3,prompt=64,"
                                                 "output=4"))[2]
                .prompt_tokens,
            64);
}

TEST(Generator, BadSpecificationsAreRefused) {
  EXPECT_THROW(parse_trace_generator("rate=4,requests=4,prompt=100,output=8"), UsageError);
  EXPECT_THROW(parse_trace_generator("rate=0,requests=4,prompt=100,output=8,seed=1"), UsageError);
  EXPECT_THROW(parse_trace_generator("rate=1,requests=4,prompt=200:100,output=8,seed=1"),
               UsageError);
  EXPECT_THROW(parse_trace_generator("rate=1,requests=4,prompt=1,output=8,seed=1,x=2"), UsageError);
  EXPECT_THROW(parse_length_distribution("0", "prompt"), UsageError);
  EXPECT_THROW(parse_trace_generator("rate=1,requests=100001,prompt=1,output=1,seed=1"),
               UsageError);
  EXPECT_THROW(check_trace({{0, 0, 1, kMaxTraceOutputTokens + 1}}, int64_t{1} << 40, "t"),
               UsageError);
}

ModelSpec small_model() {
  ModelSpec m;
  m.hidden = 256, m.heads = 8, m.kv_heads = 4, m.ffn_hidden = 512, m.layers = 2;
  m.mlp = MlpKind::swiglu, m.norm = NormKind::rmsnorm, m.rotary = true;
  return m;
}

TEST(MixedStep, APrefillAloneIsTheWorkModelsPrefill) {
  StepMix mix;
  mix.entries = {{0, EntryKind::prefill, 64, 0}};
  mix.prefill_tokens = 64, mix.prefill_sequences = 1;
  const std::vector<OpSpec> ops =
      mixed_step_ops(small_model(), mix, 2, DType::bf16, AttentionImpl::fused, false);
  LayerShape s;
  s.seq = 64, s.tp = 2, s.dtype = DType::bf16;
  const std::vector<OpSpec> layer = layer_ops(small_model(), s, AttentionImpl::fused);
  ASSERT_EQ(ops.size(), layer.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    EXPECT_DOUBLE_EQ(ops[k].cost.flops, layer[k].cost.flops) << layer[k].name;
    EXPECT_DOUBLE_EQ(ops[k].cost.hbm_bytes, layer[k].cost.hbm_bytes) << layer[k].name;
    EXPECT_DOUBLE_EQ(ops[k].cost.comm_bytes, layer[k].cost.comm_bytes) << layer[k].name;
  }
  EXPECT_EQ(ops[3].name, op::attention_prefill);
  EXPECT_EQ(ops[3].kind, OpKind::attention);
}

TEST(MixedStep, DecodeTokensAndAChunkAfterCachedTokens) {
  StepMix mix;
  mix.entries = {{0, EntryKind::decode, 1, 100},
                 {1, EntryKind::decode, 1, 300},
                 {2, EntryKind::prefill, 16, 32}};
  mix.decode_tokens = 2, mix.decode_sequences = 2, mix.prefill_tokens = 16,
  mix.prefill_sequences = 1;
  const ModelSpec m = small_model();
  const std::vector<OpSpec> ops =
      mixed_step_ops(m, mix, 1, DType::bf16, AttentionImpl::fused, false);
  // Decode: 2 tokens seeing 101 and 301 keys; 8 heads of 32: 4 x hl x d FLOPs a key.
  EXPECT_DOUBLE_EQ(find_op(ops, op::attention_decode).cost.flops, 4.0 * 8 * 32 * (101 + 301));
  // The chunk: 16 queries after 32 cached tokens see 33..48 keys.
  EXPECT_DOUBLE_EQ(find_op(ops, op::attention_prefill).cost.flops,
                   4.0 * 8 * 32 * (16 * 32 + 16 * 17 / 2));
  // Its bytes: q and out of 16 rows, k and v of 16 new rows and 32 cached (4 KV heads of 32).
  EXPECT_DOUBLE_EQ(find_op(ops, op::attention_prefill).cost.hbm_bytes,
                   (2.0 * 16 * 256 + 2.0 * (16 + 32) * 4 * 32) * 2);
  // The GEMMs see every token of the step.
  EXPECT_EQ(find_op(ops, op::qkv).m, 18);
  EXPECT_DOUBLE_EQ(find_op(ops, op::kv_append).cost.hbm_bytes, 4.0 * 2 * 4 * 32 * 2);
}

// The ragged contexts of a mixed step: one raw draw of std::mt19937_64 each (whose outputs the
// standard fixes), lo + draw mod (hi - lo + 1); the same seed, the same contexts.
TEST(MixedStep, RaggedContextsAreSeededDraws) {
  const std::vector<int64_t> got = ragged_contexts("uniform:10:1000", 5, 7);
  std::mt19937_64 rng(7);
  std::vector<int64_t> want;
  for (int i = 0; i < 5; ++i)
    want.push_back(10 + static_cast<int64_t>(rng() % 991));
  EXPECT_EQ(got, want);
  EXPECT_EQ(ragged_contexts("uniform:10:1000", 5, 7), got);
  EXPECT_NE(ragged_contexts("uniform:10:1000", 5, 8), got);
  // The first draw of seed 7, fixed: a platform that differs fails here.
  EXPECT_EQ(ragged_contexts("uniform:1:1000000", 1, 7)[0],
            1 + static_cast<int64_t>(std::mt19937_64(7)() % 1000000));
  EXPECT_EQ(ragged_contexts("uniform:4:4", 3, 1), (std::vector<int64_t>{4, 4, 4}));
  EXPECT_TRUE(ragged_contexts("uniform:1:9", 0, 1).empty());
}

TEST(MixedStep, RaggedContextsRefuseBadDistributions) {
  auto message = [](const std::string& dist) {
    try {
      ragged_contexts(dist, 2, 1);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("normal:1:9"),
            "--context-dist: unknown distribution 'normal:1:9' (uniform:LO:HI)");
  EXPECT_NE(message("uniform:0:9").find("not a whole number of tokens >= 1"), std::string::npos);
  EXPECT_NE(message("uniform:9:1").find("--context-dist"), std::string::npos);
  EXPECT_NE(message("uniform:5").find("not uniform:LO:HI"), std::string::npos);
  EXPECT_NE(message("uniform:a:9").find("--context-dist"), std::string::npos);
}

// A run's mixed step: decode entries first, then the chunks, and what it holds.
TEST(MixedStep, MixBookkeeping) {
  const StepMix mix = mixed_step_mix({30, 10, 20}, {16, 16}, 8);
  ASSERT_EQ(mix.entries.size(), 5u);
  EXPECT_EQ(mix.entries[0].kind, EntryKind::decode);
  EXPECT_EQ(mix.entries[2].context, 20);
  EXPECT_EQ(mix.entries[3].kind, EntryKind::prefill);
  EXPECT_EQ(mix.entries[4].tokens, 16);
  EXPECT_EQ(mix.entries[4].context, 8);
  EXPECT_EQ(mix.entries[4].request, 4);
  EXPECT_EQ(mix.tokens(), 35);
  const MixSummary s = mix_summary(mix);
  EXPECT_EQ(s.prefill_tokens, 32);
  EXPECT_EQ(s.decode_tokens, 3);
  EXPECT_EQ(s.prefill_sequences, 2);
  EXPECT_EQ(s.decode_sequences, 3);
  EXPECT_EQ(s.context_min, 10);
  EXPECT_EQ(s.context_max, 30);
  EXPECT_DOUBLE_EQ(s.context_mean, 20.0);
  // Each sequence's cache block: the largest context + tokens (a chunk of 16 after 8; a decode
  // token after 30).
  EXPECT_EQ(mix_cache_rows(mix), 31);
  EXPECT_EQ(mix_cache_rows(mixed_step_mix({}, {64}, 100)), 164);
  const MixSummary chunks_only = mix_summary(mixed_step_mix({}, {64}, 100));
  EXPECT_EQ(chunks_only.decode_sequences, 0);
  EXPECT_EQ(chunks_only.context_max, 0);
  EXPECT_DOUBLE_EQ(chunks_only.context_mean, 0.0);
}

} // namespace
} // namespace ridgeline
