// The strategies' makers and their own problems, one file each (overlap_<strategy>.cpp); the
// registry rows of overlap.cpp point at them. Internal to the overlap sources.
#pragma once

#include <string>
#include <vector>

#include "parallel/overlap_policy.hpp"

namespace ridgeline {

// none: collectives on the compute lane, serialized (overlap_policy.cpp).
OverlapPolicy none_policy(const Overlap& overlap);
// async: collectives on the comm lane behind fences (overlap_async.cpp).
OverlapPolicy async_policy(const Overlap& overlap);
// chunked:K: K units per site, each unit's collective beside the next unit's GEMM
// (overlap_chunked.cpp).
OverlapPolicy chunked_policy(const Overlap& overlap);
// split:N: N parts whose layers interleave (overlap_split.cpp).
OverlapPolicy split_policy(const Overlap& overlap);
void split_problems(const Overlap& overlap, const LayerShape& shape, StageExecutor executor,
                    std::vector<std::string>& out);
// ce-ring and ce-ring:K: the collectives as puts into the peers' windows (overlap_ce_ring.cpp;
// TpStage runs its sites in tp_layer_ring.cpp, TrainStage in train_ring.cpp).
OverlapPolicy ce_ring_policy(const Overlap& overlap);
void ce_ring_problems(const Overlap& overlap, const LayerShape& shape, StageExecutor executor,
                      std::vector<std::string>& out);
// symm:S: S's policy with the collectives' buffers in symmetric memory (overlap_symm.cpp).
OverlapPolicy symmetric_policy(OverlapPolicy inner);

} // namespace ridgeline
