// The options of a mixed step (`run --phase mixed`): prefill chunks and decode tokens of their
// own sequences in one step. Bound on `run` and `sweep` (`model --trace` has its own
// scheduler's --chunk), defaulted, validated and turned into the step's StepMix here.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "app/config.hpp"
#include "models/serving.hpp"
#include "parallel/overlap.hpp"

namespace ridgeline {

/// Binds --trace, --trace-gen, --token-budget, --max-batch, --kv-capacity, --duration,
/// --trace-warmup, --slo-ttft-ms and --slo-tpot-ms to `cfg` (`run` only; --chunk is
/// bind_mixed_options').
void bind_trace_options(CLI::App& cmd, RunConfig& cfg);

/// A trace run's requests and scheduler, read once where its point is resolved.
struct ServingPlan {
  std::string source;            ///< the trace file, or "--trace-gen " and its specification
  std::vector<Request> requests; ///< those arriving before duration_s (all with 0)
  SchedulerConfig scheduler;
  double duration_s = 0;                 ///< 0: every request
  int warmup_passes = 1;                 ///< untimed replays before the measured one
  double slo_ttft_s = 0, slo_tpot_s = 0; ///< 0: no target
};
/// The plan of a completed trace run's configuration. Throws UsageError for a trace that cannot
/// be read or checked (read_trace(), check_trace()).
ServingPlan serving_plan_of(const RunConfig& cfg);

/// Binds --prefill-seqs, --chunk, --chunk-context, --decode-batch, --contexts, --context-dist,
/// --context-seed and --prefill-share to `cfg`.
void bind_mixed_options(CLI::App& cmd, RunConfig& cfg);
/// Fills the mixed options left unset (--phase mixed only) with the defaults of `host`.
void apply_mixed_defaults(RunConfig& cfg, bool host);
/// Tokens of the step a completed mixed configuration runs (a trace run: its capacity step's,
/// the token budget) (at least 1, for the shape checks
/// that run beside the mixed ones).
int64_t mixed_tokens(const RunConfig& cfg);
/// A mixed step moved to a prefill share `share` (0..1) of its `tokens` (T, kept): prefill
/// tokens P = round(share x T), halves up, the share taken to 1e-6 (exact integer arithmetic);
/// decode tokens T - P; the P tokens in one chunk each of min(prefill_seqs, P) sequences, as
/// even as whole tokens allow (P / n each, the first P mod n one token longer). Share 0: decode
/// tokens only; share 1: chunks only. With prefill_seqs 0 and P > 0, no chunk holds them
/// (mixed_problems refuses that).
struct ShareMix {
  int64_t prefill_tokens = 0, decode_tokens = 0;
  std::vector<int64_t> chunks; ///< each prefilled sequence's chunk, in tokens
};
ShareMix prefill_share_mix(int64_t tokens, int64_t prefill_seqs, double share);
/// Checks a --prefill-share value (a number from 0 to 1) and sets `canonical` to its
/// share_text(); returns the problem ("" if none).
std::string prefill_share_problem(const std::string& item, std::string& canonical);
/// A share as options, labels and tables write it: to 1e-6, without trailing zeros ("0.25",
/// "1", "0.333333").
std::string share_text(double share);
/// The prefill share of a mixed configuration: --prefill-share where given, else its own mix's
/// prefill tokens / tokens; NaN for the other phases.
double prefill_share_of(const RunConfig& cfg);
/// Every problem of the mixed options: given without --phase mixed; or, with it, a bad
/// context list or distribution, a context below 1, a sequence longer than --seq (its KV
/// cache), a step without tokens, a --prefill-share with prefill tokens and no --prefill-seqs
/// to hold them, and what a mixed step does not run (`overlaps` it cannot cut, pipelines,
/// graphs, microbatches, schedules, experts). `executes` false: refused (predictions of mixed
/// steps come from `model --trace`).
std::vector<std::string> mixed_problems(const RunConfig& cfg, const std::vector<Overlap>& overlaps,
                                        bool executes);
/// The step of a validated mixed configuration (empty entries otherwise); a trace run's is its
/// capacity, serving_capacity_mix() of its scheduler and --seq (its longest request's tokens at
/// most).
StepMix mixed_step_of(const RunConfig& cfg);
/// A step's mix as /summary attributes: mix_prefill_tokens, mix_decode_tokens,
/// mix_prefill_sequences, mix_decode_sequences, mix_context_min, mix_context_mean,
/// mix_context_max (the decode entries' contexts).
Attrs mix_attrs(const StepMix& mix);

} // namespace ridgeline
