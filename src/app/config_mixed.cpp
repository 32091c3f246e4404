// The options of a mixed step (see config_mixed.hpp).
#include "app/config_mixed.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "app/command_support.hpp"
#include "core/error.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {
namespace {

bool mixed(const RunConfig& c) {
  return c.phase == "mixed";
}

// The scheduler of a trace run, from its completed options.
SchedulerConfig scheduler_of(const RunConfig& c) {
  SchedulerConfig s;
  s.token_budget = c.token_budget;
  s.chunk = c.chunk;
  s.max_batch = c.max_batch;
  s.kv_capacity_tokens = c.kv_capacity;
  return s;
}

constexpr int64_t kShareUnits = 1000000; // a share is taken to 1e-6

int64_t share_units(double share) {
  return std::llround(share * static_cast<double>(kShareUnits));
}

// Tokens the options give the step (prefill chunks and decode tokens), 0 for none.
int64_t option_tokens(const RunConfig& c) {
  return std::max<int64_t>(c.prefill_seqs, 0) * std::max<int64_t>(c.chunk, 0) +
         std::max<int64_t>(c.decode_batch, 0);
}

std::vector<int64_t> listed_contexts(const std::string& list) {
  std::vector<int64_t> out;
  for (const std::string& item : split_list(list)) {
    int64_t v = 0;
    const char* end = item.data() + item.size();
    const auto r = std::from_chars(item.data(), end, v);
    if (item.empty() || r.ec != std::errc() || r.ptr != end)
      throw UsageError("--contexts: '" + item + "' is not a whole number");
    if (v < 1)
      throw UsageError("--contexts: " + item +
                       " is below 1 (a decode token's "
                       "sequence holds at least one cached token)");
    out.push_back(v);
  }
  return out;
}

// The contexts of `count` decode sequences: --contexts in turn (from the first again where
// the step holds more than it lists), else --context-dist's first `count` draws, else --context
// each. Throws UsageError on a bad list or distribution.
std::vector<int64_t> decode_contexts(const RunConfig& c, int64_t count) {
  count = std::max<int64_t>(count, 0);
  if (!c.contexts.empty()) {
    const std::vector<int64_t> listed = listed_contexts(c.contexts);
    std::vector<int64_t> out;
    for (int64_t i = 0; i < count; ++i)
      out.push_back(listed[static_cast<size_t>(i) % listed.size()]);
    return out;
  }
  if (!c.context_dist.empty()) return ragged_contexts(c.context_dist, count, c.context_seed);
  return std::vector<int64_t>(static_cast<size_t>(count), c.context);
}

// The step of a mixed configuration, at its --prefill-share where given. Throws UsageError on a
// bad context list or distribution.
StepMix step_mix(const RunConfig& c) {
  if (trace_run(c)) return serving_capacity_mix(scheduler_of(c), c.seq);
  if (c.prefill_share < 0)
    return mixed_step_mix(
        decode_contexts(c, c.decode_batch),
        std::vector<int64_t>(static_cast<size_t>(std::max<int64_t>(c.prefill_seqs, 0)), c.chunk),
        c.chunk_context);
  const ShareMix share = prefill_share_mix(option_tokens(c), c.prefill_seqs, c.prefill_share);
  return mixed_step_mix(decode_contexts(c, share.decode_tokens), share.chunks, c.chunk_context);
}

} // namespace

