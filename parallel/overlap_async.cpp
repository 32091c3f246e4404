// async: every collective on the comm lane, behind a fence on the compute that produced its
// input; the compute waits on a fence after it, so it overlaps whatever compute is independent.
#include "parallel/overlap_strategies.hpp"

namespace ridgeline {

OverlapPolicy async_policy(const Overlap& overlap) {
  OverlapPolicy p;
  p.overlap = overlap;
  p.queue = Lane::comm;
  return p;
}

} // namespace ridgeline
