// split:N: the microbatch cut into N parts whose layers interleave phase by phase, so that one
// part's collective runs under another part's compute. TpStage cuts a single prefill sequence
// into N causal token ranges instead; TrainStage cuts whole sequences only (its attention and
// attention backward take whole sequences, never a token range attending to earlier ones).
#include "parallel/overlap_strategies.hpp"

namespace ridgeline {

OverlapPolicy split_policy(const Overlap& overlap) {
  OverlapPolicy p;
  p.overlap = overlap;
  p.parts = overlap.degree;
  p.queue = Lane::comm;
  return p;
}

bool splits_tokens(const LayerShape& s, const Overlap& o) {
  return o.parts() > 1 && s.batch == 1 && s.phase == Phase::prefill;
}

void split_problems(const Overlap& o, const LayerShape& s, StageExecutor executor,
                    std::vector<std::string>& out) {
  const bool train = executor == StageExecutor::train;
  if (s.batch % o.parts() == 0 || (!train && splits_tokens(s, o))) return;
  out.push_back(o.name() + " splits the batch: " + std::to_string(s.batch) +
                " sequences per microbatch do not divide into " + std::to_string(o.parts()) +
                " parts" +
                (train ? std::string(" (the train stage, which runs the train phase and "
                                     "scheduled prefill, splits whole sequences only: its "
                                     "attention and attention backward take no token range of a "
                                     "sequence)")
                       : std::string()));
}

} // namespace ridgeline