void bind_mixed_options(CLI::App& cmd, RunConfig& c) {
  const char* const group = "Mixed step (--phase mixed)";
  struct Count {
    const char* name;
    int64_t* field;
    int64_t min;
    const char* help;
  };
  const Count counts[] = {
      {"--prefill-seqs", &c.prefill_seqs, 0,
       "Mixed: sequences prefilled by a chunk each in the step (default 1; 0: decode tokens "
       "only)"},
      {"--chunk", &c.chunk, 1,
       "Mixed: prefill tokens of each chunk (default 128 on host, 512 on GPUs)"},
      {"--chunk-context", &c.chunk_context, 0,
       "Mixed: tokens of each prefilled sequence already in its KV cache before the chunk "
       "(default 0: the prompt's first chunk)"},
      {"--decode-batch", &c.decode_batch, 0,
       "Mixed: decode tokens (sequences generating one token each) in the step (default 4 on "
       "host, 64 on GPUs; with --contexts: its length)"}};
  for (const Count& n : counts)
    cmd.add_option(n.name, *n.field, n.help)->check(integer_in(n.min))->group(group);
  cmd.add_option("--contexts", c.contexts,
                 "Mixed: each decode sequence's cached tokens, a comma list (one per sequence); "
                 "default: --context for each")
      ->group(group);
  cmd.add_option("--context-dist", c.context_dist,
                 "Mixed: the decode sequences' cached tokens drawn from uniform:LO:HI (whole "
                 "numbers, LO >= 1), seeded by --context-seed")
      ->group(group);
  cmd.add_option("--context-seed", c.context_seed, "Mixed: the seed of --context-dist's draws")
      ->capture_default_str()
      ->group(group);
  cmd.add_option("--prefill-share", c.prefill_share,
                 "Mixed: the step's prefill tokens as a share (0..1) of its tokens, which stay "
                 "--prefill-seqs x --chunk + --decode-batch: round(share x tokens) prefill tokens "
                 "in chunks over --prefill-seqs sequences, the rest decode tokens (0: decode "
                 "only, 1: chunks only)")
      ->check(CLI::Validator(
          [](std::string& text) {
            std::string canonical;
            return prefill_share_problem(text, canonical);
          },
          "SHARE"))
      ->group(group);
}

void bind_trace_options(CLI::App& cmd, RunConfig& c) {
  const char* const group = "Trace run (--phase mixed --trace or --trace-gen)";
  bind_trace_options(
      cmd,
      TraceOptionFields{
          &c.trace,
          &c.trace_gen,
          &c.token_budget,
          &c.max_batch,
          &c.kv_capacity,
          &c.slo_ttft_ms,
          &c.slo_tpot_ms,
          {"Replay a serving trace (CSV arrival_s,prompt_tokens,output_tokens, or .jsonl) with "
           "real mixed steps: continuous batching decides each step, every rank runs it, and "
           "each request's TTFT, TPOT and end-to-end latency are measured (docs/SERVING.md)",
           "Replay a generated trace: rate=R (requests/s, Poisson),requests=N,prompt=L,"
           "output=L,seed=S; L is N, A:B (uniform) or A/B/C (one of a list)",
           "Trace: tokens per step, decode and prefill together (default 256 on host, 2048 on "
           "GPUs; --chunk is the prefill tokens of one sequence per step)",
           "Trace: sequences per step at most (default 16 on host, 64 on GPUs)",
           "Trace: KV cache tokens of all running sequences together (default 262144)",
           "Trace: goodput's time-to-first-token target (ms)",
           "Trace: goodput's time-per-output-token target (ms)"}},
      group);
  cmd.add_option("--duration", c.duration_s,
                 "Trace: replay the requests arriving in the trace's first S seconds (each then "
                 "runs to its last token); default: every request")
      ->check(number_above(0))
      ->group(group);
  cmd.add_option("--trace-warmup", c.trace_warmup,
                 "Trace: untimed replays of the whole trace before the measured one, so that "
                 "each step shape has run once before it is timed (first uses load kernels "
                 "and choose GEMM algorithms); 0: none")
      ->check(CLI::Range(0, 10))
      ->capture_default_str()
      ->group(group);
}

ServingPlan serving_plan_of(const RunConfig& c) {
  ServingPlan plan;
  plan.scheduler = scheduler_of(c);
  plan.duration_s = c.duration_s;
  plan.warmup_passes = c.trace_warmup;
  plan.slo_ttft_s = c.slo_ttft_ms / 1e3;
  plan.slo_tpot_s = c.slo_tpot_ms / 1e3;
  std::vector<Request> all;
  if (!c.trace.empty()) {
    plan.source = c.trace;
    all = read_trace(c.trace, c.kv_capacity);
  } else {
    plan.source = "--trace-gen " + c.trace_gen;
    all = generate_trace(parse_trace_generator(c.trace_gen));
    check_trace(all, c.kv_capacity, "--trace-gen");
  }
  for (const Request& r : all)
    if (c.duration_s <= 0 || r.arrival_s < c.duration_s) plan.requests.push_back(r);
  return plan;
}

