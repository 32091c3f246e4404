// The options of a mixed step (see config_mixed.hpp).
#include "app/config_mixed.hpp"

#include <algorithm>
#include <charconv>

#include "app/command_support.hpp"
#include "core/error.hpp"
#include "parallel/tp_layer.hpp"

namespace ridgeline {
namespace {

bool mixed(const RunConfig& c) {
  return c.phase == "mixed";
}

// The decode contexts: --contexts as given, else --context-dist's draws, else --context each.
// Throws UsageError on a bad list or distribution.
std::vector<int64_t> decode_contexts(const RunConfig& c) {
  if (!c.contexts.empty()) {
    std::vector<int64_t> out;
    for (const std::string& item : split_list(c.contexts)) {
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
  const int64_t batch = std::max<int64_t>(c.decode_batch, 0);
  if (!c.context_dist.empty()) return ragged_contexts(c.context_dist, batch, c.context_seed);
  return std::vector<int64_t>(static_cast<size_t>(batch), c.context);
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
}

void apply_mixed_defaults(RunConfig& c, bool host) {
  if (!mixed(c)) return;
  // Defaults that fit in a sequence of --seq tokens.
  if (c.context < 0) c.context = std::clamp<int64_t>(c.seq - 1, 1, host ? 256 : 1);
  if (c.prefill_seqs < 0) c.prefill_seqs = 1;
  if (c.chunk_context < 0) c.chunk_context = 0;
  if (c.chunk == 0) c.chunk = std::clamp<int64_t>(c.seq - c.chunk_context, 1, host ? 128 : 512);
  if (c.decode_batch < 0)
    c.decode_batch =
        !c.contexts.empty() ? static_cast<int64_t>(split_list(c.contexts).size()) : (host ? 4 : 64);
}

int64_t mixed_tokens(const RunConfig& c) {
  const int64_t chunks = std::max<int64_t>(c.prefill_seqs, 0) * std::max<int64_t>(c.chunk, 0);
  return std::max<int64_t>(chunks + std::max<int64_t>(c.decode_batch, 0), 1);
}

std::vector<std::string> mixed_problems(const RunConfig& c, const std::vector<Overlap>& overlaps,
                                        bool executes) {
  std::vector<std::string> p;
  if (!mixed(c)) {
    const bool given = c.prefill_seqs >= 0 || c.chunk > 0 || c.chunk_context >= 0 ||
                       c.decode_batch >= 0 || !c.contexts.empty() || !c.context_dist.empty();
    if (given)
      p.push_back("--prefill-seqs, --chunk, --chunk-context, --decode-batch, --contexts and "
                  "--context-dist describe a mixed step: they need --phase mixed (got --phase " +
                  c.phase + ")");
    return p;
  }
  if (!executes) {
    p.push_back("--phase mixed runs with `ridgeline run`; `ridgeline model --trace` predicts "
                "mixed steps");
    return p;
  }
  if (!c.contexts.empty() && !c.context_dist.empty())
    p.push_back("--contexts and --context-dist both give the decode contexts: give one");
  if (!c.contexts.empty() && c.decode_batch != static_cast<int64_t>(split_list(c.contexts).size()))
    p.push_back("--decode-batch " + std::to_string(c.decode_batch) + " but --contexts lists " +
                std::to_string(split_list(c.contexts).size()) + " context(s)");
  std::vector<int64_t> contexts;
  try {
    contexts = decode_contexts(c);
  } catch (const UsageError& e) {
    p.push_back(e.what());
  }
  if (c.prefill_seqs == 0 && c.decode_batch == 0)
    p.push_back("--phase mixed: the step has no token (--prefill-seqs 0 and --decode-batch 0)");
  if (c.contexts.empty() && c.context_dist.empty() && c.decode_batch > 0 && c.context < 1)
    p.push_back("--phase mixed: --context " + std::to_string(c.context) +
                ": each decode sequence needs at least 1 cached token");
  // A sequence's cache block holds --seq tokens at most: its context and the step's tokens.
  for (int64_t context : contexts)
    if (context + 1 > c.seq) {
      p.push_back("--phase mixed: a decode context of " + std::to_string(context) +
                  " and its new token exceed --seq " + std::to_string(c.seq) +
                  " (the longest sequence a KV cache block holds)");
      break;
    }
  if (c.prefill_seqs > 0 && c.chunk_context + c.chunk > c.seq)
    p.push_back("--phase mixed: --chunk-context " + std::to_string(c.chunk_context) +
                " + --chunk " + std::to_string(c.chunk) + " exceed --seq " + std::to_string(c.seq) +
                " (the longest sequence a KV cache block holds)");
  const double elements = static_cast<double>(mixed_tokens(c)) * static_cast<double>(c.hidden);
  if (elements >= 2147483647.0)
    p.push_back("--phase mixed: the step's activations (tokens x hidden) exceed 2^31 elements");
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
  return p;
}

StepMix mixed_step_of(const RunConfig& c) {
  if (!mixed(c)) return {};
  const std::vector<int64_t> chunks(static_cast<size_t>(std::max<int64_t>(c.prefill_seqs, 0)),
                                    c.chunk);
  return mixed_step_mix(decode_contexts(c), chunks, c.chunk_context);
}

Attrs mixed_config_attrs(const RunConfig& c) {
  if (!mixed(c)) return {};
  return {{"prefill_seqs", c.prefill_seqs},
          {"chunk", c.chunk},
          {"chunk_context", c.chunk_context},
          {"decode_batch", c.decode_batch},
          {"contexts", c.contexts},
          {"context_dist", c.context_dist},
          {"context_seed", static_cast<int64_t>(c.context_seed)}};
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
