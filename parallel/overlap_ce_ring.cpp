// ce-ring and ce-ring:K: the tokens cut into tp pieces and the collectives turned into puts into
// the peers' exchange windows (TpStage's sites in tp_layer_ring.cpp, TrainStage's forward and
// backward sites in train_ring.cpp).
#include "parallel/overlap_strategies.hpp"

namespace ridgeline {

OverlapPolicy ce_ring_policy(const Overlap& overlap) {
  OverlapPolicy p;
  p.overlap = overlap;
  p.queue = Lane::comm;
  p.ring = true;
  p.ring_subpieces = overlap.degree;
  return p;
}

void ce_ring_problems(const Overlap& o, const LayerShape& s, StageExecutor,
                      std::vector<std::string>& out) {
  const int64_t t = s.tokens();
  const bool sp = s.sequence_parallel && s.tp > 1;
  const int sub = o.ring_subpieces();
  if (s.tp > 1 && (sub > 1 || !sp) && t % (s.tp * sub) != 0)
    out.push_back(o.name() + ": the " + std::to_string(t) +
                  " tokens per microbatch do not divide into " + std::to_string(s.tp * sub) +
                  (sub > 1 ? " sub-pieces (tp pieces of " + std::to_string(sub) + ")"
                           : " pieces (one per tp rank)"));
}

} // namespace ridgeline