void apply_mixed_defaults(RunConfig& c, bool host) {
  if (!mixed(c)) return;
  // Defaults that fit in a sequence of --seq tokens.
  if (c.context < 0) c.context = std::clamp<int64_t>(c.seq - 1, 1, host ? 256 : 1);
  if (trace_run(c)) {
    // The scheduler's limits; the step's own options stay unset (its scheduler makes each step).
    const SchedulerConfig d;
    if (c.chunk == 0) c.chunk = host ? 128 : d.chunk;
    if (c.token_budget == 0) c.token_budget = host ? 256 : d.token_budget;
    if (c.max_batch == 0) c.max_batch = host ? 16 : d.max_batch;
    if (c.kv_capacity == 0) c.kv_capacity = d.kv_capacity_tokens;
    return;
  }
  if (c.prefill_seqs < 0) c.prefill_seqs = 1;
  if (c.chunk_context < 0) c.chunk_context = 0;
  if (c.chunk == 0) c.chunk = std::clamp<int64_t>(c.seq - c.chunk_context, 1, host ? 128 : 512);
  if (c.decode_batch < 0)
    c.decode_batch =
        !c.contexts.empty() ? static_cast<int64_t>(split_list(c.contexts).size()) : (host ? 4 : 64);
}

int64_t mixed_tokens(const RunConfig& c) {
  if (trace_run(c)) return std::max<int64_t>(c.token_budget, 1);
  return std::max<int64_t>(option_tokens(c), 1);
}

ShareMix prefill_share_mix(int64_t tokens, int64_t prefill_seqs, double share) {
  ShareMix m;
  m.prefill_tokens = (share_units(share) * tokens + kShareUnits / 2) / kShareUnits;
  m.decode_tokens = tokens - m.prefill_tokens;
  const int64_t seqs = std::min(std::max<int64_t>(prefill_seqs, 0), m.prefill_tokens);
  for (int64_t i = 0; i < seqs; ++i)
    m.chunks.push_back(m.prefill_tokens / seqs + (i < m.prefill_tokens % seqs ? 1 : 0));
  return m;
}

std::string prefill_share_problem(const std::string& item, std::string& canonical) {
  char* end = nullptr;
  const double v = item.empty() || std::isspace(static_cast<unsigned char>(item[0]))
                       ? std::numeric_limits<double>::quiet_NaN()
                       : std::strtod(item.c_str(), &end);
  if (!(v >= 0 && v <= 1) || end != item.c_str() + item.size())
    return "expected a number from 0 to 1 (the prefill share of the step's tokens), got '" + item +
           "'";
  canonical = share_text(v);
  return "";
}

std::string share_text(double share) {
  const int64_t units = share_units(share);
  std::string text = std::to_string(units / kShareUnits);
  std::string fraction = std::to_string(kShareUnits + units % kShareUnits).substr(1);
  fraction.erase(fraction.find_last_not_of('0') + 1);
  return fraction.empty() ? text : text + "." + fraction;
}

double prefill_share_of(const RunConfig& c) {
  if (!mixed(c)) return std::numeric_limits<double>::quiet_NaN();
  if (c.prefill_share >= 0) return c.prefill_share;
  const int64_t tokens = option_tokens(c);
  return tokens == 0 ? 0.0
                     : static_cast<double>(tokens - std::max<int64_t>(c.decode_batch, 0)) /
                           static_cast<double>(tokens);
}

