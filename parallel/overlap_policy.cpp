// The policies' dispatch through the registry and the problems every strategy shares (see
// overlap_policy.hpp); `none`, the default policy, is here too.
#include "parallel/overlap_policy.hpp"

#include "parallel/overlap_strategies.hpp"

namespace ridgeline {

OverlapPolicy none_policy(const Overlap& overlap) {
  OverlapPolicy p;
  p.overlap = overlap;
  return p;
}

OverlapPolicy overlap_policy(const Overlap& overlap) {
  const OverlapPolicy p = overlap_form(overlap.kind).policy(overlap);
  return overlap.symmetric ? symmetric_policy(p) : p;
}

std::vector<std::string> policy_problems(const Overlap& o, const LayerShape& s,
                                         StageExecutor executor) {
  std::vector<std::string> p;
  const OverlapForm& form = overlap_form(o.kind);
  const OverlapPolicy policy = overlap_policy(o);
  // The strategy's own (split: the batch its parts take; ce-ring: its pieces), then every
  // strategy's: its units' row blocks, and the tp shards of each under sequence parallelism.
  if (form.problems) form.problems(o, s, executor, p);
  const int64_t t = s.tokens();
  const bool sp = s.sequence_parallel && s.tp > 1;
  const int64_t divisor = static_cast<int64_t>(policy.units()) * (sp ? s.tp : 1);
  if (t % divisor != 0)
    p.push_back(o.name() + (sp ? " with sequence parallelism" : "") + ": the " + std::to_string(t) +
                " tokens per microbatch do not divide into " + std::to_string(divisor) +
                " equal row blocks" + (sp ? " (chunks x parts x tp)" : " (chunks x parts)"));
  return p;
}

} // namespace ridgeline
