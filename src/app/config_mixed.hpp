// The options of a mixed step (`run --phase mixed`): prefill chunks and decode tokens of their
// own sequences in one step. Bound on `run` alone (`model --trace` has its own scheduler's
// --chunk), defaulted, validated and turned into the step's StepMix here.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "app/config.hpp"
#include "models/serving.hpp"
#include "parallel/overlap.hpp"

namespace ridgeline {

/// Binds --prefill-seqs, --chunk, --chunk-context, --decode-batch, --contexts, --context-dist
/// and --context-seed to `cfg`.
void bind_mixed_options(CLI::App& cmd, RunConfig& cfg);
/// Fills the mixed options left unset (--phase mixed only) with the defaults of `host`.
void apply_mixed_defaults(RunConfig& cfg, bool host);
/// Tokens of the step a completed mixed configuration runs (at least 1, for the shape checks
/// that run beside the mixed ones).
int64_t mixed_tokens(const RunConfig& cfg);
/// Every problem of the mixed options: given without --phase mixed; or, with it, a bad
/// context list or distribution, a context below 1, a sequence longer than --seq (its KV
/// cache), a step without tokens, and what a mixed step does not run (`overlaps` it cannot
/// cut, pipelines, graphs, microbatches, schedules, experts). `executes` false: refused
/// (predictions of mixed steps come from `model --trace`).
std::vector<std::string> mixed_problems(const RunConfig& cfg, const std::vector<Overlap>& overlaps,
                                        bool executes);
/// The step of a validated mixed configuration (empty entries otherwise).
StepMix mixed_step_of(const RunConfig& cfg);
/// The mixed options as /config attributes (none unless --phase mixed).
Attrs mixed_config_attrs(const RunConfig& cfg);
/// A step's mix as /summary attributes: mix_prefill_tokens, mix_decode_tokens,
/// mix_prefill_sequences, mix_decode_sequences, mix_context_min, mix_context_mean,
/// mix_context_max (the decode entries' contexts).
Attrs mix_attrs(const StepMix& mix);

} // namespace ridgeline