namespace {

// The step's sequences: the decode contexts, the tokens, and each sequence within its KV cache
// block (--seq tokens at most: its context and the step's tokens).
void step_problems(const RunConfig& c, std::vector<std::string>& p) {
  if (!c.contexts.empty() && !c.context_dist.empty())
    p.push_back("--contexts and --context-dist both give the decode contexts: give one");
  if (!c.contexts.empty() && c.decode_batch != static_cast<int64_t>(split_list(c.contexts).size()))
    p.push_back("--decode-batch " + std::to_string(c.decode_batch) + " but --contexts lists " +
                std::to_string(split_list(c.contexts).size()) + " context(s)");
  if (c.prefill_seqs == 0 && c.decode_batch == 0)
    p.push_back("--phase mixed: the step has no token (--prefill-seqs 0 and --decode-batch 0)");
  StepMix mix;
  try {
    mix = step_mix(c);
  } catch (const UsageError& e) {
    p.push_back(e.what());
    return;
  }
  const std::string share = c.prefill_share >= 0 ? share_text(c.prefill_share) : "";
  if (const int64_t held = mix.prefill_tokens + mix.decode_tokens; held < option_tokens(c))
    p.push_back("--prefill-share " + share + " puts " + std::to_string(option_tokens(c) - held) +
                " token(s) in prefill chunks: give --prefill-seqs >= 1 to hold them");
  if (c.contexts.empty() && c.context_dist.empty() && mix.decode_tokens > 0 && c.context < 1)
    p.push_back("--phase mixed: --context " + std::to_string(c.context) +
                ": each decode sequence needs at least 1 cached token");
  for (const StepEntry& e : mix.entries)
    if (e.kind == EntryKind::decode && e.context + 1 > c.seq) {
      p.push_back("--phase mixed: a decode context of " + std::to_string(e.context) +
                  " and its new token exceed --seq " + std::to_string(c.seq) +
                  " (the longest sequence a KV cache block holds)");
      break;
    }
  for (const StepEntry& e : mix.entries)
    if (e.kind == EntryKind::prefill && e.context + e.tokens > c.seq) {
      p.push_back("--phase mixed: --chunk-context " + std::to_string(c.chunk_context) + " + " +
                  (share.empty() ? "--chunk " + std::to_string(c.chunk)
                                 : "a chunk of " + std::to_string(e.tokens) +
                                       " tokens (--prefill-share " + share + ")") +
                  " exceed --seq " + std::to_string(c.seq) +
                  " (the longest sequence a KV cache block holds)");
      break;
    }
  const double elements = static_cast<double>(mixed_tokens(c)) * static_cast<double>(c.hidden);
  if (elements >= 2147483647.0)
    p.push_back("--phase mixed: the step's activations (tokens x hidden) exceed 2^31 elements");
}

// A trace run's options and its trace: the scheduler makes every step, within the capacity
// step its stage is built at (--seq tokens a sequence at most), one TP group, one strategy.
void trace_problems(const RunConfig& c, const std::vector<Overlap>& overlaps,
                    std::vector<std::string>& p) {
  if (!c.trace.empty() && !c.trace_gen.empty())
    p.emplace_back("--trace and --trace-gen: give one trace");
  if (c.prefill_seqs >= 0 || c.chunk_context >= 0 || c.decode_batch >= 0 || !c.contexts.empty() ||
      !c.context_dist.empty() || c.prefill_share >= 0)
    p.emplace_back("--trace: the scheduler makes each step of a trace run: no --prefill-seqs, "
                   "--chunk-context, --decode-batch, --contexts, --context-dist or "
                   "--prefill-share");
  if (const std::string problem = check_scheduler_config(scheduler_of(c)); !problem.empty())
    p.push_back("--token-budget/--chunk/--max-batch/--kv-capacity: " + problem);
  if (c.dp != 1) p.emplace_back("--trace replays one TP group: use --dp 1");
  if (overlaps.size() > 1 || split_list(c.attention).size() > 1)
    p.emplace_back("--trace replays the trace once: give one --overlap and one --attention");
  for (const Overlap& o : overlaps)
    if (o.kind == Overlap::Kind::chunked) {
      p.push_back("--trace: a step may hold any number of tokens, which --overlap " + o.name() +
                  " cannot always cut: use none or async");
      break;
    }
  if (!p.empty()) return;
  ServingPlan plan;
  try {
    plan = serving_plan_of(c);
  } catch (const UsageError& e) {
    p.emplace_back(e.what());
    return;
  }
  if (plan.requests.empty()) {
    p.push_back("--duration " + attr_to_string(AttrValue{c.duration_s}) + ": no request of " +
                plan.source + " arrives before it");
    return;
  }
  for (const Request& r : plan.requests)
    if (r.prompt_tokens + r.output_tokens > c.seq) {
      p.push_back(plan.source + ": request " + std::to_string(r.id) + " holds " +
                  std::to_string(r.prompt_tokens) + " + " + std::to_string(r.output_tokens) +
                  " tokens, more than --seq " + std::to_string(c.seq) +
                  " (the longest sequence a KV cache block of the run holds): give a larger "
                  "--seq");
      break;
    }
  const double elements = static_cast<double>(c.token_budget) * static_cast<double>(c.hidden);
  if (elements >= 2147483647.0)
    p.push_back("--token-budget: a step's activations (tokens x hidden) exceed 2^31 elements");
}

// What a mixed step does not run.
void unsupported_problems(const RunConfig& c, const std::vector<Overlap>& overlaps,
                          std::vector<std::string>& p) {
  for (const Overlap& o : overlaps)
    if (const std::string problem = mixed_overlap_problem(o, c.sequence_parallel);
        !problem.empty()) {
      p.push_back(problem);
      break;
    }
  if (c.sequence_parallel && overlaps.empty()) p.push_back(mixed_overlap_problem(Overlap{}, true));
  if (c.pp > 1) p.push_back("--phase mixed runs one pipeline stage: use --pp 1");
  if (c.graphs) p.push_back("--phase mixed runs eagerly: not with --graphs");
  if (c.microbatches > 1) p.push_back("--phase mixed runs one step: use --microbatches 1");
  if (!c.schedule.empty()) p.push_back("--schedule pipelines prefill or train, not a mixed step");
  if (c.experts > 0) p.push_back("--phase mixed runs dense layers (no --experts)");
}

} // namespace

std::vector<std::string> mixed_problems(const RunConfig& c, const std::vector<Overlap>& overlaps,
                                        bool executes) {
  std::vector<std::string> p;
  if (!mixed(c)) {
    const bool given = c.prefill_seqs >= 0 || c.chunk > 0 || c.chunk_context >= 0 ||
                       c.decode_batch >= 0 || !c.contexts.empty() || !c.context_dist.empty() ||
                       c.prefill_share >= 0;
    if (given)
      p.push_back("--prefill-seqs, --chunk, --chunk-context, --decode-batch, --contexts, "
                  "--context-dist and --prefill-share describe a mixed step: they need --phase "
                  "mixed (got --phase " +
                  c.phase + ")");
    if (trace_run(c))
      p.push_back("--trace and --trace-gen replay a trace of mixed steps: they need --phase "
                  "mixed (got --phase " +
                  c.phase + ")");
  }
  if (!trace_run(c)) {
    const bool given = c.token_budget > 0 || c.max_batch > 0 || c.kv_capacity > 0 ||
                       c.duration_s > 0 || c.slo_ttft_ms > 0 || c.slo_tpot_ms > 0 ||
                       c.trace_warmup != 1;
    if (given)
      p.push_back("--token-budget, --max-batch, --kv-capacity, --duration, --trace-warmup, "
                  "--slo-ttft-ms and --slo-tpot-ms set a trace run's scheduler: give --trace or "
                  "--trace-gen");
  }
  if (!mixed(c)) return p;
  if (!executes) {
    p.push_back("--phase mixed runs with `ridgeline run`; `ridgeline model --trace` predicts "
                "mixed steps");
    return p;
  }
  if (trace_run(c))
    trace_problems(c, overlaps, p);
  else
    step_problems(c, p);
  unsupported_problems(c, overlaps, p);
  return p;
}

StepMix mixed_step_of(const RunConfig& c) {
  if (!mixed(c)) return {};
  return step_mix(c);
}

Attrs mix_attrs(const StepMix& mix) {
  const MixSummary s = mix_summary(mix);
  return {{"mix_prefill_tokens", s.prefill_tokens},
          {"mix_decode_tokens", s.decode_tokens},
          {"mix_prefill_sequences", s.prefill_sequences},
          {"mix_decode_sequences", s.decode_sequences},
          {"mix_context_min", s.context_min},
          {"mix_context_mean", s.context_mean},
          {"mix_context_max", s.context_max}};
}

} // namespace ridgeline
